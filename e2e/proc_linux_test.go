//go:build linux

package e2e

import (
	"os/exec"
	"syscall"
)

// setChildAttributes makes the kernel kill a node when the test binary dies
// (a panic or a -timeout abort), so no linkraft process outlives the run.
func setChildAttributes(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

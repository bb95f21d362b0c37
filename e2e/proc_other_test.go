//go:build !linux

package e2e

import "os/exec"

// setChildAttributes has nothing to add where there is no parent-death
// signal; t.Cleanup still kills every node.
func setChildAttributes(*exec.Cmd) {}

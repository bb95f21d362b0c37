package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// maxUnitExposure is the highest "systemd-analyze security" rating the
// shipped units may have. Both are sandboxed as far as a program that talks
// TCP and UDP to other machines can be (docs/DEPLOY.md, "Hardening"); a
// directive dropped or mistyped raises the rating above it.
const maxUnitExposure = 2.0

var exposureLine = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`)

// TestSystemdUnitsHardened rates deploy/linkraft.service and
// deploy/linkraft-backup.service with systemd's own analysis, offline (no
// running systemd needed). It also fails on any warning about the unit
// file, such as an unknown or misspelt directive, which systemd would
// ignore and so leave a hole without saying so at start.
func TestSystemdUnitsHardened(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		realPartMissing(t, "no systemd-analyze on PATH", "install Debian's systemd package (`make deps` does)")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, unit := range []string{"linkraft.service", "linkraft-backup.service"} {
		t.Run(unit, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, analyze, "security", "--offline=yes", "--no-pager",
				filepath.Join(root, "deploy", unit))
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("systemd-analyze security --offline=yes deploy/%s: %v\n%s%s", unit, err, out, stderr.String())
			}
			if w := strings.TrimSpace(stderr.String()); w != "" {
				t.Errorf("systemd-analyze warns about deploy/%s:\n%s", unit, w)
			}
			m := exposureLine.FindSubmatch(out)
			if m == nil {
				t.Fatalf("systemd-analyze security deploy/%s: no overall exposure level in:\n%s", unit, out)
			}
			level, err := strconv.ParseFloat(string(m[1]), 64)
			if err != nil {
				t.Fatalf("exposure level %q: %v", m[1], err)
			}
			if level > maxUnitExposure {
				var open []string
				for _, line := range strings.Split(string(out), "\n") {
					if strings.HasPrefix(line, "✗") {
						open = append(open, line)
					}
				}
				t.Errorf("deploy/%s: exposure %.1f, want at most %.1f; not set:\n%s",
					unit, level, maxUnitExposure, strings.Join(open, "\n"))
			}
			t.Logf("deploy/%s: exposure %.1f", unit, level)
		})
	}
}

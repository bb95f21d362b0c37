//go:build unix

package secure

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeyFileMustBeTheProcesssOwn: a cluster key file that group or
// others may read, or that another user owns, is refused with an error
// naming the file and the fix, and never shows the key; the owner's own
// 0600 or 0400 file is read.
func TestKeyFileMustBeTheProcesssOwn(t *testing.T) {
	text := GenerateKey()
	for _, tc := range []struct {
		name  string
		mode  os.FileMode
		owner int // -1: this process's user
		want  string
	}{
		{"owner only", 0o600, -1, ""},
		{"owner read only", 0o400, -1, ""},
		{"readable by all", 0o644, -1, "chmod 600"},
		{"writable by all", 0o666, -1, "chmod 600"},
		{"readable by group", 0o640, -1, "chmod 600"},
		{"another user's", 0o600, 65534, "chown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.owner >= 0 && os.Geteuid() != 0 {
				// Only root can give a file away; CI runs the tests as root.
				t.Skip("making a file another user's needs root")
			}
			path := filepath.Join(t.TempDir(), "cluster.key")
			if err := os.WriteFile(path, []byte(text+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			if tc.owner >= 0 {
				if err := os.Chown(path, tc.owner, tc.owner); err != nil {
					t.Fatal(err)
				}
			}
			key, err := ReadKeyFile(path)
			if tc.want == "" {
				if err != nil || key == nil {
					t.Fatalf("ReadKeyFile of the owner's own file: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ReadKeyFile of a %s file: read it, want a refusal", tc.name)
			}
			if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, tc.want) || strings.Contains(msg, text) {
				t.Errorf("refusal %q: want the file's path and %q, never the key", msg, tc.want)
			}
			// KeyFile never replaces a refused file with a new key.
			if _, _, err := KeyFile(path); err == nil {
				t.Error("KeyFile accepted the refused file")
			}
			if got, _ := os.ReadFile(path); strings.TrimSpace(string(got)) != text {
				t.Error("the refused file was changed")
			}
		})
	}
}

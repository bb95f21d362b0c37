package backups

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDirPut: a directory destination is its owner's alone, and a backup
// is written only as a new file of its own: a link placed at the
// temporary or the final name, or a file already there, is neither
// followed nor replaced.
func TestDirPut(t *testing.T) {
	const name = "linkraft-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-20261126T100000.000Z-1-0123456789abcdef.lkrb"
	for _, tc := range []struct {
		name string
		// before prepares the destination dir and the path outside it a
		// link may point at.
		before func(t *testing.T, dir, outside string)
		ok     bool
	}{
		{"a new directory", func(*testing.T, string, string) {}, true},
		{"an existing directory others may read", func(t *testing.T, dir, _ string) { mkdir(t, dir, 0o755) }, true},
		{"a link at the temporary name", func(t *testing.T, dir, outside string) {
			mkdir(t, dir, 0o700)
			writeFile(t, outside, "precious")
			symlink(t, outside, filepath.Join(dir, name+".tmp"))
		}, false},
		{"a dangling link at the temporary name", func(t *testing.T, dir, outside string) {
			mkdir(t, dir, 0o700)
			symlink(t, outside, filepath.Join(dir, name+".tmp"))
		}, false},
		{"a link at the final name", func(t *testing.T, dir, outside string) {
			mkdir(t, dir, 0o700)
			writeFile(t, outside, "precious")
			symlink(t, outside, filepath.Join(dir, name))
		}, false},
		{"a file at the final name", func(t *testing.T, dir, _ string) {
			mkdir(t, dir, 0o700)
			writeFile(t, filepath.Join(dir, name), "precious")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir, outside := filepath.Join(root, "backups"), filepath.Join(root, "outside")
			tc.before(t, dir, outside)
			type entry struct {
				mode os.FileMode
				data string
			}
			look := func() map[string]entry {
				got := map[string]entry{}
				for _, p := range []string{outside, filepath.Join(dir, name), filepath.Join(dir, name+".tmp")} {
					fi, err := os.Lstat(p)
					if err != nil {
						continue
					}
					data, _ := os.ReadFile(p)
					got[p] = entry{fi.Mode(), string(data)}
				}
				return got
			}
			before := look()
			err := Dir{Path: dir}.Put(context.Background(), name, strings.NewReader("backup"), 6)
			if (err == nil) != tc.ok {
				t.Fatalf("put: %v; want success %v", err, tc.ok)
			}
			if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
				t.Fatalf("the directory: %v, %v; want mode 0700", fi.Mode(), err)
			}
			after := look()
			if tc.ok {
				if e := after[filepath.Join(dir, name)]; e.data != "backup" || e.mode != 0o600 {
					t.Fatalf("the backup: %+v; want its bytes, mode 0600", e)
				}
				return
			}
			if !strings.Contains(err.Error(), name) {
				t.Errorf("the error does not name the backup: %v", err)
			}
			for p, e := range before {
				if after[p] != e {
					t.Errorf("%s changed: %+v, was %+v", p, after[p], e)
				}
			}
			for p, e := range after {
				if _, ok := before[p]; !ok {
					t.Errorf("%s made: %+v", p, e)
				}
			}
		})
	}
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

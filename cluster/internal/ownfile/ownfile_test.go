package ownfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: the file holds the data, only its owner may read it, a
// leftover temporary file from a crash does not stop the next write, and
// nothing but the file remains.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "admin.key")
	if err := os.WriteFile(path+".tmp", []byte("half"), 0o644); err != nil { // a crash mid-write
		t.Fatal(err)
	}
	for _, data := range []string{"first\n", "second\n"} {
		if err := Write(path, []byte(data)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("read back %q, %v; want %q", got, err, data)
		}
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Fatalf("mode %o, want 600", mode)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("%d files left in the directory, want 1", len(entries))
	}
}

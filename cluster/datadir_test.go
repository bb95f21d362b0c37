package cluster

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestDataDirIsTheOwners: a data dir an earlier build left open to others
// is tightened at start, and a snapshot Raft takes afterwards (its store
// writes 0755 directories and 0644 files) is the owner's alone too.
func TestDataDirIsTheOwners(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(dir, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old", "leftover"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n := openNode(t, dir)
	waitFor(t, n.leadership.ready)
	createURL(t, n, "https://example.com/snapshotted")
	if err := n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v: others may read it", p, info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	if err != nil || len(snaps) == 0 {
		t.Fatalf("no snapshot was taken: %v", err)
	}
}

package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
)

// Checkpoint writes a copy of the engine into dir (which must not exist),
// hard-linking its files, at the applied index it returns. No Commit runs
// during it, so the copy and the index agree. The copy opens with Open.
func (s *Store) Checkpoint(dir string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, fmt.Errorf("store: checkpoint into %s: closed", dir)
	}
	if s.noLog {
		// A checkpoint copies the log for what the memtables hold; with
		// no log they must be in files first.
		if err := s.db.Flush(); err != nil {
			return 0, fmt.Errorf("store: checkpoint into %s: %w", dir, err)
		}
	}
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return 0, fmt.Errorf("store: checkpoint into %s: %w", dir, err)
	}
	return s.applied.Load(), nil
}

// CloneCheckpoint makes dst (which must not exist) an engine of its own
// with what the checkpoint in src holds: its tables hard-linked (Pebble
// never changes one once written), every other file copied, since the
// engine opened in dst rewrites its manifest and markers.
func CloneCheckpoint(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("store: clone %s: %w", src, err)
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return fmt.Errorf("store: clone %s: %w", src, err)
	}
	for _, e := range entries {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		// A table is linked (tables never change), or copied where it
		// cannot be: a data dir split across file systems by hand.
		if filepath.Ext(e.Name()) != ".sst" || os.Link(from, to) != nil {
			err = copyFile(from, to)
		}
		if err != nil {
			return fmt.Errorf("store: clone %s: %w", src, err)
		}
	}
	if err := SyncDir(dst); err != nil {
		return err
	}
	return syncParent(dst)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// InstallDir is where a stream for the engine in dir is read into
// (ReadStream) before Swap puts it in dir's place.
func InstallDir(dir string) string { return dir + ".install" }

func oldDir(dir string) string { return dir + ".old" }

// Swap replaces the engine in dir, which must be closed, with the one
// ReadStream completed in InstallDir(dir). A crash at any step leaves
// either engine whole: Open finishes or undoes the swap (finishSwap).
//
//	dir → dir.old, dir.install → dir, sync the parent, remove dir.old
func Swap(dir string) error {
	install := InstallDir(dir)
	if _, err := os.Stat(install); err != nil {
		return fmt.Errorf("store: swap into %s: %w", dir, err)
	}
	// dir exists from here on, so that a missing dir always means "between
	// the two renames", never "a node whose first install was cut short".
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("store: swap into %s: %w", dir, err)
	}
	if err := os.RemoveAll(oldDir(dir)); err != nil {
		return fmt.Errorf("store: swap into %s: %w", dir, err)
	}
	if err := syncParent(dir); err != nil {
		return err
	}
	if err := os.Rename(dir, oldDir(dir)); err != nil {
		return fmt.Errorf("store: swap into %s: %w", dir, err)
	}
	if err := os.Rename(install, dir); err != nil {
		return fmt.Errorf("store: swap into %s: %w", dir, err)
	}
	if err := syncParent(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(oldDir(dir)); err != nil {
		return fmt.Errorf("store: swap into %s: remove the old engine: %w", dir, err)
	}
	return nil
}

// finishSwap brings dir to a whole engine after a crash during Swap or
// ReadStream: with dir present, what is beside it is a leftover (an
// install cut short, or an old engine not yet removed); with dir missing,
// Swap stopped between its renames and the install is complete.
func finishSwap(dir string) error {
	_, err := os.Stat(dir)
	switch {
	case err == nil:
		if err := os.RemoveAll(InstallDir(dir)); err != nil {
			return fmt.Errorf("store: open %s: remove an unfinished install: %w", dir, err)
		}
		if err := os.RemoveAll(oldDir(dir)); err != nil {
			return fmt.Errorf("store: open %s: remove the engine a swap replaced: %w", dir, err)
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("store: open %s: %w", dir, err)
	}
	if _, err := os.Stat(oldDir(dir)); err != nil {
		// A new node: no engine, no swap, perhaps an install cut short.
		if err := os.RemoveAll(InstallDir(dir)); err != nil {
			return fmt.Errorf("store: open %s: remove an unfinished install: %w", dir, err)
		}
		return nil
	}
	next := InstallDir(dir)
	if _, err := os.Stat(next); err != nil {
		next = oldDir(dir) // the install is gone (removed by hand?): the old engine is whole
	}
	if err := os.Rename(next, dir); err != nil {
		return fmt.Errorf("store: open %s: finish a swap: %w", dir, err)
	}
	if err := syncParent(dir); err != nil {
		return err
	}
	return finishSwap(dir)
}

// syncParent makes the renames in dir's parent durable.
func syncParent(dir string) error { return SyncDir(filepath.Dir(dir)) }

// SyncDir makes what was created, renamed or removed in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("store: sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("store: sync %s: %w", dir, err)
	}
	return nil
}

package backups

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Store is where backups are kept: a directory, or a prefix in a bucket.
// Names are the objects' base names, without the prefix.
type Store interface {
	// Put stores size bytes read from r under name, whole or not at all.
	Put(ctx context.Context, name string, r io.ReadSeeker, size int64) error
	// List names every object directly under the prefix.
	List(ctx context.Context) ([]string, error)
	// Get reads one object whole. A missing object is ErrNotFound.
	Get(ctx context.Context, name string) ([]byte, error)
	Delete(ctx context.Context, name string) error
	// String names the destination for logs and messages (no credentials).
	String() string
}

// ErrNotFound is an object the store does not have.
var ErrNotFound = errors.New("no such backup")

// maxObjects bounds how many objects a listing reads: a prefix holding
// more is not a backup destination of this cluster alone, and the
// listing would otherwise grow without end.
const maxObjects = 100_000

// Dir is a Store in a directory of this machine (or a mounted share). The
// directory is made owner-only, as the data dir: a backup holds every
// link and key.
type Dir struct{ Path string }

// Put writes name.tmp, syncs it and renames it into place, then syncs the
// directory, so a crash leaves the old listing or the new object whole.
func (d Dir) Put(_ context.Context, name string, r io.ReadSeeker, _ int64) (err error) {
	if err := os.MkdirAll(d.Path, 0o700); err != nil {
		return fmt.Errorf("backup directory: %w", err)
	}
	final := filepath.Join(d.Path, name)
	tmp := final + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = io.Copy(f, r); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, final); err != nil {
		return err
	}
	if dir, err := os.Open(d.Path); err == nil {
		dir.Sync()
		dir.Close()
	}
	return nil
}

// List names the regular files of the directory; a directory not made
// yet holds none.
func (d Dir) List(context.Context) ([]string, error) {
	entries, err := os.ReadDir(d.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.Path, err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && !strings.HasSuffix(e.Name(), ".tmp") {
			names = append(names, e.Name())
		}
		if len(names) == maxObjects {
			return nil, fmt.Errorf("list %s: more than %d files", d.Path, maxObjects)
		}
	}
	return names, nil
}

// Get is Store's: the file's bytes, ErrNotFound when there is none.
func (d Dir) Get(_ context.Context, name string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(d.Path, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, filepath.Join(d.Path, name))
	}
	return data, err
}

// Delete is Store's.
func (d Dir) Delete(_ context.Context, name string) error {
	return os.Remove(filepath.Join(d.Path, name))
}

// String is the directory's path.
func (d Dir) String() string { return d.Path }

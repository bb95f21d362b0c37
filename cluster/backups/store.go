package backups

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	// Get reads one object as a stream, never whole: a backup may be as
	// large as the state, and one under a backup's name may be anything.
	// The caller closes it. A missing object is ErrNotFound.
	Get(ctx context.Context, name string) (io.ReadCloser, error)
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
// link and key. Whoever else may write there (another account, a process
// sharing the mount) must not make this process write or read through a
// link of theirs, so files are opened without following one (noFollow).
type Dir struct{ Path string }

// Put writes name.tmp, a file it creates (never one already there, nor
// through a link), syncs it and links it to name only when no file has
// that name, then syncs the directory: a crash leaves the old listing or
// the new object whole, and no file is ever replaced. The directory is
// made, or tightened, to its owner alone; one this process may not
// change (a share's mount point owned by another) is left as it is: the
// files in it are the owner's alone all the same.
func (d Dir) Put(_ context.Context, name string, r io.ReadSeeker, _ int64) (err error) {
	if err := os.MkdirAll(d.Path, 0o700); err != nil {
		return fmt.Errorf("backup directory: %w", err)
	}
	if fi, err := os.Stat(d.Path); err != nil {
		return fmt.Errorf("backup directory: %w", err)
	} else if mode := fi.Mode().Perm(); mode&0o077 != 0 {
		if err := os.Chmod(d.Path, mode&0o700); err != nil && !errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("backup directory: %w", err)
		}
	}
	final := filepath.Join(d.Path, name)
	tmp := final + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	// Only what this call created is removed; on success the name stays.
	defer os.Remove(tmp)
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if _, err = io.Copy(f, r); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = placeNew(tmp, final); err != nil {
		return fmt.Errorf("store %s: %w", name, err)
	}
	if dir, err := os.Open(d.Path); err == nil {
		dir.Sync()
		dir.Close()
	}
	return nil
}

// placeNew gives the file at tmp the name final when no file, link
// included, has it. A hard link does that in one step; a filesystem
// without hard links (some shares) gets a look and a rename, which an
// object made between the two would lose to.
func placeNew(tmp, final string) error {
	err := os.Link(tmp, final)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	if _, lerr := os.Lstat(final); lerr == nil {
		return fmt.Errorf("%s: %w", final, fs.ErrExist)
	} else if !errors.Is(lerr, fs.ErrNotExist) {
		return lerr
	}
	if rerr := os.Rename(tmp, final); rerr != nil {
		return fmt.Errorf("%w (and no hard link: %v)", rerr, err)
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

// Get is Store's: the file as it is when opened (its size then), a
// regular file reached through no link; ErrNotFound when there is none.
func (d Dir) Get(_ context.Context, name string) (io.ReadCloser, error) {
	path := filepath.Join(d.Path, name)
	f, err := os.OpenFile(path, os.O_RDONLY|noFollow, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, path)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(f, fi.Size()), f}, nil
}

// Delete is Store's.
func (d Dir) Delete(_ context.Context, name string) error {
	return os.Remove(filepath.Join(d.Path, name))
}

// String is the directory's path.
func (d Dir) String() string { return d.Path }

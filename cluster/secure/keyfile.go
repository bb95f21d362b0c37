package secure

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ReadKeyFile reads the cluster key kept in path: the text ParseKey reads,
// as `linkraft keygen` prints it. Errors wrap fs.ErrNotExist when there is
// no file, and never show the file's content. A file that another user
// owns (who could change the key) or that group or others may read (who
// may have the key) is refused, naming the fix: a node trusts only a key
// that is its own.
func ReadKeyFile(path string) (*Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cluster key file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cluster key file: %w", err)
	}
	if err := ownFile(path, info); err != nil {
		return nil, err
	}
	text, err := io.ReadAll(io.LimitReader(f, maxKeyFile))
	if err != nil {
		return nil, fmt.Errorf("cluster key file: %w", err)
	}
	key, err := ParseKey(string(text))
	if err != nil {
		return nil, fmt.Errorf("cluster key file %s: %w", path, err)
	}
	return key, nil
}

// maxKeyFile bounds what is read of a key file: a key is some 50 bytes.
const maxKeyFile = 4 << 10

// KeyFile returns the cluster key kept in path, making one there first
// when there is none; made reports that this call made it. The file is
// readable by its owner only and appears whole: it is written under a
// temporary name and linked into place, which fails if another process
// put a key there meanwhile (nodes sharing one file, all started at
// once), and then the key read is that one.
func KeyFile(path string) (key *Key, made bool, err error) {
	key, err = ReadKeyFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	text := GenerateKey()
	key, err = ParseKey(text)
	if err != nil {
		return nil, false, err
	}
	made, err = createOnce(path, []byte(text+"\n"))
	if err != nil {
		return nil, false, fmt.Errorf("make cluster key file: %w", err)
	}
	if !made {
		key, err = ReadKeyFile(path)
	}
	return key, made, err
}

// createOnce writes data to a new file at path, mode 0600, and reports
// false without changing anything when path exists already.
func createOnce(path string, data []byte) (bool, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp") // mode 0600
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}
	// Unlike a rename, a link never replaces a file: of several processes
	// making the same file at once, exactly one succeeds.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	return true, syncDir(dir)
}

// syncDir makes a new directory entry durable, so that a crash cannot
// lose a key the node has started to use.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Package ownfile writes the small files a node keeps in its data dir
// (the initial admin key, the servers' entry levels, the clicks a stop
// could not flush): whole or not at all, and readable by their owner only.
package ownfile

import (
	"errors"
	"os"
)

// Write replaces path with data, readable by its owner only, so that a
// crash leaves either the old file or the new one whole.
func Write(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

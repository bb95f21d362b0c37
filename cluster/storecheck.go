package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/linkraft/linkraft/fsm"
)

// ErrDamagedStore means the node's raft.db cannot be read: it was truncated
// or overwritten. The node must not start from it.
var ErrDamagedStore = errors.New("raft store is damaged")

// checkStore reads every page of raft.db, read-only, before the store is
// opened for writing. bbolt checks pages as it reads them and panics when
// one is wrong; on a writable open it first scans every page from a
// goroutine of its own (it rebuilds the freelist, which NoFreelistSync does
// not keep), where no recover can reach, so a damaged file would crash the
// node with a stack trace. Here the walk runs on the caller's goroutine,
// with faults on pages past a truncated end turned into panics, and damage
// comes back as ErrDamagedStore.
//
// The walk finds damage to bbolt's structure (page headers, branch and
// leaf layout, a short file). A changed byte inside a stored value goes
// unseen: bbolt keeps no checksums of values.
func checkStore(path string) (err error) {
	if _, statErr := os.Stat(path); errors.Is(statErr, os.ErrNotExist) {
		return nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %s: %v", ErrDamagedStore, path, v)
		}
	}()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil // held by another process: the writable open says so
	case err != nil:
		return fmt.Errorf("%w: %s: %v", ErrDamagedStore, path, err)
	}
	defer db.Close()
	if err := db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bbolt.Bucket) error { return walkBucket(b) })
	}); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDamagedStore, path, err)
	}
	return nil
}

// walkBucket visits every key and value of b and its nested buckets,
// touching the last byte of each value so that its page is read, and
// checks that keys come in strictly increasing order, as bbolt's own scan
// does.
func walkBucket(b *bbolt.Bucket) error {
	c := b.Cursor()
	var prev []byte
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			return fmt.Errorf("keys out of order: %x after %x", k, prev)
		}
		prev = k
		if v == nil {
			if nested := b.Bucket(k); nested != nil {
				if err := walkBucket(nested); err != nil {
					return err
				}
			}
			continue
		}
		if len(v) > 0 {
			_ = v[len(v)-1]
		}
	}
	return nil
}

// verifyLog decodes every command in the log before Raft replays it. A
// stored entry whose bytes changed no longer matches its checksum (see
// fsm.ErrCorruptCommand) and stops the node with ErrDamagedStore, instead of
// being applied with, say, another target for a code.
func verifyLog(logs raft.LogStore) error {
	first, err := logs.FirstIndex()
	if err != nil {
		return fmt.Errorf("%w: first index: %v", ErrDamagedStore, err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return fmt.Errorf("%w: last index: %v", ErrDamagedStore, err)
	}
	if last == 0 {
		return nil
	}
	// A node that installed a snapshot from the leader keeps its older
	// entries below the snapshot and appends above it, so the log may
	// have a gap: walk up from the first entry and down from the last,
	// each until an index is missing.
	i := first
	for ; i <= last; i++ {
		if missing, err := verifyEntry(logs, i); missing {
			break
		} else if err != nil {
			return err
		}
	}
	for j := last; j > i; j-- {
		if missing, err := verifyEntry(logs, j); missing {
			break
		} else if err != nil {
			return err
		}
	}
	return nil
}

// verifyEntry reads and decodes log entry i; missing reports that the log
// has no such entry.
func verifyEntry(logs raft.LogStore, i uint64) (missing bool, err error) {
	var entry raft.Log
	if err := logs.GetLog(i, &entry); errors.Is(err, raft.ErrLogNotFound) {
		return true, nil
	} else if err != nil {
		return false, fmt.Errorf("%w: log entry %d: %v", ErrDamagedStore, i, err)
	}
	if entry.Type != raft.LogCommand {
		return false, nil
	}
	if _, err := fsm.DecodeCommand(entry.Data); err != nil {
		return false, fmt.Errorf("%w: log entry %d: %v", ErrDamagedStore, i, err)
	}
	return false, nil
}

// checkSnapshots reports ErrDamagedStore when snapshots exist and none of
// them can be read back whole (their checksum is checked as they are
// read). Raft itself falls back to an older snapshot when the newest is
// damaged; this names the damage when it has nothing left to fall back to.
func checkSnapshots(snaps raft.SnapshotStore) error {
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		return nil
	}
	var errs []error
	for _, meta := range list {
		_, rc, err := snaps.Open(meta.ID)
		if err == nil {
			var snap *fsm.Snapshot
			if snap, err = fsm.ReadSnapshot(rc); err == nil {
				snap.Close()
			}
			rc.Close()
		}
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("snapshot %s: %v", meta.ID, err))
	}
	return fmt.Errorf("%w: no snapshot can be read: %v", ErrDamagedStore, errors.Join(errs...))
}

package cluster

import (
	"runtime/debug"
	"sync"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// Pages of raft.db that stay resident after a large write (see DESIGN.md,
// Storage). bbolt reads the file through a read-only shared memory map and
// writes it with pwrite. An append rewrites the last leaf, copying the
// entries already in it out of the map; a log compaction walks the leaves
// it deletes; a log read the cache misses reads the entry there: an import
// of a million links leaves some 80 MB of the file mapped into the
// process, counted in its RSS, long after the entries were compacted
// away. Dropping a read-only shared file mapping's pages
// (madvise MADV_DONTNEED) loses nothing: the data is in the file, and a
// later read faults the page back in from the page cache.

// boltStore is the raft-boltdb store with every write behind a lock that
// releasePages takes exclusively. A write transaction may grow bbolt's
// map, which unmaps the old range and maps a larger one, possibly
// elsewhere; between finding the mapping and advising the kernel about it,
// that range must stay the file's, or the advice could land on whatever
// the process mapped there next. Reads never remap (a read transaction
// holds bbolt's map lock for reading) and are not held back.
type boltStore struct {
	*raftboltdb.BoltStore
	path  string       // the file bbolt maps
	remap sync.RWMutex // read: a write that may remap; write: releasePages, Close
}

var (
	_ raft.LogStore    = (*boltStore)(nil)
	_ raft.StableStore = (*boltStore)(nil)
)

func newBoltStore(s *raftboltdb.BoltStore, path string) *boltStore {
	return &boltStore{BoltStore: s, path: path}
}

func (s *boltStore) StoreLog(l *raft.Log) error {
	s.remap.RLock()
	defer s.remap.RUnlock()
	return s.BoltStore.StoreLog(l)
}

func (s *boltStore) StoreLogs(logs []*raft.Log) error {
	s.remap.RLock()
	defer s.remap.RUnlock()
	return s.BoltStore.StoreLogs(logs)
}

func (s *boltStore) DeleteRange(lo, hi uint64) error {
	s.remap.RLock()
	defer s.remap.RUnlock()
	return s.BoltStore.DeleteRange(lo, hi)
}

func (s *boltStore) Set(k, v []byte) error {
	s.remap.RLock()
	defer s.remap.RUnlock()
	return s.BoltStore.Set(k, v)
}

func (s *boltStore) SetUint64(k []byte, v uint64) error {
	s.remap.RLock()
	defer s.remap.RUnlock()
	return s.BoltStore.SetUint64(k, v)
}

// Close unmaps the file: it waits for a release in progress.
func (s *boltStore) Close() error {
	s.remap.Lock()
	defer s.remap.Unlock()
	return s.BoltStore.Close()
}

// releasePages drops the process's resident pages of the store's file
// (none when the platform offers no way to, or the store is closed).
func (s *boltStore) releasePages() error {
	s.remap.Lock()
	defer s.remap.Unlock()
	return dropFileMappings(s.path)
}

// ImportDone puts away what an import left behind, once it ended: the log
// it grew is compacted by a snapshot (which also empties Raft's log cache
// of its entries, and spares a restart replaying them), the pages of
// raft.db the import made resident are dropped, and the heap that all of
// this freed, with the import's own garbage, goes back to the operating
// system at once rather than staying until the heap grows into it. An
// import is an operator's bulk load, so one snapshot per import is cheap
// beside it. It returns when done (seconds for a million links); callers
// run it on a goroutine of their own.
func (n *Node) ImportDone() {
	compactor{n.raft, n.store, n.log}.snapshot("after an import")
	debug.FreeOSMemory()
}

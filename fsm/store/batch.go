package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Batch collects the changes of one Raft apply batch. Nothing is visible
// to readers until Commit; a Batch may be reused after Commit or Reset.
type Batch struct {
	pb *pebble.Batch
}

// NewBatch starts an empty batch that only writes.
func (s *Store) NewBatch() *Batch { return &Batch{pb: s.db.NewBatch()} }

// NewIndexedBatch starts an empty batch whose Get sees its own writes over
// the engine's: the entries of one apply batch read what the entries
// before them wrote (a code taken twice in one batch). Its writes cost
// more than a plain batch's (BenchmarkCommit).
func (s *Store) NewIndexedBatch() *Batch { return &Batch{pb: s.db.NewIndexedBatch()} }

// Get is Store.Get through an indexed batch: the batch's own writes over
// the engine's committed state. Only for a batch of NewIndexedBatch.
func (b *Batch) Get(key, dst []byte) ([]byte, bool, error) {
	if !b.pb.Indexed() {
		return dst, false, fmt.Errorf("store: Get on a batch that is not indexed")
	}
	return get(b.pb, key, dst)
}

// Scan is Store.Scan through an indexed batch: the batch's own writes
// over the engine's committed state. Only for a batch of NewIndexedBatch.
func (b *Batch) Scan(prefix, from []byte, fn func(key, value []byte) bool) error {
	if !b.pb.Indexed() {
		return fmt.Errorf("store: Scan on a batch that is not indexed")
	}
	return scan(b.pb, prefix, prefixEnd(prefix), from, fn)
}

// Set writes value under key. Both are copied into the batch.
func (b *Batch) Set(key, value []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := b.pb.Set(key, value, nil); err != nil {
		return fmt.Errorf("store: batch set %q: %w", key, err)
	}
	return nil
}

// Delete removes key (nothing if it is absent).
func (b *Batch) Delete(key []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := b.pb.Delete(key, nil); err != nil {
		return fmt.Errorf("store: batch delete %q: %w", key, err)
	}
	return nil
}

// Len is the batch's size in bytes, for a caller that bounds its batches.
func (b *Batch) Len() int { return b.pb.Len() }

// MemSize is about what the batch takes of a memtable: its bytes and a
// skiplist node a write. Pebble hands a batch over half a memtable to a
// flush of its own, so an apply batch is cut well below that.
func (b *Batch) MemSize() int { return b.pb.Len() + int(b.pb.Count())*memWriteOverhead }

// memWriteOverhead is a memtable's cost a write beyond its key and value
// (Pebble's skiplist node and the key's trailer).
const memWriteOverhead = 200

// Empty reports whether the batch holds no write (Len counts a header).
func (b *Batch) Empty() bool { return b.pb.Empty() }

// Reset empties the batch for reuse.
func (b *Batch) Reset() { b.pb.Reset() }

// Close releases the batch; it must not be used afterwards.
func (b *Batch) Close() error { return b.pb.Close() }

func checkKey(key []byte) error {
	if len(key) == 0 || key[0] == metaPrefix {
		return fmt.Errorf("%w: %q", ErrReservedKey, key)
	}
	return nil
}

// Commit makes the batch's changes and the applied index one atomic write,
// then resets the batch. It does not wait for the disk (pebble.NoSync):
// Raft's log, synced before an entry is applied, is the write-ahead log,
// and a restart replays it after AppliedIndex. An index at or below the
// applied one is refused with ErrStale and nothing is written.
func (s *Store) Commit(b *Batch, index uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("store: commit of index %d: closed", index)
	}
	if applied := s.applied.Load(); index <= applied {
		return fmt.Errorf("%w: index %d, applied %d", ErrStale, index, applied)
	}
	var v [8]byte
	if err := b.pb.Set(appliedKey, binary.BigEndian.AppendUint64(v[:0], index), nil); err != nil {
		return fmt.Errorf("store: commit of index %d: %w", index, err)
	}
	sorted := s.inKeyOrder(b.pb)
	err := s.db.Apply(sorted, pebble.NoSync)
	if sorted != b.pb {
		sorted.Reset() // its copy of the writes is not kept until the next commit
	}
	if err != nil {
		return fmt.Errorf("store: commit of index %d: %w", index, err)
	}
	s.applied.Store(index)
	b.pb.Reset()
	return nil
}

// sortedWrites is Commit's scratch for inKeyOrder, reused from batch to
// batch (Pebble's Reset lets a large batch's buffer go).
type sortedWrites struct {
	batch  *pebble.Batch
	writes []batchWrite
	order  []int32 // writes' indexes, sorted
}

type batchWrite struct {
	kind       pebble.InternalKeyKind
	key, value []byte
}

// inKeyOrder returns b's writes in key order, a key's writes in b's order:
// the same changes, as Pebble gives a batch one sequence number a write
// and a read sees a key's last write. Pebble inserts a batch into its
// memtable's skiplist in the batch's order, each insert starting from
// where the one before it went; an apply batch writes each create's
// record, code, target and request keys in turn, four jumps across the key
// space a create, and in key order each insert starts near the last
// (docs/BENCHMARKS.md, "Creates on disk"). A batch with a kind it does not
// copy (none of this package's writes) is returned as it is.
func (s *Store) inKeyOrder(b *pebble.Batch) *pebble.Batch {
	w := &s.sorted
	// No reference into b's buffer outlives the commit, nor a large
	// batch's list of writes.
	defer w.release()
	for r := b.Reader(); ; {
		kind, key, value, ok, err := r.Next()
		if !ok || err != nil {
			if err != nil {
				return b
			}
			break
		}
		switch kind {
		case pebble.InternalKeyKindSet, pebble.InternalKeyKindDelete, pebble.InternalKeyKindMerge:
			w.order = append(w.order, int32(len(w.writes)))
			w.writes = append(w.writes, batchWrite{kind, key, value})
		default:
			return b
		}
	}
	slices.SortFunc(w.order, func(i, j int32) int {
		if c := bytes.Compare(w.writes[i].key, w.writes[j].key); c != 0 {
			return c
		}
		return cmp.Compare(i, j) // a key's writes in b's order
	})
	if w.batch == nil {
		w.batch = s.db.NewBatch()
	}
	w.batch.Reset()
	for _, i := range w.order {
		x := &w.writes[i]
		var err error
		switch x.kind {
		case pebble.InternalKeyKindSet:
			err = w.batch.Set(x.key, x.value, nil)
		case pebble.InternalKeyKindDelete:
			err = w.batch.Delete(x.key, nil)
		default:
			err = w.batch.Merge(x.key, x.value, nil)
		}
		if err != nil {
			return b
		}
	}
	return w.batch
}

func (w *sortedWrites) release() {
	clear(w.writes)
	w.writes, w.order = w.writes[:0], w.order[:0]
	if cap(w.writes) > maxKeptWrites {
		w.writes, w.order = nil, nil
	}
}

// maxKeptWrites bounds the list of writes inKeyOrder keeps between
// commits (60 bytes a write).
const maxKeptWrites = 1 << 14

// Load writes the batch without an applied index, then resets it: for
// filling an engine from something other than the Raft log (a snapshot of
// the format before the engine), in batches of bounded size, before
// any entry is applied to it.
func (s *Store) Load(b *Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("store: load: closed")
	}
	if err := s.db.Apply(b.pb, pebble.NoSync); err != nil {
		return fmt.Errorf("store: load: %w", err)
	}
	b.pb.Reset()
	return nil
}

// Sync makes every commit so far durable on disk. Commit does not wait for
// the disk, so a power loss can take the engine back to an earlier index,
// which Raft's log replays; but Raft replays only the entries after its
// latest snapshot, so the engine must be synced up to a snapshot's index
// before that snapshot is reported taken (DESIGN.md, "Snapshots").
func (s *Store) Sync() error {
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("store: sync %s: %w", s.dir, err)
	}
	return nil
}

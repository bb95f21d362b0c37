package fsm

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/linkraft/linkraft/fsm/store"
)

// The state's pieces on disk live in an engine (fsm/store), one per
// state. It keeps no log of its own: a start trusts only an engine a clean
// stop closed (kept.go) or a snapshot's checkpoint (snapref.go), and Open
// empties Config.Dir of anything else (DESIGN.md, "Memory and disk").

// Config says where an FSM keeps the part of its state that is on disk.
type Config struct {
	// Dir is the engine's directory; "" keeps the engine in memory.
	Dir string
	// BlockCacheBytes bounds the cache of blocks read from disk (fsm/store's
	// default when 0), one for the engine and, during a restore, the one
	// that replaces it.
	BlockCacheBytes int64
	// Logf receives the engine's error messages; nil discards them.
	Logf func(format string, args ...any)
	// OptionCache is how many links' decoded Options are kept in memory
	// (DefaultOptionCache when 0); the rest are read from the engine.
	OptionCache int
	// RecordCache is how many links' decoded records are kept in memory
	// (DefaultRecordCache when 0); the rest are read from the engine. It
	// sizes the code cache too: two 8-byte slots a record (codeindex.go).
	RecordCache int
	// maxRecords, when set, is MaxRecords for the states of this FSM: a
	// test's few positions stand for four billion.
	maxRecords uint64
	// firstPosition, when set, is the position of a state's first record:
	// a test's few links then take positions past 32 bits.
	firstPosition uint64
}

// MaxRecords is how many links a cluster can create (imports included)
// until it is raised to LevelPositions: a state holds a record by
// position for each, live or not, until a restore from a stream packs the
// live ones, and builds before that level read only positions of 4 bytes,
// the last of which marks a longer one (positions.go). Creates are refused
// past it (recordTable.spent).
const MaxRecords = longPosition

// inMemoryCache is the block cache of an engine kept in memory: its blocks
// are in memory already.
const inMemoryCache = 1 << 20

// inMemoryCacheSlots sizes the record and option caches of a state whose
// engine is in memory unless Config says otherwise: a backup read to be
// checked and merged, or a test's state, is walked rather than served, and
// each such state would otherwise allocate ~5 MiB of empty slots.
const inMemoryCacheSlots = 1 << 10

// loadBatchBytes bounds a batch that fills an engine outside Apply (a
// restore), so that a large snapshot is written in pieces.
const loadBatchBytes = 256 << 10

// applyBatchBytes: an apply batch of many entries is committed after the
// entry that grows the engine's batch past it in a memtable's terms
// (store.Batch.MemSize; FSM.ApplyBatch), so a node catching up holds a
// few MiB of writes, not all of them, and each piece stays a quarter of a
// memtable.
const applyBatchBytes = 4 << 20

// keptBatchBytes: a batch that grew past it (a purge of many links, a
// restore) is replaced by a new one after it is written, since a batch
// keeps its index's memory across writes (~4 bytes of index per byte of
// small keys).
const keptBatchBytes = 1 << 20

// engines opens the engines of one FSM: each restore gets a fresh one in
// a directory of its own, and the one it replaces is removed once no
// snapshot reads it any more.
type engines struct {
	cfg  Config
	next int // the number of the next engine's directory
	// checkpoints numbers the directories snapshots' checkpoints are
	// taken into (snapref.go).
	checkpoints int
	cache       *store.Cache // the block cache every engine on disk shares; nil in memory
}

// open returns a new, empty engine, which opens its store at its first
// write, commit or snapshot: a state in memory that never writes a piece
// on disk and is never snapshotted (a fuzzed snapshot refused, most of
// the unit tests' states) costs no store at all.
func (es *engines) open() *engine {
	// No log of its own: only a closed engine or a checkpoint is trusted
	// at a start (kept.go, snapref.go).
	opts := store.Options{Cache: es.cache, Logf: es.cfg.Logf, InMemory: es.cfg.Dir == "", NoLog: true}
	dir := ""
	options, records := DefaultOptionCache, DefaultRecordCache
	if !opts.InMemory {
		dir = filepath.Join(es.cfg.Dir, strconv.Itoa(es.next))
		es.next++
	} else {
		opts.BlockCacheBytes = inMemoryCache
		options, records = inMemoryCacheSlots, inMemoryCacheSlots
	}
	e := newEngine(dir, opts, cmp.Or(es.cfg.OptionCache, options), cmp.Or(es.cfg.RecordCache, records))
	e.maxRecords, e.firstPosition = cmp.Or(es.cfg.maxRecords, e.maxRecords), es.cfg.firstPosition
	return e
}

// newEngine is an engine in dir ("": in memory) whose store opens with
// opts at its first use, for a state with caches of the sizes given.
func newEngine(dir string, opts store.Options, optionCache, recordCache int) *engine {
	e := &engine{dir: dir, optionCache: optionCache, recordCache: recordCache, maxRecords: MaxRecords}
	e.openStore = func() (*store.Store, error) { return store.Open(dir, opts) }
	e.refs.Store(1)
	return e
}

// engine is one engine and the batch the state writes into. Only the
// goroutine that changes the state writes: Apply under the FSM's write
// lock, a restore to a state no reader reaches yet. A snapshot reads a
// view of it.
type engine struct {
	openStore func() (*store.Store, error)
	st        *store.Store // nil until the first write or view: nothing in it
	dir       string       // "": in memory
	batch     *store.Batch
	// applying: the batch is one Raft apply batch, committed whole with
	// its index; otherwise a batch is written whenever it grows past
	// loadBatchBytes.
	applying bool
	err      error // the first failure: nothing more is written
	// published: the state is the FSM's, which readers reach; before,
	// only the goroutine building it (a restore) reads and writes it.
	published bool
	val       []byte // reused by get
	// optionCache and recordCache size the caches of the state it holds.
	optionCache, recordCache int
	maxRecords               uint64 // MaxRecords, or a test's
	firstPosition            uint64 // 0, or a test's
	// writeBack writes what the state's pieces hold back until the end
	// of a batch (the records a batch changed) before a commit or a view.
	writeBack func()
	// refs counts the state and each snapshot view; the last release
	// closes the engine, and removes its directory once it was replaced.
	refs    atomic.Int32
	retired atomic.Bool
}

// ready opens the store if it is not open yet; only the writer calls it.
func (e *engine) ready() bool {
	if e.st != nil || e.err != nil {
		return e.err == nil
	}
	st, err := e.openStore()
	if err != nil {
		e.fail(fmt.Errorf("open the state's engine: %w", err))
		return false
	}
	e.st, e.batch = st, st.NewIndexedBatch()
	return true
}

// has reports whether key exists, the batch's writes included. Writer
// only (Apply, a restore), as get: readers use read.
func (e *engine) has(key []byte) bool {
	_, found := e.get(key)
	return found
}

// get returns key's value, the batch's writes included; the value is
// valid until the next get. Writer only: it reads the batch and reuses
// one buffer.
func (e *engine) get(key []byte) ([]byte, bool) {
	if e.st == nil {
		return nil, false
	}
	var found bool
	var err error
	e.val, found, err = e.batch.Get(key, e.val[:0])
	e.fail(err)
	return e.val, found
}

// read returns a copy of key's value, for readers and the writer alike:
// the writer reads through its batch, readers (under the FSM's read lock,
// concurrently) the committed state. A failure to read is the disk's,
// and answering as if the key were absent could serve a link without
// its password: it panics (a reader's request fails; Apply's stops the
// node).
func (e *engine) read(key []byte) ([]byte, bool) {
	if e.st == nil {
		return nil, false
	}
	var v []byte
	var found bool
	var err error
	if e.writer() {
		v, found, err = e.batch.Get(key, nil)
	} else {
		v, found, err = e.st.Get(key, nil)
	}
	if err != nil {
		panic(fmt.Sprintf("fsm: the state's engine failed a read: %v", err))
	}
	return v, found
}

// scan is read for every key under prefix from from (nil: the first), in
// key order, until fn returns false; the slices are valid only during the
// call.
func (e *engine) scan(prefix, from []byte, fn func(key, value []byte) bool) {
	if e.st == nil {
		return
	}
	var err error
	if e.writer() {
		err = e.batch.Scan(prefix, from, fn)
	} else {
		err = e.st.Scan(prefix, from, fn)
	}
	if err != nil {
		panic(fmt.Sprintf("fsm: the state's engine failed a scan: %v", err))
	}
}

// scanCommitted is store.Scan of what is committed, for a reader that
// wants the error (a restore merging the state it replaces).
func (e *engine) scanCommitted(prefix, from []byte, fn func(key, value []byte) bool) error {
	if e.st == nil {
		return nil
	}
	return e.st.Scan(prefix, from, fn)
}

func (e *engine) writer() bool { return e.applying || !e.published }

// addCount adds n to the count under key (store.Batch.AddCount).
func (e *engine) addCount(key []byte, n uint64) {
	if e.ready() {
		e.fail(e.batch.AddCount(key, n))
	}
}

// delete removes key (nothing if absent).
func (e *engine) delete(key []byte) {
	if e.err == nil && e.st != nil {
		e.fail(e.batch.Delete(key))
	}
}

// set writes key outside the batch's atomicity only when not applying.
func (e *engine) set(key, value []byte) {
	if !e.ready() {
		return
	}
	e.fail(e.batch.Set(key, value))
	if !e.applying && e.batch.Len() >= loadBatchBytes {
		e.fail(e.st.Load(e.batch))
	}
}

// settle writes what a load left in the batch, so that a view sees it,
// and lets go of the memory the load's batches grew.
func (e *engine) settle() error {
	e.flushPieces()
	if e.err == nil && e.st != nil && !e.applying && !e.batch.Empty() {
		e.fail(e.st.Load(e.batch))
		e.renewBatch()
	}
	return e.err
}

// commit writes one apply batch with the index of its last entry.
func (e *engine) commit(index uint64) error {
	e.flushPieces()
	e.applying = false
	// An engine on disk records the index of every batch, with keys or
	// none: a kept state and a checkpoint are named by it (kept.go).
	if e.st == nil && (e.dir == "" || !e.ready()) {
		return e.err
	}
	big := e.batch.Len() > keptBatchBytes
	if e.err == nil {
		e.fail(e.st.Commit(e.batch, index))
	}
	if big {
		e.renewBatch()
	}
	return e.err
}

// batchFull reports whether the batch takes applyBatchBytes of a memtable.
func (e *engine) batchFull() bool { return e.batch != nil && e.batch.MemSize() >= applyBatchBytes }

func (e *engine) flushPieces() {
	if e.writeBack != nil {
		e.writeBack()
	}
}

func (e *engine) renewBatch() {
	e.batch.Close()
	e.batch = e.st.NewIndexedBatch()
}

func (e *engine) fail(err error) {
	if err != nil && e.err == nil {
		e.err = err
	}
}

// view is a consistent view of the engine as of its last write; the
// engine stays open until the view is closed. The caller holds the
// FSM's write lock (or owns the state).
func (e *engine) view() (*store.Snapshot, func(), error) {
	if !e.ready() {
		return nil, nil, e.err
	}
	if err := e.settle(); err != nil {
		return nil, nil, err
	}
	sn, err := e.st.Snapshot()
	if err != nil {
		return nil, nil, fmt.Errorf("view of the state's engine: %w", err)
	}
	e.refs.Add(1)
	return sn, sync.OnceFunc(func() { sn.Close(); e.release() }), nil
}

// release drops a reference; the last one closes the engine.
func (e *engine) release() {
	if e.refs.Add(-1) != 0 {
		return
	}
	if e.st != nil {
		e.batch.Close()
		e.st.Close()
	}
	if e.retired.Load() && e.dir != "" {
		os.RemoveAll(e.dir)
	}
}

// retire marks the engine replaced (its directory goes with its last
// reference) and drops the state's reference.
func (e *engine) retire() {
	e.retired.Store(true)
	e.release()
}

// EngineStats are the engine's counters for /metrics: its block cache's
// hits, misses and size, and its bytes on disk. A restore opens a new
// engine, whose counters start again from zero.
func (f *FSM) EngineStats() store.Stats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.s.eng.st == nil {
		return store.Stats{}
	}
	return f.s.eng.st.Stats()
}

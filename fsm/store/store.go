package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// formatVersion is the layout of the keys this build writes. A database
// written with a higher one is refused at Open rather than misread.
const formatVersion = 1

// Keys beginning with metaPrefix belong to the store itself: the applied
// index and the format version. A Batch refuses to write them, and the
// stream leaves them out (its header carries the applied index).
const metaPrefix = 0x00

var (
	appliedKey = []byte{metaPrefix, 'a'}
	formatKey  = []byte{metaPrefix, 'f'}
)

// engineFormat pins Pebble's on-disk format: a new database is created at
// this version whatever the newest one of the linked Pebble, so that every
// node of one release writes the same files and an upgrade of the library
// never changes the format by itself.
const engineFormat = pebble.FormatValueSeparation

// ErrStale is returned by Commit for an index at or below the applied one:
// that entry is already in the engine (a replay after a restart) and must
// be skipped, not applied twice.
var ErrStale = errors.New("store: index already applied")

// ErrReservedKey is returned for a key that begins with the store's own
// prefix (a zero byte) or is empty.
var ErrReservedKey = errors.New("store: empty key or key with the reserved prefix 0x00")

// Options size the engine's memory. Zero values take the defaults.
type Options struct {
	// BlockCacheBytes bounds Pebble's cache of uncompressed blocks
	// (default 64 MiB). With cgo it lives outside the Go heap.
	BlockCacheBytes int64
	// Cache, when set, is the block cache instead (BlockCacheBytes is
	// then unused): engines that share one are bounded by it together.
	Cache *Cache
	// MemTableBytes is the size of one memtable (default 16 MiB); at most
	// memTables of them are held before writes wait for a flush.
	MemTableBytes int64
	// Logf receives Pebble's error messages; nil discards them. Pebble's
	// informational messages (flushes, compactions) are always discarded.
	Logf func(format string, args ...any)
	// InMemory keeps the engine in memory (Pebble's in-memory file
	// system) instead of in its directory: for a state that is never on
	// disk, such as a backup read to be checked. Checkpoint, Swap and
	// ReadStream need a directory.
	InMemory bool
	// NoLog: the engine writes no log of its own, so a batch committed
	// since the last flush of its memtable is lost in a crash. For an
	// engine that is trusted only once flushed and closed, or checkpointed
	// after a flush, whose log would never be read.
	NoLog bool
	// ReadOnly opens an existing engine to read it only (a checkpoint
	// whose files are shared with the engine it was taken of).
	ReadOnly bool
}

const (
	defaultBlockCache = 64 << 20
	defaultMemTable   = 16 << 20
	memTables         = 4
	// l0CompactionThreshold: see pebbleOptions.
	l0CompactionThreshold = 8
)

// Store is one open engine. Reads may run concurrently with each other
// and with Commit; Commit, Checkpoint and Close are serialised.
type Store struct {
	db      *pebble.DB
	dir     string
	mu      sync.Mutex // orders Commit against Checkpoint and Close
	applied atomic.Uint64
	closed  bool
	noLog   bool
	sorted  sortedWrites // Commit's, under mu
}

// Open opens the engine in dir, creating it if absent, and reads its
// applied index. A swap of directories left half done by a crash
// (Install) is finished first.
func Open(dir string, opts Options) (*Store, error) {
	if !opts.InMemory && !opts.ReadOnly {
		if err := finishSwap(dir); err != nil {
			return nil, err
		}
	}
	db, err := openPebble(dir, pebbleOptions(opts))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", dir, err)
	}
	s := &Store{db: db, dir: dir, noLog: opts.NoLog}
	if err := s.checkFormat(opts.ReadOnly); err != nil {
		db.Close()
		return nil, err
	}
	applied, err := s.readApplied()
	if err != nil {
		db.Close()
		return nil, err
	}
	s.applied.Store(applied)
	return s, nil
}

func pebbleOptions(o Options) *pebble.Options {
	if o.BlockCacheBytes <= 0 {
		o.BlockCacheBytes = defaultBlockCache
	}
	if o.MemTableBytes <= 0 {
		o.MemTableBytes = defaultMemTable
	}
	cache := o.Cache.ref()
	if cache == nil {
		cache = pebble.NewCache(o.BlockCacheBytes)
	}
	po := &pebble.Options{
		Cache:                       cache,
		MemTableSize:                uint64(o.MemTableBytes),
		MemTableStopWritesThreshold: memTables,
		FormatMajorVersion:          engineFormat,
		Logger:                      logger{o.Logf},
		Merger:                      countMerger(),
	}
	if o.InMemory {
		po.FS = vfs.NewMem()
	}
	po.DisableWAL = o.NoLog
	po.ReadOnly = o.ReadOnly
	for i := range po.Levels {
		// Ten bits a key: a lookup of an absent code (a create's collision
		// check, a 404) reads no data block 99 % of the time.
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	// Twice Pebble's L0 compaction threshold, so L0 is compacted into Lbase
	// at twice as many sublevels: every flush holds keys across the whole
	// key space (a create's code and target keys land anywhere), so each
	// L0 compaction rewrites much of Lbase, and fewer, larger ones (with
	// memtables twice Pebble's size) rewrite it less often: less CPU a
	// create (docs/BENCHMARKS.md, "Creates on disk"). Lookups may check a
	// few more L0 files' bloom filters.
	po.L0CompactionThreshold = l0CompactionThreshold
	po.EnsureDefaults()
	return po
}

// openPebble opens the database and hands it the cache: the database
// holds its own reference, released at Close.
func openPebble(dir string, po *pebble.Options) (*pebble.DB, error) {
	defer po.Cache.Unref()
	return pebble.Open(dir, po)
}

// logger passes Pebble's errors to Logf and drops its chatter. Fatalf
// is only called by Pebble for a broken invariant; it panics, as Pebble's
// own logger does.
type logger struct{ logf func(string, ...any) }

func (logger) Infof(string, ...any) {}

func (l logger) Errorf(format string, args ...any) {
	if l.logf != nil {
		l.logf(format, args...)
	}
}

func (l logger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("store: pebble: "+format, args...))
}

// checkFormat writes the format version into a new database and refuses
// one written by a newer build.
func (s *Store) checkFormat(readOnly bool) error {
	v, found, err := s.getUint(formatKey)
	if err != nil {
		return err
	}
	switch {
	case !found && readOnly:
		return fmt.Errorf("store: %s holds no engine", s.dir)
	case !found:
		var b [8]byte
		return s.set(formatKey, binary.BigEndian.AppendUint64(b[:0], formatVersion))
	case v > formatVersion:
		return fmt.Errorf("store: %s has format %d; this build reads up to %d", s.dir, v, formatVersion)
	}
	return nil
}

func (s *Store) set(key, value []byte) error {
	opt := pebble.Sync
	if s.noLog {
		opt = pebble.NoSync // no log to sync: the engine is trusted only once flushed
	}
	if err := s.db.Set(key, value, opt); err != nil {
		return fmt.Errorf("store: write %q: %w", key, err)
	}
	return nil
}

func (s *Store) readApplied() (uint64, error) {
	v, _, err := s.getUint(appliedKey)
	return v, err
}

// getUint reads a big-endian uint64 value of the store's own keys.
func (s *Store) getUint(key []byte) (uint64, bool, error) {
	v, found, err := s.Get(key, nil)
	if err != nil || !found {
		return 0, false, err
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("store: %s: key %q holds %d bytes, want 8", s.dir, key, len(v))
	}
	return binary.BigEndian.Uint64(v), true, nil
}

// AppliedIndex is the index of the last Raft entry whose changes are in
// the engine: a restart replays the log after it.
func (s *Store) AppliedIndex() uint64 { return s.applied.Load() }

// Get appends the value of key to dst and reports whether the key exists.
// Pebble lends the value only until its closer is closed, hence the copy;
// a caller that passes the same dst each time allocates nothing here.
// Pebble itself allocates 16 bytes per read that reaches an SST (a filter
// slice): BenchmarkGet, one allocation per op.
func (s *Store) Get(key, dst []byte) ([]byte, bool, error) { return get(s.db, key, dst) }

func get(r pebble.Reader, key, dst []byte) ([]byte, bool, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return dst, false, nil
	}
	if err != nil {
		return dst, false, fmt.Errorf("store: get %q: %w", key, err)
	}
	dst = append(dst, v...)
	closer.Close()
	return dst, true, nil
}

// Scan calls fn with each key that begins with prefix and is at or after
// from (nil: the first), in key order, until fn returns false. The slices
// are valid only during the call.
func (s *Store) Scan(prefix, from []byte, fn func(key, value []byte) bool) error {
	return scan(s.db, prefix, prefixEnd(prefix), from, fn)
}

// reader is what Scan reads: the live database or a snapshot of it.
type reader interface {
	NewIter(*pebble.IterOptions) (*pebble.Iterator, error)
}

// scan walks the keys in [lower, upper) (nil upper: no end) from the
// later of lower and from. The iterator is closed however the walk ends,
// a panic in fn included: an open one pins the engine's files.
func scan(r reader, lower, upper, from []byte, fn func(key, value []byte) bool) (err error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("store: scan %q: %w", lower, err)
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("store: scan %q: %w", lower, cerr)
		}
	}()
	var ok bool
	if bytes.Compare(from, lower) > 0 {
		ok = it.SeekGE(from)
	} else {
		ok = it.First()
	}
	for ; ok; ok = it.Next() {
		v, verr := it.ValueAndErr()
		if verr != nil {
			return fmt.Errorf("store: scan %q at %q: %w", lower, it.Key(), verr)
		}
		if !fn(it.Key(), v) {
			break
		}
	}
	return nil
}

// prefixEnd is the first key after every key that begins with prefix, nil
// when there is none (a prefix of only 0xff bytes, or an empty one).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Stats are the engine's counters for /metrics.
type Stats struct {
	BlockCacheHits, BlockCacheMisses int64
	BlockCacheBytes                  int64 // in use
	DiskBytes                        uint64
}

// Stats reads the engine's counters.
func (s *Store) Stats() Stats {
	m := s.db.Metrics()
	return Stats{
		BlockCacheHits:   m.BlockCache.Hits,
		BlockCacheMisses: m.BlockCache.Misses,
		BlockCacheBytes:  m.BlockCache.Size,
		DiskBytes:        m.DiskSpaceUsage(),
	}
}

// Flush writes what the memtables hold to the engine's files and waits
// for it: an engine without a log (NoLog) is whole on disk only after it.
func (s *Store) Flush() error {
	if err := s.db.Flush(); err != nil {
		return fmt.Errorf("store: flush %s: %w", s.dir, err)
	}
	return nil
}

// Close flushes nothing: what the engine has not written to its files is
// in its log (none with NoLog: then in nothing), and what is not in its
// log is in Raft's. No read may start after it (Pebble panics on a closed
// database): fsm closes an engine once no state or view refers to it.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.sorted.batch != nil {
		s.sorted.batch.Close()
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", s.dir, err)
	}
	return nil
}

// Cache is a block cache that several engines share (Options.Cache): a
// node's engines of before and after a restore hold one cache's bytes, not
// two.
type Cache struct{ c *pebble.Cache }

// NewCache makes a cache of at most bytes (64 MiB when 0 or less); its
// memory is taken as blocks are read.
func NewCache(bytes int64) *Cache {
	if bytes <= 0 {
		bytes = defaultBlockCache
	}
	return &Cache{c: pebble.NewCache(bytes)}
}

// ref takes a reference for a database about to open with the cache.
func (c *Cache) ref() *pebble.Cache {
	if c == nil {
		return nil
	}
	c.c.Ref()
	return c.c
}

// Release drops the maker's reference: the memory goes once every engine
// that uses the cache is closed too.
func (c *Cache) Release() { c.c.Unref() }

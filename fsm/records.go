package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/linkraft/linkraft/fsm/store"
)

// record is one link as readers get it: its fixed fields and its texts,
// decoded from the engine (recordPrefix). A record a reader holds is never
// changed: the writer changes a copy (recordTable.mutable) and writes it
// at the end of the apply batch, so its strings are safe to keep and to
// use as map keys.
type record struct {
	id         uint64
	createdAt  int64
	expiresAt  int64 // 0: never
	clicks     uint64
	lastAccess int64  // 0: never clicked
	pos        uint64 // its position in the table
	code       string // qualified
	url        string
	canon      string // "": the canonical URL is the URL, or there is none
	workspace  uint32 // index into workspaceTable.names
	author     uint16 // the key that created it: index into authorTable.ids; 0: none
	flags      uint8
}

const (
	flagLive    = 1 << iota // cleared when the link is deleted or purged
	flagDedupe              // the link takes part in dedupe: it has a canonical URL
	flagIndexed             // the dedupe index points to this link
	flagOptions             // the link has Options (state.opts)
	// flagDisabled: the entry that last set the link's expiry was at or
	// after it, so the link was disabled on purpose and the purge keeps
	// it (LevelDisabled).
	flagDisabled
	flagCrawlable // the link's Options say robots.txt lists it (crawlable.go)
)

func (r *record) live() bool   { return r.flags&flagLive != 0 }
func (r *record) dedupe() bool { return r.flags&flagDedupe != 0 }

// expired reports whether the link is past its expiry at time now.
func (r *record) expired(now int64) bool { return r.expiresAt != 0 && now >= r.expiresAt }

// canonical is the canonical URL a dedupe link was stored with; "" for a
// link that does not take part in dedupe.
func (r *record) canonical() string {
	switch {
	case !r.dedupe():
		return ""
	case r.canon == "":
		return r.url
	}
	return r.canon
}

// setTexts gives r its code, URL and stored canonical URL, copied into
// one string: the arguments may be views of a buffer.
func (r *record) setTexts(code, url, canon string) {
	var b strings.Builder
	b.Grow(len(code) + len(url) + len(canon))
	b.WriteString(code)
	b.WriteString(url)
	b.WriteString(canon)
	s := b.String()
	r.code, r.url, r.canon = s[:len(code)], s[len(code):len(code)+len(url)], s[len(code)+len(url):]
}

// recordPrefix is the engine's table of link records by position
// (store/DESIGN.md, "Keys"): the key is the prefix and the position
// (appendPosition), so a walk of the table is a walk in id order.
const recordPrefix = 'l'

func recordKey(dst []byte, p uint64) []byte {
	return appendPosition(append(dst[:0], recordPrefix), p)
}

// encodeRecord appends r's value: id, created, expires, clicks, last
// access, workspace, author (varints), flags (a byte), the lengths of the
// code and URL (uvarints), then the code, the URL and the stored
// canonical URL, which runs to the end.
func encodeRecord(dst []byte, r *record) []byte {
	dst = binary.AppendUvarint(dst, r.id)
	dst = binary.AppendVarint(dst, r.createdAt)
	dst = binary.AppendVarint(dst, r.expiresAt)
	dst = binary.AppendUvarint(dst, r.clicks)
	dst = binary.AppendVarint(dst, r.lastAccess)
	dst = binary.AppendUvarint(dst, uint64(r.workspace))
	dst = binary.AppendUvarint(dst, uint64(r.author))
	dst = append(dst, r.flags)
	dst = binary.AppendUvarint(dst, uint64(len(r.code)))
	dst = binary.AppendUvarint(dst, uint64(len(r.url)))
	dst = append(dst, r.code...)
	dst = append(dst, r.url...)
	return append(dst, r.canon...)
}

var errRecordValue = errors.New("damaged record value")

// decodeRecord reads encodeRecord's value into r; with texts false it
// leaves the strings empty and allocates nothing.
func decodeRecord(v []byte, p uint64, r *record, texts bool) error {
	codeLen, urlLen, text, err := decodeFixed(v, p, r)
	if err == nil && texts {
		r.sliceTexts(string(text), codeLen, urlLen)
	}
	return err
}

// sliceTexts sets r's strings from s, its texts back to back.
func (r *record) sliceTexts(s string, codeLen, urlLen int) {
	r.code, r.url, r.canon = s[:codeLen], s[codeLen:codeLen+urlLen], s[codeLen+urlLen:]
}

// decodeFixed reads the fixed fields of encodeRecord's value into r and
// returns the lengths of the code and URL and the texts, back to back.
func decodeFixed(v []byte, p uint64, r *record) (codeLen, urlLen int, text []byte, err error) {
	d := storedReader{b: v}
	*r = record{id: d.uvarint(), createdAt: d.varint(), expiresAt: d.varint(), clicks: d.uvarint(),
		lastAccess: d.varint(), workspace: uint32(d.uvarint()), author: uint16(d.uvarint()), pos: p}
	r.flags = d.byte()
	cl, ul := d.uvarint(), d.uvarint()
	if d.bad || cl > uint64(len(d.b)) || ul > uint64(len(d.b))-cl {
		return 0, 0, nil, fmt.Errorf("record %d: %w", p, errRecordValue)
	}
	return int(cl), int(ul), d.b, nil
}

// pageSize is the records a page of the pieces kept by position holds
// (targets.go).
const pageSize = 1024

// idsEvery: the table keeps the id of every idsEvery-th record in memory,
// so that positionOf reads at most log2(idsEvery) records.
const idsEvery = 1024

// recordTable is every link ever created since the state was built, dead
// ones included, in id order: a link's position never changes, and deleted
// links keep their record until the state is rebuilt from a snapshot.
// The records are in the engine; a cache of decoded ones (recordCache)
// serves the links read most without reading it.
//
// The writer changes records through dirty: at(p) of a changed record is
// its copy there, and writeBack writes the copies to the engine's batch and
// the cache once the apply batch is done (engine.commit). Writing each
// change at once would encode a record per field and a click batch's
// link once per click; a copy per record and batch costs one encoding.
//
// gen and sharing count the snapshots being written, for the pieces still
// in memory that share their pages with them (orphans.go): records are
// read from the engine's view instead.
type recordTable struct {
	eng *engine
	// first is the first record's position and n the next one's: a test's
	// state may start past 32 bits (Config.firstPosition), any other at 0.
	first, n   uint64
	firstIDs   []uint64
	cache      recordCache
	dirty      map[uint64]*record   // the writer's changed records, by position
	was        map[uint64]indexedAs // of each changed record made before, where the indexes hold it, if anywhere
	written    uint64               // n at the last writeBack: positions from it on are new
	gen        uint64
	sharing    *atomic.Int32 // snapshots still being written
	key        []byte        // reused by the writer
	value      []byte
	expiryKey  []byte
	crawlKey   []byte
	crawlValue []byte
}

func newRecordTable(eng *engine) recordTable {
	return recordTable{eng: eng, first: eng.firstPosition, n: eng.firstPosition, written: eng.firstPosition,
		sharing: new(atomic.Int32), dirty: map[uint64]*record{}, was: map[uint64]indexedAs{},
		cache: newRecordCache(eng.recordCache)}
}

// at is the record at p: the writer's own change of it if it has one.
// It is never changed once returned. Readers call it under the FSM's read
// lock, the writer under its write lock; a reader's miss reads the engine
// and fills the cache. The writer's fills no slot: a purge, a revocation
// or a restore reads many links once, and would push out the ones
// redirects read (writeBack places what it changed).
func (t *recordTable) at(p uint64) *record {
	if len(t.dirty) > 0 {
		if r, ok := t.dirty[p]; ok {
			return r
		}
	}
	if r := t.cache.get(p); r != nil {
		return r
	}
	r := t.read(p)
	if !t.eng.writer() {
		t.cache.put(r)
	}
	return r
}

// read decodes the record at p from the engine, the writer's batch
// included. A record missing or damaged is the disk's failure: serving
// a link without it would be wrong, so the request fails (a reader's) or
// the node stops (the writer's), as engine.read does.
func (t *recordTable) read(p uint64) *record {
	v, found := t.eng.read(recordKey(nil, p))
	r := new(record)
	err := decodeRecord(v, p, r, true)
	if !found || err != nil {
		panic(fmt.Sprintf("fsm: the engine lost the record at %d of %d (found %v): %v", p, t.n, found, err))
	}
	return r
}

// indexedAs is where the record indexes (expiries.go, crawlable.go) hold
// a record: writeBack moves its keys from there to where it belongs now.
type indexedAs struct {
	expiry int64 // 0: none
	crawl  crawlEntry
}

func indexedAsOf(r *record) indexedAs {
	return indexedAs{expiry: expiryOf(r), crawl: crawlEntryOf(r)}
}

// mutable returns the record at p for changing: a copy, which writeBack
// writes.
func (t *recordTable) mutable(p uint64) *record {
	if r, ok := t.dirty[p]; ok {
		return r
	}
	cp := *t.at(p)
	t.dirty[p] = &cp
	if at := indexedAsOf(&cp); at != (indexedAs{}) { // most links have no index entry: a click batch writes no map
		t.was[p] = at
	}
	return &cp
}

// full reports whether a state raised to raised has taken every position
// it may (before LevelPositions, the 4-byte ones): append must not be
// called. Creates never get here (spent); a restore's snapshot could.
func (t *recordTable) full(raised int) bool { return t.n >= t.limit(raised) }

// limit is how many positions a state raised to raised takes: only
// builds of LevelPositions read a long one.
func (t *recordTable) limit(raised int) uint64 {
	if raised < LevelPositions {
		return t.eng.maxRecords // MaxRecords, or a test's fewer
	}
	return maxPosition
}

// spent reports whether a create must be refused for want of a position,
// given the last link id and the level the state is raised to. It asks
// the id, which every node holds alike, and not this table's count: a
// node whose state was rebuilt from a stream packed the live links into
// fewer positions than another holds. Every record holds an id of its
// own, none above the last, so no node holds more records than the last
// id; a restore keeps the highest.
func (t *recordTable) spent(lastID uint64, raised int) bool { return lastID >= t.limit(raised) }

// append adds a record and returns its position.
func (t *recordTable) append(r record) uint64 {
	t.bound()
	p := t.n
	if (p-t.first)%idsEvery == 0 {
		t.firstIDs = append(t.firstIDs, r.id)
	}
	t.n++
	r.pos = p
	t.dirty[p] = &r
	return p
}

// maxDirty bounds the changed records the writer holds: a restore or an
// import writes them back in pieces instead of holding every record twice.
const maxDirty = 4096

// bound writes back the changed records when they are many. Only where no
// caller holds a record from mutable (append, between a purge's removes).
func (t *recordTable) bound() {
	if t.manyChanged() {
		t.writeBack()
	}
}

// manyChanged reports whether the writer holds maxDirty changed records.
func (t *recordTable) manyChanged() bool { return len(t.dirty) >= maxDirty }

// writeBack writes the changed records to the engine's batch, and to the
// cache those whose slot holds them or, for links made before this batch
// (a click's), is empty: a changed record never pushes another link out
// (a purge, clicks counted for links this node does not serve), a new
// one waits for its first read (an import does not fill the cache with
// links nobody asked for), and a removed link's slot is freed. No reader
// runs: the writer holds the write lock, or builds a state no reader
// reaches yet.
func (t *recordTable) writeBack() {
	for p, r := range t.dirty {
		t.key, t.value = recordKey(t.key, p), encodeRecord(t.value[:0], r)
		t.eng.set(t.key, t.value)
		was := t.was[p]
		t.indexExpiry(p, was.expiry, expiryOf(r))
		t.indexCrawlable(p, was.crawl, crawlEntryOf(r))
		switch slot := t.cache.slots[p&t.cache.mask].Load(); {
		case slot != nil && slot.pos == p && !r.live():
			t.cache.slots[p&t.cache.mask].Store(nil)
		case t.eng.published && r.live() && (slot == nil && p < t.written || slot != nil && slot.pos == p):
			t.cache.put(r)
		}
	}
	t.written = t.n
	if len(t.dirty) > maxDirty {
		// a batch that changed many: not kept for every later one
		t.dirty, t.was = map[uint64]*record{}, map[uint64]indexedAs{}
	}
	clear(t.dirty)
	clear(t.was)
}

// walked is at for a walk over many links (robots.txt, a tag rename, a
// search by id): it fills no cache slot, so the walk does not push the
// links read most out of the cache.
func (t *recordTable) walked(p uint64) *record {
	if r, ok := t.dirty[p]; ok {
		return r
	}
	if r := t.cache.peek(p); r != nil {
		return r
	}
	return t.read(p)
}

// idAt is the id of the record at p, as walked reads it but without its
// texts: a search by id reads ten records.
func (t *recordTable) idAt(p uint64) uint64 {
	if r, ok := t.dirty[p]; ok {
		return r.id
	}
	if r := t.cache.peek(p); r != nil {
		return r.id
	}
	v, found := t.eng.read(recordKey(nil, p))
	var r record
	if _, _, _, err := decodeFixed(v, p, &r); !found || err != nil {
		panic(fmt.Sprintf("fsm: the engine lost the record at %d of %d (found %v): %v", p, t.n, found, err))
	}
	return r.id
}

// beforeWalk writes the writer's changes back, so that a walk of the
// engine (the records, an index writeBack keeps) sees them.
func (t *recordTable) beforeWalk() {
	if len(t.dirty) > 0 && t.eng.writer() {
		t.writeBack()
	}
}

// scan calls fn with each record, in position order, until fn returns
// false: from the engine, without filling the cache (a walk of every link
// must not push the hot ones out). With texts, fn gets a new record each
// time, which it may keep; without, one record without its strings, valid
// during the call, and the walk allocates nothing per record. The
// writer's changes are written back first.
func (t *recordTable) scan(texts bool, fn func(r *record) bool) { t.scanFrom(t.first, texts, fn) }

// scanFrom is scan from position from on.
func (t *recordTable) scanFrom(from uint64, texts bool, fn func(r *record) bool) {
	t.beforeWalk()
	var reused record
	t.eng.scan([]byte{recordPrefix}, recordKey(nil, from), func(key, value []byte) bool {
		r := &reused
		if texts {
			r = new(record)
		}
		p, ok := positionAfter(key, 1)
		if err := decodeRecord(value, p, r, texts); err != nil || !ok {
			panic(fmt.Sprintf("fsm: the engine holds a damaged record at %x: %v", key, err))
		}
		return fn(r)
	})
}

// share returns a view of the table for a snapshot, which reads the
// engine's view sn, and counts a snapshot being written for the pieces
// that share pages. release must be called once the snapshot is written.
func (t *recordTable) share(sn *store.Snapshot) (view recordView, release func()) {
	t.gen++
	t.sharing.Add(1)
	var once atomic.Bool
	release = func() {
		if once.CompareAndSwap(false, true) {
			t.sharing.Add(-1)
		}
	}
	return recordView{sn: sn, first: t.first, n: t.n}, release
}

// viewWindow is how many records a view reads at once when walked in
// order: one scan instead of as many reads.
const viewWindow = 256

// recordView is a read-only view of a record table at one point in time:
// the records of an engine view. It reads a window of records at a time:
// a walk in position order (every snapshot section) reads the table once.
// A record it returns is valid until the next at, which may reuse it; its
// strings stay valid.
type recordView struct {
	sn       *store.Snapshot
	first, n uint64   // as the table's
	lo       uint64   // the window's first position
	win      []record // the records from lo
	ends     []int    // reused by at
	err      error    // the first failure to read the view
}

// at is the record at p, first <= p < n. A failure is kept in err (the
// snapshot fails) and a dead record stands in.
func (v *recordView) at(p uint64) *record {
	if p >= v.lo && p-v.lo < uint64(len(v.win)) {
		return &v.win[p-v.lo]
	}
	size := 1
	if p == v.lo+uint64(len(v.win)) {
		size = viewWindow // the next record: a walk
	}
	win := v.win[:0]
	if cap(win) < size {
		win = make([]record, 0, size)
	}
	var (
		derr  error
		texts = make([]byte, 0, size*128) // the window's texts: one allocation, not one a record
		ends  = v.ends[:0]                // per record: code's and URL's lengths, end of its texts
	)
	err := v.sn.Scan([]byte{recordPrefix}, recordKey(nil, p), func(key, value []byte) bool {
		q, ok := positionAfter(key, 1)
		if !ok || q != p+uint64(len(win)) {
			derr = fmt.Errorf("record %d: missing", p+uint64(len(win)))
			return false
		}
		win = append(win, record{})
		codeLen, urlLen, text, ferr := decodeFixed(value, q, &win[len(win)-1])
		texts = append(texts, text...)
		ends, derr = append(ends, codeLen, urlLen, len(texts)), ferr
		return derr == nil && len(win) < size
	})
	if len(texts) > 0 {
		// Never written again: the strings may share it.
		all, start := unsafe.String(unsafe.SliceData(texts), len(texts)), 0
		for i := range win {
			win[i].sliceTexts(all[start:ends[3*i+2]], ends[3*i], ends[3*i+1])
			start = ends[3*i+2]
		}
	}
	v.lo, v.win, v.ends = p, win, ends
	if err = errors.Join(err, derr); err != nil || len(win) == 0 {
		if v.err == nil {
			v.err = fmt.Errorf("read the records of a snapshot: %w", errors.Join(err, errors.New("no record")))
		}
		v.win = nil
		return &record{pos: p}
	}
	return &v.win[0]
}

// recordCache keeps decoded records by position in a fixed number of
// slots (a position's slot is its low bits), as optionCache does Options:
// readers fill it under the FSM's read lock, concurrently, hence the
// atomic slots; the writer replaces a position's record under the write
// lock, when no reader runs, so a reader never puts back a record the
// writer replaced.
type recordCache struct {
	slots        []atomic.Pointer[record]
	mask         uint64
	hits, misses *atomic.Uint64
}

// DefaultRecordCache is the number of decoded link records a state keeps
// when Config.RecordCache is 0: 1 MiB of slots and, full, about 28 MiB of
// records (a record of 112 bytes and its texts, ~96 for a 60–90-byte URL):
// the links read most, for a node whose other memory per link is its
// indexes.
const DefaultRecordCache = 1 << 17

// MaxCacheSlots bounds Config.RecordCache and Config.OptionCache: 8 GiB
// of slots each, and the code cache twice that.
const MaxCacheSlots = 1 << 30

// newRecordCache has at least slots slots, a power of two, at most
// MaxCacheSlots.
func newRecordCache(slots int) recordCache {
	n := 1
	for n < min(slots, MaxCacheSlots) {
		n <<= 1
	}
	return recordCache{slots: make([]atomic.Pointer[record], n), mask: uint64(n - 1),
		hits: new(atomic.Uint64), misses: new(atomic.Uint64)}
}

func (c *recordCache) get(p uint64) *record {
	if r := c.slots[p&c.mask].Load(); r != nil && r.pos == p {
		c.hits.Add(1)
		return r
	}
	c.misses.Add(1)
	return nil
}

// peek is get without counting.
func (c *recordCache) peek(p uint64) *record {
	if r := c.slots[p&c.mask].Load(); r != nil && r.pos == p {
		return r
	}
	return nil
}

func (c *recordCache) put(r *record) { c.slots[r.pos&c.mask].Store(r) }

// RecordCacheStats are the record cache's hits and misses since the
// state was built, for /metrics: reads of a link's record answered from
// memory, and reads that went to the engine. A restore builds a new
// state, whose counters start again from zero.
func (f *FSM) RecordCacheStats() (hits, misses uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c := &f.s.links.recs.cache
	return c.hits.Load(), c.misses.Load()
}

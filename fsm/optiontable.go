package fsm

import (
	"encoding/binary"
	"fmt"
	"iter"
	"sync/atomic"
)

// optionTable holds the Options of the links that have any (flagOptions):
// on disk, under each link's id (optionPrefix), encoded as snapshots
// encode them; and decoded in a cache by record position, so that a
// redirect of a link whose Options are cached reads no disk and allocates
// nothing. An Options value is never changed once stored (an edit stores
// a new one), so readers may keep what get returns. It keeps the tag index
// (tagindex.go) as it sets and drops Options.
type optionTable struct {
	eng    *engine
	recs   *recordTable // a position's link id
	n      int          // links with Options
	cache  optionCache
	key    []byte // reused by the writer
	value  []byte
	tagKey []byte
}

// optionPrefix is the engine's table of links' Options (store/DESIGN.md,
// "Keys").
const optionPrefix = 'o'

// DefaultOptionCache is the number of links whose decoded Options a
// state keeps when Config.OptionCache is 0: 512 KiB of slots, and the
// Options of the links read most.
const DefaultOptionCache = 1 << 16

func newOptionTable(eng *engine, recs *recordTable, cacheSlots int) optionTable {
	return optionTable{eng: eng, recs: recs, cache: newOptionCache(cacheSlots)}
}

func optionKey(dst []byte, id uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst[:0], optionPrefix), id)
}

// get is the Options of the link at p, nil for none. Readers call it
// under the FSM's read lock, the writer under its write lock.
func (o *optionTable) get(p uint64) *Options { return o.of(o.recs.at(p)) }

// of is get of the link whose record the caller has read.
func (o *optionTable) of(r *record) *Options {
	opts, cached := o.read(r)
	if opts != nil && !cached {
		o.cache.put(r.pos, opts)
	}
	return opts
}

// read is the Options of the link whose record the caller has read, and
// whether they came from the cache.
func (o *optionTable) read(r *record) (opts *Options, cached bool) {
	if r.flags&flagOptions == 0 {
		return nil, false
	}
	if opts, ok := o.cache.get(r.pos); ok {
		return opts, true
	}
	v, found := o.eng.read(optionKey(nil, r.id))
	opts, err := decodeStoredOptions(v)
	if !found || err != nil {
		// Serving the link without its Options (a password, a visit
		// limit) would be wrong: the request fails, the writer stops.
		panic(fmt.Sprintf("fsm: the engine lost the options of link %d (found %v): %v", r.id, found, err))
	}
	return opts, false
}

func decodeStoredOptions(v []byte) (*Options, error) {
	d := decoder{buf: v}
	opts := decodeOptionsExtended(&d)
	if d.err == nil && (opts == nil || len(d.buf) != 0) {
		d.err = fmt.Errorf("%d bytes do not hold one Options", len(v))
	}
	return opts, d.err
}

// walked is get for a walk over many links: it fills no cache slot.
func (o *optionTable) walked(p uint64) *Options { return o.walkedOf(o.recs.walked(p)) }

// walkedOf is walked of the link whose record the caller has read.
func (o *optionTable) walkedOf(r *record) *Options {
	opts, _ := o.read(r)
	return opts
}

// set stores opts, which is not empty, as the Options of the link at p;
// the caller flags the record.
func (o *optionTable) set(p uint64, opts *Options) {
	r := o.recs.at(p)
	if r.flags&flagOptions == 0 {
		o.n++
		o.retag(p, nil, opts.Tags)
	} else {
		o.retag(p, o.of(r).Tags, opts.Tags)
	}
	e := encoder{buf: o.value[:0]}
	encodeOptionsExtended(&e, opts)
	o.value = e.buf
	o.key = optionKey(o.key, r.id)
	o.eng.set(o.key, o.value)
	o.cache.put(p, opts)
}

// drop forgets the Options of the link at p; the caller clears the flag.
func (o *optionTable) drop(p uint64) {
	r := o.recs.at(p)
	if r.flags&flagOptions == 0 {
		return
	}
	o.n--
	o.retag(p, o.of(r).Tags, nil)
	o.key = optionKey(o.key, r.id)
	o.eng.delete(o.key)
	o.cache.drop(p)
}

func (o *optionTable) len() int { return o.n }

// all yields every link's Options by position, in id order, read from
// disk (not kept in the cache). positionOf finds a link's position.
func (o *optionTable) all(positionOf func(id uint64) (uint64, bool)) iter.Seq2[uint64, *Options] {
	return func(yield func(uint64, *Options) bool) {
		o.scanFrom(nil, func(key []byte, id uint64, opts *Options) bool {
			p, ok := positionOf(id)
			if !ok {
				panic(fmt.Sprintf("fsm: the engine holds options under %x of no link", key))
			}
			return yield(p, opts)
		})
	}
}

// scanFrom calls fn with each link's id and Options from the engine's key
// from (nil: the first) on, in id order, with the key, until fn returns
// false.
func (o *optionTable) scanFrom(from []byte, fn func(key []byte, id uint64, opts *Options) bool) {
	o.eng.scan([]byte{optionPrefix}, from, func(key, value []byte) bool {
		opts, err := decodeStoredOptions(value)
		if len(key) != 9 || err != nil {
			panic(fmt.Sprintf("fsm: the engine holds damaged options under %x: %v", key, err))
		}
		return fn(key, binary.BigEndian.Uint64(key[1:]), opts)
	})
}

// optionCache keeps decoded Options by record position in a fixed number
// of slots (a position's slot is its low bits): a slot holds the last
// Options read or written for a position that maps to it. Readers fill it
// under the FSM's read lock, concurrently, hence the atomic slots; the
// writer changes it under the write lock, when no reader runs, so a
// reader never puts back a value an edit replaced.
type optionCache struct {
	slots []atomic.Pointer[cachedOptions]
	mask  uint64
}

type cachedOptions struct {
	p    uint64
	opts *Options
}

// newOptionCache has at least slots slots, a power of two, at most
// MaxCacheSlots.
func newOptionCache(slots int) optionCache {
	n := 1
	for n < min(slots, MaxCacheSlots) {
		n <<= 1
	}
	return optionCache{slots: make([]atomic.Pointer[cachedOptions], n), mask: uint64(n - 1)}
}

func (c *optionCache) get(p uint64) (*Options, bool) {
	if e := c.slots[p&c.mask].Load(); e != nil && e.p == p {
		return e.opts, true
	}
	return nil, false
}

func (c *optionCache) put(p uint64, opts *Options) {
	c.slots[p&c.mask].Store(&cachedOptions{p, opts})
}

func (c *optionCache) drop(p uint64) {
	if e := c.slots[p&c.mask].Load(); e != nil && e.p == p {
		c.slots[p&c.mask].Store(nil)
	}
}

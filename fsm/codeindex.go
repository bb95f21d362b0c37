package fsm

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"strings"
	"sync/atomic"
)

// codeIndex is the live links by qualified code: on disk, one key per
// live code (codePrefix, the code) holding its record's position, written
// through the apply batch, so the writer sees a code taken earlier in its
// own batch; and in memory the live count, a code cache in front of the
// engine and a filter that answers most codes never taken without it.
//
// A value is a position as a key holds it (appendPosition). Nothing in
// the index limits the number of codes (the in-memory table it replaced
// kept 31 bits of hash a slot and degraded past ~1.6B).
type codeIndex struct {
	eng    *engine
	seed   maphash.Seed // the state's: node-local, nothing replicated depends on it
	live   int          // live links: keys under codePrefix
	cache  codeCache
	filter codeFilter
	key    []byte // reused by the writer
	value  []byte
}

// codePrefix is the engine's table of live links by qualified code
// (store/DESIGN.md, "Keys").
const codePrefix = 'c'

func newCodeIndex(eng *engine, seed maphash.Seed) codeIndex {
	records := min(eng.recordCache, MaxCacheSlots)
	return codeIndex{eng: eng, seed: seed, cache: newCodeCache(records), filter: newCodeFilter(records)}
}

// hash is code's hash with the state's seed, so no one can choose codes
// that collide; the cache and the filter each take their bits of it.
func (x *codeIndex) hash(code string) uint64 { return maphash.String(x.seed, code) }

// keyOf is code's key in a buffer of the writer's.
func (x *codeIndex) keyOf(code string) []byte {
	x.key = append(append(x.key[:0], codePrefix), code...)
	return x.key
}

// insert indexes code at position p; the caller made sure no live link
// holds it.
func (x *codeIndex) insert(code string, p uint64) {
	x.filter.add(x.hash(code))
	x.value = appendPosition(x.value[:0], p)
	x.eng.set(x.keyOf(code), x.value)
	x.live++
}

// mayHold is false for a code the index never took, nor its filter met.
func (x *codeIndex) mayHold(code string) bool { return x.filter.mayHold(x.hash(code)) }

// remove takes code out. A cache slot that still names it is left: a hit
// is checked against the record, whose code or liveness no longer match.
func (x *codeIndex) remove(code string) {
	x.eng.delete(x.keyOf(code))
	x.live--
}

// position reads code's position from the engine: the writer through its
// batch, readers (concurrently, under the FSM's read lock) what is
// committed, each with a key of its own.
func (x *codeIndex) position(code string) (uint64, bool) {
	var v []byte
	var found bool
	if x.eng.writer() {
		v, found = x.eng.get(x.keyOf(code))
	} else {
		key := make([]byte, 0, 1+len(code))
		v, found = x.eng.read(append(append(key, codePrefix), code...))
	}
	if !found {
		return 0, false
	}
	p, ok := positionFrom(v)
	if !ok {
		panic(fmt.Sprintf("fsm: the engine holds a damaged code index entry for %q: %x", strings.Clone(code), v))
	}
	return p, true
}

// codeCache remembers where codes were last found: buckets of codeWays
// slots (the low bits of a code's hash with the state's seed choose the
// bucket, 32 bytes, one cache line), each slot the hash's top 24 bits and
// the position, 8 bytes and no pointer (positions past 40 bits, a
// trillion links, are not kept: the engine answers). It is lossy (a code
// found later may take a slot) and never cleared: a hit is only a
// candidate, which the caller checks against the record (its code is the
// one asked for and it is live), so a slot left by a deleted, purged or
// renamed link, or by a code a newer link took over, falls back to the
// engine instead of answering. Readers fill it under the FSM's read
// lock, concurrently, hence the atomic slots: two readers may fill two
// slots with one tag, and get takes the first, which a fallback then
// overwrites.
//
// Sized at codeSlotsPerRecord slots a record cache slot: the record cache
// holds consecutive positions without conflict, but codes land in buckets
// by hash; at one slot a record, 4 ways leave ~6 % of a full record
// cache's codes out (each such redirect reads the engine), at two <1 %.
type codeCache struct {
	slots []atomic.Uint64 // tag << slotPositionBits | position; 0 holds nothing useful
	mask  uint32          // of the bucket numbers
}

const (
	codeWays           = 4
	codeSlotsPerRecord = 2
	slotPositionBits   = 40
	slotPositions      = 1<<slotPositionBits - 1
)

// tagOf is the part of a code's hash a slot keeps: its top bits, which
// no bucket number takes.
func tagOf(h uint64) uint64 { return h >> slotPositionBits }

// newCodeCache has at least codeSlotsPerRecord × records slots, a power
// of two.
func newCodeCache(records int) codeCache {
	n := codeWays
	for n < codeSlotsPerRecord*records {
		n <<= 1
	}
	return codeCache{slots: make([]atomic.Uint64, n), mask: uint32(n/codeWays - 1)}
}

func (c *codeCache) bucket(h uint64) []atomic.Uint64 {
	b := int(uint32(h)&c.mask) * codeWays
	return c.slots[b : b+codeWays : b+codeWays]
}

// get is the position last put under hash h, if its bucket holds h's tag.
func (c *codeCache) get(h uint64) (uint64, bool) {
	b, tag := c.bucket(h), tagOf(h)
	for i := range b {
		if s := b[i].Load(); s != 0 && s>>slotPositionBits == tag {
			return s & slotPositions, true
		}
	}
	return 0, false
}

// put remembers p under h: in the slot that holds h's tag already, else
// an empty one, else one at random (no order to keep, and a pair of hot
// codes cannot evict each other on every lookup as a fixed choice could).
func (c *codeCache) put(h, p uint64) {
	if p > slotPositions {
		return
	}
	b, tag, victim := c.bucket(h), tagOf(h), -1
	for i := range codeWays {
		s := b[i].Load()
		if s != 0 && s>>slotPositionBits == tag {
			victim = i
			break
		}
		if s == 0 && victim < 0 {
			victim = i
		}
	}
	if victim < 0 {
		victim = int(rand.Uint32() % codeWays)
	}
	b[victim].Store(tag<<slotPositionBits | p)
}

// codeFilter is a Bloom filter of every code the state holds, live or
// tombstoned (blocked: a code's 4 bits are in one 64-bit word, one memory
// read), so that a lookup of a code never taken, what every create makes
// of the code it draws and a redirect of an unknown code, reads no disk:
// a seek of the engine for it cost ~2 µs of a create's ~4, and the
// tombstone's as much. A code whose bits are all set may be taken: the
// engine answers. insert and tombstoneSet.add set bits and nothing clears
// them, so "absent" is never wrong; a restore or a resume builds a new
// one from the live and the tombstoned codes. One word a record cache
// slot (1 MiB by default): false positives ~1.5 % at 6 codes a word (786k
// codes by default), ~13 % at 14, half at 30; a full filter costs what no
// filter would: a read of the engine a lookup. The writer sets bits under
// the FSM's write lock, readers read them under its read lock: no atomics.
type codeFilter struct {
	words []uint64
	mask  uint32
	// partial: the bits of a resumed state's codes are still being set
	// (FSM.fillIndexes), and every code may be held.
	partial bool
}

func newCodeFilter(words int) codeFilter {
	n := 1
	for n < words {
		n <<= 1
	}
	return codeFilter{words: make([]uint64, n), mask: uint32(n - 1)}
}

// at is h's word and its 4 bits, from bits of h the word's index does
// not use (a multiply mixes them).
func (f *codeFilter) at(h uint64) (*uint64, uint64) {
	m := h * 0x9e3779b97f4a7c15
	bits := uint64(1)<<(m>>58) | uint64(1)<<(m>>52&63) | uint64(1)<<(m>>46&63) | uint64(1)<<(m>>40&63)
	return &f.words[uint32(h>>32)&f.mask], bits
}

func (f *codeFilter) add(h uint64) {
	w, bits := f.at(h)
	*w |= bits
}

// mayHold is false for a code never added.
func (f *codeFilter) mayHold(h uint64) bool {
	if f.partial {
		return true
	}
	w, bits := f.at(h)
	return *w&bits == bits
}

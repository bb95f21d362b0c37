package fsm

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync/atomic"
)

// codeIndex is the live links by qualified code: on disk, one key per
// live code (codeKey) holding its record's position, written through the
// apply batch, so the writer sees a code taken earlier in its own batch;
// and in memory the live count and a code cache in front of the engine.
//
// Positions stay 32-bit, as the record table's are: 4 bytes a value.
// Nothing in the index limits the number of codes (the in-memory table
// it replaces kept 31 bits of hash a slot and degraded past ~1.6B).
type codeIndex struct {
	eng   *engine
	live  int // live links: keys under codePrefix
	cache codeCache
	key   []byte // reused by the writer
	value [4]byte
}

// codePrefix is the engine's table of live links by qualified code
// (store/DESIGN.md, "Keys").
const codePrefix = 'c'

func newCodeIndex(eng *engine) codeIndex {
	return codeIndex{eng: eng, cache: newCodeCache(eng.recordCache)}
}

// keyOf is code's key in a buffer of the writer's.
func (x *codeIndex) keyOf(code string) []byte {
	x.key = append(append(x.key[:0], codePrefix), code...)
	return x.key
}

// insert indexes code at position p; the caller made sure no live link
// holds it.
func (x *codeIndex) insert(code string, p uint32) {
	binary.BigEndian.PutUint32(x.value[:], p)
	x.eng.set(x.keyOf(code), x.value[:])
	x.live++
}

// remove takes code out. A cache slot that still names it is left: a hit
// is checked against the record, whose code or liveness no longer match.
func (x *codeIndex) remove(code string) {
	x.eng.delete(x.keyOf(code))
	x.live--
}

// position reads code's position from the engine: the writer through its
// batch, readers (concurrently, under the FSM's read lock) what is
// committed, each with a key of its own.
func (x *codeIndex) position(code string) (uint32, bool) {
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
	if len(v) != 4 {
		panic(fmt.Sprintf("fsm: the engine holds a damaged code index entry for %q: %x", strings.Clone(code), v))
	}
	return binary.BigEndian.Uint32(v), true
}

// codeCache remembers where codes were last found: a slot per hash (the
// low bits of a code's 32-bit hash with the state's seed choose the slot),
// holding the whole hash and the position, 8 bytes and no pointer. It is
// lossy (a code found later takes the slot) and never cleared: a hit is
// only a candidate, which the caller checks against the record (its code
// is the one asked for and it is live), so a slot left by a deleted,
// purged or renamed link, or by a code a newer link took over, falls back
// to the engine instead of answering. Readers fill it under the FSM's read
// lock, concurrently, hence the atomic slots.
type codeCache struct {
	slots []atomic.Uint64 // hash << 32 | position; 0 holds nothing useful
	mask  uint32
}

// newCodeCache has at least slots slots, a power of two: as many as the
// record cache, whose records its hits read, at 8 bytes a slot.
func newCodeCache(slots int) codeCache {
	n := 1
	for n < slots {
		n <<= 1
	}
	return codeCache{slots: make([]atomic.Uint64, n), mask: uint32(n - 1)}
}

// get is the position last put under hash h, if its slot holds h.
func (c *codeCache) get(h uint32) (uint32, bool) {
	s := c.slots[h&c.mask].Load()
	return uint32(s), s != 0 && uint32(s>>32) == h
}

func (c *codeCache) put(h, p uint32) { c.slots[h&c.mask].Store(uint64(h)<<32 | uint64(p)) }

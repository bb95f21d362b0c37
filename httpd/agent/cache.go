package agent

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
)

// MaxCachedLen is the longest User-Agent a Cache keeps, in bytes. Real
// browsers send 100 to 300 bytes; longer strings are rare and are classified
// on every call rather than cached. Truncating them to a key instead would
// be wrong: tokens that matter, such as facebookexternalhit in iMessage's
// previewer, come at the end.
const MaxCachedLen = 512

// MaxCacheSize bounds NewCache's size. A full cache of this size holds at
// most about 38 MB (MaxCachedLen plus some 70 bytes a slot), and real
// traffic has far fewer distinct User-Agents.
const MaxCacheSize = 1 << 16

// Cache remembers what classify answered for recently seen User-Agents, so
// that the redirect path classifies a returning browser without allocating.
// T is whatever the caller keeps of a User-Agent: this package's Class, or
// the caller's own classes derived from it, so that a hit costs no
// translation either.
//
// It is a direct-mapped table: each User-Agent has one slot, chosen by a
// hash seeded per Cache (so that no one can aim strings at one slot from
// outside), and a newcomer replaces whatever shared its slot. Slots hold
// atomic pointers to immutable entries, so hits take no lock and concurrent
// misses only race to store equal answers. Memory is bounded by the slot
// count times MaxCachedLen plus a few words per slot.
type Cache[T any] struct {
	seed     maphash.Seed
	mask     uint64
	slots    []atomic.Pointer[entry[T]]
	classify func(ua []byte) T
}

type entry[T any] struct {
	ua    string
	value T
}

// NewCache returns a cache of size slots, rounded up to a power of two and
// kept between 1 and MaxCacheSize, that remembers classify's answers.
// classify must be pure: it is called at most once per miss, and its
// answers are shared by every caller.
func NewCache[T any](size int, classify func(ua []byte) T) *Cache[T] {
	size = min(max(size, 1), MaxCacheSize)
	n := 1 << bits.Len(uint(size-1))
	return &Cache[T]{
		seed:     maphash.MakeSeed(),
		mask:     uint64(n - 1),
		slots:    make([]atomic.Pointer[entry[T]], n),
		classify: classify,
	}
}

// Classify returns classify(ua), from the cache when ua was seen recently.
// A hit does not allocate; a miss allocates an entry holding a copy of ua.
// It is safe for concurrent use, and ua is not retained.
func (c *Cache[T]) Classify(ua []byte) T {
	if len(ua) == 0 || len(ua) > MaxCachedLen {
		return c.classify(ua) // nothing to scan, or too long to keep
	}
	slot := &c.slots[maphash.Bytes(c.seed, ua)&c.mask]
	if e := slot.Load(); e != nil && e.ua == string(ua) {
		return e.value
	}
	value := c.classify(ua)
	slot.Store(&entry[T]{ua: string(ua), value: value})
	return value
}

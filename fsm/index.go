package fsm

// hashIndex maps keys to positions without storing the keys: each slot
// holds 31 bits of the key's hash and the position, and a lookup confirms
// a candidate by comparing the key kept where the position points.
// Open addressing with linear probing; deletion shifts later entries back
// instead of leaving tombstones. At most 3/4 full, a slot of 8 bytes costs
// 11-21 bytes per entry, against ~40 for a Go map from a string key, and
// holds no pointers for the garbage collector to follow.
//
// The caller hashes and compares; the index never sees a key.
type hashIndex struct {
	slots []uint64 // used bit | 31 hash bits | 32-bit position; 0 is empty
	used  int
}

const (
	minIndexSlots = 64
	slotUsed      = 1 << 63
	hashBits      = 1<<31 - 1
)

func slot(h, p uint32) uint64          { return slotUsed | uint64(h&hashBits)<<32 | uint64(p) }
func slotHash(s uint64) uint32         { return uint32(s>>32) & hashBits }
func slotPos(s uint64) uint32          { return uint32(s) }
func (x *hashIndex) mask() int         { return len(x.slots) - 1 }
func (x *hashIndex) home(h uint32) int { return int(h&hashBits) & x.mask() }

// lookup returns the first position with hash h for which match is true.
func (x *hashIndex) lookup(h uint32, match func(p uint32) bool) (uint32, bool) {
	if len(x.slots) == 0 {
		return 0, false
	}
	for i := x.home(h); ; i = (i + 1) & x.mask() {
		s := x.slots[i]
		if s == 0 {
			return 0, false
		}
		if slotHash(s) == h&hashBits && match(slotPos(s)) {
			return slotPos(s), true
		}
	}
}

// insert adds position p under hash h. The caller makes sure no entry
// for the same key exists.
func (x *hashIndex) insert(h, p uint32) {
	if (x.used+1)*4 > len(x.slots)*3 {
		x.grow()
	}
	x.place(slot(h, p))
	x.used++
}

func (x *hashIndex) place(s uint64) {
	i := x.home(slotHash(s))
	for x.slots[i] != 0 {
		i = (i + 1) & x.mask()
	}
	x.slots[i] = s
}

func (x *hashIndex) grow() { x.resize(max(minIndexSlots, 2*len(x.slots))) }

// reserve makes room for n more entries at once: the size that growing
// one entry at a time would come to.
func (x *hashIndex) reserve(n int) {
	size := max(minIndexSlots, len(x.slots))
	for (x.used+n)*4 > size*3 {
		size *= 2
	}
	if size > len(x.slots) {
		x.resize(size)
	}
}

func (x *hashIndex) resize(size int) {
	old := x.slots
	x.slots = make([]uint64, size)
	for _, s := range old {
		if s != 0 {
			x.place(s)
		}
	}
}

// remove deletes the entry for position p under hash h, if there is one.
func (x *hashIndex) remove(h, p uint32) {
	if len(x.slots) == 0 {
		return
	}
	want := slot(h, p)
	i := x.home(h)
	for x.slots[i] != want {
		if x.slots[i] == 0 {
			return
		}
		i = (i + 1) & x.mask()
	}
	x.used--
	// Shift back every later entry of the run that may move into the hole
	// (one whose home is not cyclically within (hole, its slot]), so that
	// lookups never stop early at an empty slot.
	hole := i
	for j := (i + 1) & x.mask(); x.slots[j] != 0; j = (j + 1) & x.mask() {
		home := x.home(slotHash(x.slots[j]))
		if (j-home)&x.mask() >= (j-hole)&x.mask() {
			x.slots[hole] = x.slots[j]
			hole = j
		}
	}
	x.slots[hole] = 0
}

// len is the number of entries.
func (x *hashIndex) len() int { return x.used }

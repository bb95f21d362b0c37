package fsm

import (
	"encoding/binary"
	"errors"
	"iter"
	"maps"
	"slices"
	"sort"

	"github.com/RoaringBitmap/roaring/v2"
)

// A record's position is 64-bit. In a key (records, expiries, targets)
// and in the code index's value it takes 4 bytes, big-endian, below
// longPosition, and from it on the mark ff ff ff ff and then 8 bytes: a
// longer key sorts after every 4-byte one, so the engine keeps positions
// in order and no key written before has to change. Only a cluster
// raised to LevelPositions writes long ones (recordTable.spent).
const longPosition = 1<<32 - 1

// maxPosition bounds positions: the walks keep them in an int64.
const maxPosition = 1<<63 - 1

// appendPosition appends p as a key holds it.
func appendPosition(dst []byte, p uint64) []byte {
	if p < longPosition {
		return binary.BigEndian.AppendUint32(dst, uint32(p))
	}
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(dst, longPosition), p)
}

// positionFrom reads a position that appendPosition wrote, all of b;
// false for anything else.
func positionFrom(b []byte) (uint64, bool) {
	switch len(b) {
	case 4:
		p := binary.BigEndian.Uint32(b)
		return uint64(p), p != longPosition
	case 12:
		p := binary.BigEndian.Uint64(b[4:])
		return p, binary.BigEndian.Uint32(b) == longPosition && p >= longPosition && p <= maxPosition
	}
	return 0, false
}

// positionAfter reads the position that ends key after its first n
// bytes; false for anything else, a key shorter than n too.
func positionAfter(key []byte, n int) (uint64, bool) { return positionFrom(key[min(n, len(key)):]) }

// positionList is a list of positions: for each value of their high 32
// bits in use, a roaring bitmap of their low 32 bits, so that the first
// 4,294,967,295 positions of a cluster are one bitmap, as before positions
// were longer. (Roaring's own 64-bit bitmap has neither PreviousValue nor
// Ranges, which the walks and the kept state need.)
type positionList struct {
	parts []listPart // by high, ascending; none empty
}

type listPart struct {
	high uint32
	low  *roaring.Bitmap
}

func newPositionList() *positionList { return &positionList{} }

// part is the index of high's part, and whether there is one: where it
// would go when not.
func (l *positionList) part(high uint32) (int, bool) {
	i := sort.Search(len(l.parts), func(i int) bool { return l.parts[i].high >= high })
	return i, i < len(l.parts) && l.parts[i].high == high
}

// partFor is high's part, made when it has none.
func (l *positionList) partFor(high uint32) *roaring.Bitmap {
	i, ok := l.part(high)
	if !ok {
		l.parts = slices.Insert(l.parts, i, listPart{high: high, low: roaring.New()})
	}
	return l.parts[i].low
}

func (l *positionList) add(p uint64) { l.partFor(uint32(p >> 32)).Add(uint32(p)) }

func (l *positionList) remove(p uint64) {
	if i, ok := l.part(uint32(p >> 32)); ok {
		l.parts[i].low.Remove(uint32(p))
		if l.parts[i].low.IsEmpty() {
			l.parts = slices.Delete(l.parts, i, i+1)
		}
	}
}

// addRange adds the positions from start to end, end excluded.
func (l *positionList) addRange(start, end uint64) {
	for start < end {
		high := start >> 32
		stop := min(end, (high+1)<<32)
		l.partFor(uint32(high)).AddRange(start&(1<<32-1), stop-high<<32)
		start = stop
	}
}

func (l *positionList) runOptimize() {
	for _, pt := range l.parts {
		pt.low.RunOptimize()
	}
}

// count is how many positions the list holds.
func (l *positionList) count() uint64 {
	n := uint64(0)
	for _, pt := range l.parts {
		n += pt.low.GetCardinality()
	}
	return n
}

// previous is the largest position of the list below p, -1 for none.
func (l *positionList) previous(p int64) int64 {
	if p <= 0 {
		return -1
	}
	high, low := uint32(uint64(p-1)>>32), uint32(p-1)
	i, ok := l.part(high)
	if ok {
		if v := l.parts[i].low.PreviousValue(low); v >= 0 {
			return int64(high)<<32 | v
		}
	}
	if i == 0 {
		return -1
	}
	below := l.parts[i-1]
	return int64(below.high)<<32 | int64(below.low.Maximum())
}

// rank is how many positions of the list are at most v.
func (l *positionList) rank(v uint64) uint64 {
	n := uint64(0)
	for _, pt := range l.parts {
		switch {
		case uint64(pt.high) < v>>32:
			n += pt.low.GetCardinality()
		case uint64(pt.high) == v>>32:
			n += pt.low.Rank(uint32(v))
		}
	}
	return n
}

// values yields the positions in order.
func (l *positionList) values() iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		for _, pt := range l.parts {
			for low := range roaring.Values(pt.low) {
				if !yield(uint64(pt.high)<<32 | uint64(low)) {
					return
				}
			}
		}
	}
}

// ranges yields the list's runs in order, each from start to end, end
// excluded (a run across two parts comes as two).
func (l *positionList) ranges() iter.Seq2[uint64, uint64] {
	return func(yield func(uint64, uint64) bool) {
		for _, pt := range l.parts {
			base := uint64(pt.high) << 32
			for start, end := range pt.low.Ranges() {
				if !yield(base+uint64(start), base+end) {
					return
				}
			}
		}
	}
}

// union is the positions any of lists holds, in order.
func union(lists []*positionList) []uint64 {
	byHigh := map[uint32][]*roaring.Bitmap{}
	for _, l := range lists {
		for _, pt := range l.parts {
			byHigh[pt.high] = append(byHigh[pt.high], pt.low)
		}
	}
	var out []uint64
	for _, high := range slices.Sorted(maps.Keys(byHigh)) {
		for low := range roaring.Values(roaring.FastOr(byHigh[high]...)) {
			out = append(out, uint64(high)<<32|uint64(low))
		}
	}
	return out
}

// A workspace's live links, and an author's, are a list of record
// positions (positions are in id order). The lists are roaring bitmaps:
// links made one after another are a run, so a workspace that takes most
// links costs at most a bit a position and, compacted (after a restore, a
// resume), a few bytes a run; a workspace whose links are scattered costs
// two bytes a link. A list walk reads positions only: the records are
// read for the page it returns.

// compactLists turns the runs of every list into a few bytes each, once
// a restore has built them.
func (lt *linkTable) compactLists() {
	for _, list := range lt.workspaces.links {
		list.runOptimize()
	}
	for _, list := range lt.authors.links {
		list.runOptimize()
	}
}

// newestFirst walks the live links of the workspaces below the id before
// (0: all of them), newest first; with an author, only those it created.
func (f *FSM) newestFirst(workspaces []string, author string, before uint64) *mergeWalk {
	below := f.s.links.recs.n
	if before != 0 {
		below, _ = f.s.links.positionOf(before) // the first position whose id is before or above
	}
	return newMergeWalk(f.s.links.listsOf(workspaces, author), below)
}

// mergeWalk merges lists of positions, largest first. Positions are
// unique across the lists.
type mergeWalk struct {
	lists []*positionList
	heads []int64 // lists[i]'s next candidate, -1 once it is spent
}

// newMergeWalk walks the positions of lists below the position below.
func newMergeWalk(lists []*positionList, below uint64) *mergeWalk {
	w := &mergeWalk{lists: lists, heads: make([]int64, len(lists))}
	for i, list := range lists {
		w.heads[i] = list.previous(int64(below))
	}
	return w
}

// next is the largest position not walked yet.
func (w *mergeWalk) next() (uint64, bool) {
	best := -1
	for i, h := range w.heads {
		if h >= 0 && (best < 0 || h > w.heads[best]) {
			best = i
		}
	}
	if best < 0 {
		return 0, false
	}
	p := w.heads[best]
	w.heads[best] = w.lists[best].previous(p)
	return uint64(p), true
}

// skip passes over the next k positions without reading them: the
// smallest v with exactly k of the remaining positions above it is found
// by binary search on v, each step a rank in every list, so the cost does
// not grow with k.
func (w *mergeWalk) skip(k int) {
	if k <= 0 {
		return
	}
	// atMost(i, v) is how many of lists[i]'s remaining positions are <= v.
	atMost := func(i int, v int64) uint64 {
		if v = min(v, w.heads[i]); v < 0 {
			return 0
		}
		return w.lists[i].rank(uint64(v))
	}
	remaining, top := uint64(0), int64(-1)
	for i, h := range w.heads {
		remaining += atMost(i, h)
		top = max(top, h)
	}
	if uint64(k) >= remaining {
		for i := range w.heads {
			w.heads[i] = -1
		}
		return
	}
	above := func(v int64) uint64 {
		n := remaining
		for i := range w.heads {
			n -= atMost(i, v)
		}
		return n
	}
	v := int64(sort.Search(int(top)+1, func(v int) bool { return above(int64(v)) <= uint64(k) }))
	for i := range w.heads {
		w.heads[i] = w.lists[i].previous(min(v, w.heads[i]) + 1)
	}
}

// encodePositions writes a list of positions as its runs: the gap from
// the previous run's end and the run's length.
func encodePositions(e *encoder, list *positionList, flush func(bool)) {
	runs := 0
	for range list.ranges() {
		runs++
	}
	e.uvarint(uint64(runs))
	end := uint64(0)
	for start, stop := range list.ranges() {
		e.uvarint(start - end)
		e.uvarint(stop - start)
		end = stop
		flush(false)
	}
}

// decodePositions reads what encodePositions wrote of a table whose
// positions are below n: a damaged run cannot make a bitmap for every
// 2^32 positions it spans before the checksum is read.
func decodePositions(d *decoder, n uint64) *positionList {
	list := newPositionList()
	end := uint64(0)
	for runs := d.count(2); runs > 0 && d.err == nil; runs-- {
		gap, length := d.uvarint(), d.uvarint()
		if gap > n-end || length > n-end-gap || length == 0 {
			d.fail(errors.New("a list of positions is out of order"))
			return list
		}
		start := end + gap
		end = start + length
		list.addRange(start, end)
	}
	list.runOptimize()
	return list
}

// decodePositionSteps reads a list of positions as the first layout of a
// kept state wrote it: each position as its step from the one before.
func decodePositionSteps(d *decoder, n uint64) *positionList {
	list := newPositionList()
	p, limit := uint64(0), min(n, 1<<32)
	for steps := d.count(1); steps > 0 && d.err == nil; steps-- {
		step := d.uvarint()
		if step >= limit-p {
			d.fail(errors.New("a list of positions is out of range"))
			return list
		}
		p += step
		list.add(p)
	}
	list.runOptimize()
	return list
}

package fsm

import (
	"errors"
	"sort"

	"github.com/RoaringBitmap/roaring/v2"
)

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
		list.RunOptimize()
	}
	for _, list := range lt.authors.links {
		list.RunOptimize()
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
	lists []*roaring.Bitmap
	heads []int64 // lists[i]'s next candidate, -1 once it is spent
}

// newMergeWalk walks the positions of lists below the position below.
func newMergeWalk(lists []*roaring.Bitmap, below uint32) *mergeWalk {
	w := &mergeWalk{lists: lists, heads: make([]int64, len(lists))}
	for i, list := range lists {
		w.heads[i] = previous(list, int64(below))
	}
	return w
}

// previous is the largest position of list below p, -1 for none.
func previous(list *roaring.Bitmap, p int64) int64 {
	if p <= 0 {
		return -1
	}
	return list.PreviousValue(uint32(p - 1))
}

// next is the largest position not walked yet.
func (w *mergeWalk) next() (uint32, bool) {
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
	w.heads[best] = previous(w.lists[best], p)
	return uint32(p), true
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
		return w.lists[i].Rank(uint32(v))
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
		w.heads[i] = previous(w.lists[i], min(v, w.heads[i])+1)
	}
}

// encodePositions writes a list of positions as its runs: the gap from
// the previous run's end and the run's length.
func encodePositions(e *encoder, list *roaring.Bitmap, flush func(bool)) {
	runs := 0
	for range list.Ranges() {
		runs++
	}
	e.uvarint(uint64(runs))
	end := uint64(0)
	for start, stop := range list.Ranges() {
		e.uvarint(uint64(start) - end)
		e.uvarint(stop - uint64(start))
		end = stop
		flush(false)
	}
}

// decodePositions reads what encodePositions wrote.
func decodePositions(d *decoder) *roaring.Bitmap {
	list := roaring.New()
	end := uint64(0)
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		gap, length := d.uvarint(), d.uvarint()
		start := end + gap
		end = start + length
		if gap > 1<<32 || length > 1<<32 || end > 1<<32 || end <= start {
			d.fail(errors.New("a list of positions is out of order"))
			return list
		}
		list.AddRange(start, end)
	}
	list.RunOptimize()
	return list
}

// decodePositionSteps reads a list of positions as the first layout of a
// kept state wrote it: each position as its step from the one before.
func decodePositionSteps(d *decoder) *roaring.Bitmap {
	list := roaring.New()
	p := uint64(0)
	for n := d.count(1); n > 0 && d.err == nil; n-- {
		p += d.uvarint()
		if p >= 1<<32 {
			d.fail(errors.New("a list of positions is out of range"))
			return list
		}
		list.Add(uint32(p))
	}
	list.RunOptimize()
	return list
}

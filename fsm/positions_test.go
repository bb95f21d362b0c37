package fsm

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
)

// TestMergeWalk: a walk of lists below a position, after skipping k, gives
// the positions a sort of all of them gives, largest first.
func TestMergeWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		n := rng.IntN(3000)
		lists := make([]*roaring.Bitmap, 1+rng.IntN(4))
		for i := range lists {
			lists[i] = roaring.New()
		}
		var all []uint32
		run := 0
		for p := range n {
			if rng.IntN(4) == 0 { // a hole: a removed link
				continue
			}
			if rng.IntN(50) == 0 { // runs of one workspace, then another
				run = rng.IntN(len(lists))
			}
			lists[run].Add(uint32(p))
			all = append(all, uint32(p))
		}
		if round%2 == 0 {
			for _, list := range lists {
				list.RunOptimize()
			}
		}
		below := uint32(rng.IntN(n + 2))
		k := rng.IntN(len(all) + 3)
		var want []uint32
		for _, p := range slices.Backward(all) {
			if p < below {
				want = append(want, p)
			}
		}
		want = want[min(k, len(want)):]
		w := newMergeWalk(lists, below)
		w.skip(k)
		var got []uint32
		for p, ok := w.next(); ok; p, ok = w.next() {
			got = append(got, p)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: below %d, skip %d: walked %d positions, want %d (first %v, want %v)",
				round, below, k, len(got), len(want), got[:min(5, len(got))], want[:min(5, len(want))])
		}
	}
}

// TestPositionsEncoding: a list reads back as it was written, in runs;
// the first layout's steps read back too; a damaged list is an error.
func TestPositionsEncoding(t *testing.T) {
	cases := map[string][]uint32{
		"empty":       nil,
		"one":         {7},
		"first":       {0},
		"a run":       {3, 4, 5, 6},
		"scattered":   {1, 5, 9, 100000, 100001, 1 << 20},
		"the largest": {1<<32 - 2, 1<<32 - 1},
	}
	for name, positions := range cases {
		t.Run(name, func(t *testing.T) {
			var e encoder
			encodePositions(&e, roaring.BitmapOf(positions...), func(bool) {})
			d := &decoder{buf: e.buf}
			got := decodePositions(d)
			if d.err != nil || !slices.Equal(got.ToArray(), roaring.BitmapOf(positions...).ToArray()) || len(d.buf) != 0 {
				t.Fatalf("read back %v (%v), want %v", got.ToArray(), d.err, positions)
			}
			var steps encoder
			steps.uvarint(uint64(len(positions)))
			prev := uint32(0)
			for _, p := range positions {
				steps.uvarint(uint64(p - prev))
				prev = p
			}
			d = &decoder{buf: steps.buf}
			if got := decodePositionSteps(d); d.err != nil || !slices.Equal(got.ToArray(), roaring.BitmapOf(positions...).ToArray()) {
				t.Fatalf("steps read back %v (%v), want %v", got.ToArray(), d.err, positions)
			}
		})
	}
	for name, runs := range map[string][]uint64{
		"an empty run":      {1, 0, 0},
		"past 32 bits":      {1, 1 << 32, 1},
		"a truncated count": {3, 1, 1},
	} {
		t.Run(name, func(t *testing.T) {
			var e encoder
			for _, v := range runs {
				e.uvarint(v)
			}
			d := &decoder{buf: e.buf}
			decodePositions(d)
			if d.err == nil {
				t.Fatalf("%v read as a list", runs)
			}
		})
	}
}

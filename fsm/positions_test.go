package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// TestMergeWalk: a walk of lists below a position, after skipping k, gives
// the positions a sort of all of them gives, largest first; lists that
// cross 32 bits walk as the others.
func TestMergeWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		n := rng.IntN(3000)
		base := uint64(0)
		if round%3 == 1 { // the positions cross 32 bits
			base = 1<<32 - uint64(rng.IntN(n+1))
		}
		lists := make([]*positionList, 1+rng.IntN(4))
		for i := range lists {
			lists[i] = newPositionList()
		}
		var all []uint64
		run := 0
		for i := range uint64(n) {
			if rng.IntN(4) == 0 { // a hole: a removed link
				continue
			}
			if rng.IntN(50) == 0 { // runs of one workspace, then another
				run = rng.IntN(len(lists))
			}
			lists[run].add(base + i)
			all = append(all, base+i)
		}
		if round%2 == 0 {
			for _, list := range lists {
				list.runOptimize()
			}
		}
		below := base + uint64(rng.IntN(n+2))
		k := rng.IntN(len(all) + 3)
		var want []uint64
		for _, p := range slices.Backward(all) {
			if p < below {
				want = append(want, p)
			}
		}
		want = want[min(k, len(want)):]
		w := newMergeWalk(lists, below)
		w.skip(k)
		var got []uint64
		for p, ok := w.next(); ok; p, ok = w.next() {
			got = append(got, p)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: base %d, below %d, skip %d: walked %d positions, want %d (first %v, want %v)",
				round, base, below, k, len(got), len(want), got[:min(5, len(got))], want[:min(5, len(want))])
		}
		if u := union(lists); !slices.Equal(u, all) {
			t.Fatalf("round %d: the union holds %d positions, want %d", round, len(u), len(all))
		}
	}
}

// TestPositionList: each operation of a list whose positions cross 32
// bits agrees with a sorted slice of them, and a removal of its last
// position in a part leaves no empty part behind.
func TestPositionList(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	candidates := []uint64{0, 1, 1<<32 - 2, 1<<32 - 1, 1 << 32, 1<<32 + 1, 5<<32 + 9, maxPosition}
	l := newPositionList()
	var model []uint64
	for range 2000 {
		p := candidates[rng.IntN(len(candidates))]
		i, held := slices.BinarySearch(model, p)
		if rng.IntN(3) == 0 {
			l.remove(p)
			if held {
				model = slices.Delete(model, i, i+1)
			}
		} else {
			l.add(p)
			if !held {
				model = slices.Insert(model, i, p)
			}
		}
		if got := slices.Collect(l.values()); !slices.Equal(got, model) {
			t.Fatalf("the list holds %v, want %v", got, model)
		}
		for _, part := range l.parts {
			if part.low.IsEmpty() {
				t.Fatalf("part %d is empty", part.high)
			}
		}
		if l.count() != uint64(len(model)) {
			t.Fatalf("count %d, want %d", l.count(), len(model))
		}
		q := candidates[rng.IntN(len(candidates))]
		want, j := int64(-1), sortSearch(model, q)
		if j > 0 {
			want = int64(model[j-1])
		}
		if got := l.previous(int64(q)); got != want {
			t.Fatalf("previous(%d) = %d in %v, want %d", q, got, model, want)
		}
		if got, want := l.rank(q), uint64(sortSearch(model, q+1)); q != maxPosition && got != want {
			t.Fatalf("rank(%d) = %d in %v, want %d", q, got, model, want)
		}
	}
}

// sortSearch is how many of sorted are below v.
func sortSearch(sorted []uint64, v uint64) int {
	i, _ := slices.BinarySearch(sorted, v)
	return i
}

// TestPositionsEncoding: a list reads back as it was written, in runs,
// past 32 bits too; the first layout's steps read back too; a damaged
// list is an error.
func TestPositionsEncoding(t *testing.T) {
	cases := map[string][]uint64{
		"empty":        nil,
		"one":          {7},
		"first":        {0},
		"a run":        {3, 4, 5, 6},
		"scattered":    {1, 5, 9, 100000, 100001, 1 << 20},
		"32 bits":      {1<<32 - 2, 1<<32 - 1},
		"across":       {1<<32 - 2, 1<<32 - 1, 1 << 32, 1<<32 + 1},
		"past 32 bits": {1 << 32, 7 << 40, maxPosition - 1},
	}
	for name, positions := range cases {
		t.Run(name, func(t *testing.T) {
			list := newPositionList()
			for _, p := range positions {
				list.add(p)
			}
			var e encoder
			encodePositions(&e, list, func(bool) {})
			d := &decoder{buf: e.buf}
			got := slices.Collect(decodePositions(d, maxPosition).values())
			if d.err != nil || !slices.Equal(got, positions) || len(d.buf) != 0 {
				t.Fatalf("read back %v (%v), want %v", got, d.err, positions)
			}
			if positions != nil && positions[len(positions)-1] >= 1<<32 {
				return // the first layout was written by builds of 32-bit positions
			}
			var steps encoder
			steps.uvarint(uint64(len(positions)))
			prev := uint64(0)
			for _, p := range positions {
				steps.uvarint(p - prev)
				prev = p
			}
			d = &decoder{buf: steps.buf}
			if got := slices.Collect(decodePositionSteps(d, maxPosition).values()); d.err != nil || !slices.Equal(got, positions) {
				t.Fatalf("steps read back %v (%v), want %v", got, d.err, positions)
			}
		})
	}
	// Each list of a table of 10 positions: a damaged one is refused
	// before it makes a bitmap for positions the table has not.
	for name, runs := range map[string][]uint64{
		"an empty run":      {1, 0, 0},
		"past the table":    {1, 5, 6},
		"far past it":       {1, maxPosition, 2},
		"a truncated count": {3, 1, 1},
	} {
		t.Run(name, func(t *testing.T) {
			var e encoder
			for _, v := range runs {
				e.uvarint(v)
			}
			d := &decoder{buf: e.buf}
			if list := decodePositions(d, 10); d.err == nil || list.count() > 10 {
				t.Fatalf("%v read as a list of %d", runs, list.count())
			}
		})
	}
	for name, steps := range map[string][]uint64{
		"past the table":    {1, 10},
		"a step that wraps": {2, 3, 1<<64 - 2},
		"a truncated count": {2, 1},
	} {
		t.Run("steps "+name, func(t *testing.T) {
			var e encoder
			for _, v := range steps {
				e.uvarint(v)
			}
			d := &decoder{buf: e.buf}
			if decodePositionSteps(d, 10); d.err == nil {
				t.Fatalf("%v read as a list", steps)
			}
		})
	}
}

// TestPositionKeys: a position reads back from its key form; a longer
// key sorts after every 4-byte one and in order among the longer; what
// no build writes is refused.
func TestPositionKeys(t *testing.T) {
	ordered := []uint64{0, 1, 1<<32 - 2, 1<<32 - 1, 1 << 32, 1<<40 + 3, maxPosition}
	var prev []byte
	for _, p := range ordered {
		key := appendPosition([]byte{recordPrefix}, p)
		if got, ok := positionFrom(key[1:]); !ok || got != p {
			t.Fatalf("%d reads back as %d, %v", p, got, ok)
		}
		if prev != nil && string(prev) >= string(key) {
			t.Fatalf("the key of %d (%x) does not sort after the one before (%x)", p, key, prev)
		}
		prev = key
	}
	for name, b := range map[string][]byte{
		"the mark alone":        {0xff, 0xff, 0xff, 0xff},
		"a short one made long": {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 7},
		"no mark":               {0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7},
		"past the positions":    {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"three bytes":           {0, 0, 1},
		"empty":                 nil,
	} {
		if p, ok := positionFrom(b); ok {
			t.Errorf("%s (%x) reads as position %d", name, b, p)
		}
	}
}

// openFrom opens an FSM in dir whose states put their first record at
// position first.
func openFrom(t *testing.T, dir string, first uint64) *FSM {
	t.Helper()
	f, err := Open(Config{Dir: dir, firstPosition: first})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// longRecordKeys counts the records whose key holds a long position.
func longRecordKeys(t *testing.T, f *FSM) int {
	t.Helper()
	n := 0
	f.s.eng.scan([]byte{recordPrefix}, nil, func(key, _ []byte) bool {
		if len(key) == 13 {
			n++
		}
		return true
	})
	return n
}

// TestPositionsPast32Bits: a state raised to LevelPositions whose records
// take the last 4-byte position, the mark's and positions past 32 bits
// answers every workload as a state whose positions start at 0, to the
// byte of its snapshot and of every answer; its keys hold the long
// positions; its lists page alike; each of its links is found by its
// code, from the engine and from the code cache; it keeps and resumes,
// installs on a follower as its checkpoint's files, and restores from a
// stream, alike.
func TestPositionsPast32Bits(t *testing.T) {
	const first = longPosition - 1
	for name, cmds := range keptWorkloads() {
		t.Run(name, func(t *testing.T) {
			// Only a cluster raised to the level writes long positions.
			cmds = append([][]byte{RaiseCommand{To: LevelPositions}.Encode()}, cmds...)
			dir := t.TempDir()
			f, twin := openFrom(t, dir, first), New()
			if a, b := applyAll(t, f, cmds...), applyAll(t, twin, cmds...); !reflect.DeepEqual(a, b) {
				t.Fatalf("past 32 bits the commands answer\n%v\nfrom 0\n%v", a, b)
			}
			want := snapshotBytes(t, twin)
			if !bytes.Equal(snapshotBytes(t, f), want) {
				t.Fatal("past 32 bits the state's snapshot differs from the one from 0")
			}
			if made := f.s.links.recs.n - first; made > 1 && longRecordKeys(t, f) != int(made-1) {
				t.Fatalf("%d of %d records have a long key, want all but the first", longRecordKeys(t, f), made)
			}
			checkLists(t, "past 32 bits", f)
			for _, l := range twin.Links() {
				l, _ = twin.Get(l.Qualified()) // with its options
				for range 2 {                  // the engine's answer, then the code cache's
					got, ok := f.Get(l.Qualified())
					if !ok || !reflect.DeepEqual(got, l) {
						t.Fatalf("%s past 32 bits: %+v, %v; want %+v", l.Qualified(), got, ok, l)
					}
				}
			}

			g := keepAndResumeFrom(t, f, dir, first)
			if !bytes.Equal(snapshotBytes(t, g), want) {
				t.Fatal("the resumed state's snapshot differs")
			}
			more := append(workload(), keyWorkload()...)
			if a, b := applyAll(t, g, more...), applyAll(t, twin, more...); !reflect.DeepEqual(a, b) {
				t.Errorf("resumed past 32 bits the same commands answer\n%v\nfrom 0\n%v", a, b)
			}
			want = snapshotBytes(t, twin)
			if !bytes.Equal(snapshotBytes(t, g), want) {
				t.Fatal("resumed past 32 bits the same commands leave another state")
			}
			if h := installedFrom(t, g, first); !bytes.Equal(snapshotBytes(t, h), want) {
				t.Error("the state installed from its checkpoint's files differs")
			}
			r := openFrom(t, t.TempDir(), first)
			if err := r.Restore(nopCloser{bytes.NewReader(want)}); err != nil {
				t.Fatalf("restore from a stream past 32 bits: %v", err)
			}
			if !bytes.Equal(snapshotBytes(t, r), want) || r.Len() > 1 && longRecordKeys(t, r) == 0 {
				t.Errorf("the state restored from a stream past 32 bits differs (%d long keys)", longRecordKeys(t, r))
			}
		})
	}
}

// keepAndResumeFrom keeps f's state and resumes it in a new FSM of the
// same directory whose states put their first record at position first,
// as a node's stop and start do.
func keepAndResumeFrom(t *testing.T, f *FSM, dir string, first uint64) *FSM {
	t.Helper()
	index, err := f.Keep()
	if err != nil {
		t.Fatalf("keep: %v", err)
	}
	g := openFrom(t, dir, first)
	if got, ok, err := g.Resume(func(i, _ uint64) bool { return i == index }); err != nil || !ok || got != index {
		t.Fatalf("resume: index %d (kept at %d), resumed %v: %v", got, index, ok, err)
	}
	return g
}

// installedFrom is a new FSM, its first record at position first, that
// installed f's snapshot as a follower does: its checkpoint's files.
func installedFrom(t *testing.T, f *FSM, first uint64) *FSM {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &dirSink{dir: t.TempDir()}
	err = snap.Persist(sink)
	snap.Release()
	if err != nil {
		t.Fatal(err)
	}
	files, err := OpenCheckpoint(sink.dir)
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	_, err = files.WriteTo(&stream)
	files.Close()
	if err != nil {
		t.Fatal(err)
	}
	received := t.TempDir()
	if _, _, err := ReceiveCheckpoint(&stream, received); err != nil {
		t.Fatal(err)
	}
	g := openFrom(t, t.TempDir(), first)
	if err := g.RestoreFrom(received); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestCodeCacheLongPositions: a slot holds a position up to 40 bits; a
// longer one is not kept, so that the engine answers instead of a slot
// that would name another position.
func TestCodeCacheLongPositions(t *testing.T) {
	c := newCodeCache(8)
	for _, tc := range []struct {
		h, p   uint64
		cached bool
	}{
		{0x0123456789abcdef, 1<<32 + 5, true},
		{0xfedcba9876543210, slotPositions, true},
		{0x1111111122222222, slotPositions + 1, false},
	} {
		c.put(tc.h, tc.p)
		if p, ok := c.get(tc.h); ok != tc.cached || ok && p != tc.p {
			t.Errorf("put %d under %x: got %d, %v", tc.p, tc.h, p, ok)
		}
	}
}

// FuzzPositions: a position's key form reads back only as what
// appendPosition writes for it, and a kept list of a table of n
// positions either is refused or holds positions below n only, and
// writes back as it read.
func FuzzPositions(f *testing.F) {
	f.Add([]byte{0, 0, 0, 7})
	f.Add(appendPosition(nil, 1<<32+5))
	for _, runs := range [][]uint64{{1, 3, 2}, {2, 0, 1, 1<<32 - 2, 3}, {1, 1 << 40, 1}} {
		var e encoder
		for _, v := range runs {
			e.uvarint(v)
		}
		f.Add(e.buf)
	}
	const n = 1<<32 + 1<<20 // two parts at most: each input stays cheap
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, ok := positionFrom(b); ok && !bytes.Equal(appendPosition(nil, p), b) {
			t.Fatalf("%x reads as %d, which is written %x", b, p, appendPosition(nil, p))
		}
		d := &decoder{buf: b}
		list := decodePositions(d, n)
		if d.err != nil {
			return
		}
		var e encoder
		encodePositions(&e, list, func(bool) {})
		again := decodePositions(&decoder{buf: e.buf}, n)
		runs := func(l *positionList) (out [][2]uint64) { // runs, not positions: a run may be billions
			for start, end := range l.ranges() {
				out = append(out, [2]uint64{start, end})
			}
			return out
		}
		if got, want := runs(again), runs(list); !slices.Equal(got, want) {
			t.Fatalf("a list of runs %v wrote back as %v", want, got)
		}
		for _, pt := range list.parts {
			if uint64(pt.high)<<32+uint64(pt.low.Maximum()) >= n {
				t.Fatalf("a position of part %d is past the table's %d", pt.high, n)
			}
		}
	})
}

// TestPositionOf: every id finds its link's position, or none, in a state
// whose ids grow by one a record and in one restored from it, whose live
// links are packed (ids skip the deleted ones, in runs and alone, across
// blocks of idsEvery records).
func TestPositionOf(t *testing.T) {
	f := onDisk(t)
	t.Cleanup(f.Close)
	const links = 3 * idsEvery
	loadLinks(t, f, links, imported)
	var deletes [][]byte
	for i := range links {
		if i%7 == 3 || i >= 1000 && i < 1100 || i >= idsEvery-5 && i < idsEvery+5 {
			deletes = append(deletes, DeleteCommand{Code: fmt.Sprintf("c%07d", i), Now: 9000, KeyID: RootKeyID}.Encode())
		}
	}
	applyAll(t, f, deletes...)
	for _, g := range []*FSM{f, restoredOnDisk(t, f)} {
		g.mu.RLock()
		live := map[uint64]uint64{}
		g.s.links.recs.scan(false, func(r *record) bool {
			if r.live() {
				live[r.id] = r.pos
			}
			return true
		})
		last := g.s.lastID
		for id := uint64(0); id <= last+1; id++ {
			p, ok := g.s.links.positionOf(id)
			want, isLive := live[id]
			switch {
			case isLive && (!ok || p != want):
				t.Fatalf("id %d: position %d, %v; want %d", id, p, ok, want)
			case ok && g.s.links.recs.at(p).id != id:
				t.Fatalf("id %d: found at %d, which holds link %d", id, p, g.s.links.recs.at(p).id)
			}
		}
		g.mu.RUnlock()
	}
}

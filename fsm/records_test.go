package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/hashicorp/raft"
)

// TestHashIndexMatchesAMap drives the index and a Go map with the same
// random inserts, removes and lookups. Hashes come from a tiny space so
// that collisions, long runs, wrap-around and shifting deletes are common.
func TestHashIndexMatchesAMap(t *testing.T) {
	for _, hashSpace := range []uint32{1, 7, 1000, 1 << 31} {
		t.Run(fmt.Sprint(hashSpace), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(hashSpace)))
			keys := make([]string, 2000) // position → key
			for i := range keys {
				keys[i] = fmt.Sprintf("key-%d", i)
			}
			hash := func(k string) uint32 {
				var h uint32
				for _, c := range []byte(k) {
					h = h*31 + uint32(c)
				}
				return h % hashSpace
			}
			var x hashIndex
			model := map[string]uint32{}
			for range 20000 {
				p := uint32(rng.IntN(len(keys)))
				k := keys[p]
				switch _, in := model[k]; {
				case rng.IntN(3) == 0 && in:
					x.remove(hash(k), p)
					delete(model, k)
				case !in:
					x.insert(hash(k), p)
					model[k] = p
				}
				probe := keys[rng.IntN(len(keys))]
				got, ok := x.lookup(hash(probe), func(p uint32) bool { return keys[p] == probe })
				if want, in := model[probe]; ok != in || got != want {
					t.Fatalf("lookup %s = %d, %v; want %d, %v", probe, got, ok, want, in)
				}
			}
			if x.len() != len(model) {
				t.Fatalf("len %d, want %d", x.len(), len(model))
			}
			for k, want := range model {
				if got, ok := x.lookup(hash(k), func(p uint32) bool { return keys[p] == k }); !ok || got != want {
					t.Fatalf("final lookup %s = %d, %v; want %d", k, got, ok, want)
				}
			}
		})
	}
}

// applyFrom feeds commands as log entries numbered from first.
func applyFrom(f *FSM, first uint64, cmds ...[]byte) {
	logs := make([]*raft.Log, len(cmds))
	for i, c := range cmds {
		logs[i] = &raft.Log{Index: first + uint64(i), Type: raft.LogCommand, Data: c}
	}
	f.ApplyBatch(logs)
}

// changesAfter touches every kind of record change: clicks on every link,
// deletes, expiry purges and enough new links to fill new pages.
func changesAfter(links []Link) [][]byte {
	var counts []ClickCount
	for _, l := range links {
		counts = append(counts, ClickCount{Code: l.Code, Count: 5})
	}
	cmds := [][]byte{
		ClickBatch{Node: "later", Seq: 1, Now: 9000, Counts: counts}.Encode(),
		DeleteCommand{Code: links[0].Code}.Encode(),
		DeleteCommand{Code: links[len(links)-1].Code}.Encode(),
		PurgeCommand{ExpiredBefore: 1 << 40}.Encode(),
	}
	for i := range 3 * pageSize {
		cmds = append(cmds, create(9100, CreateRequest{URL: fmt.Sprintf("https://example.com/later/%d", i), Dedupe: i%2 == 0}))
	}
	return cmds
}

// writeAndRelease encodes a snapshot taken earlier and releases it.
func writeAndRelease(t *testing.T, snap raft.FSMSnapshot) []byte {
	t.Helper()
	defer snap.Release()
	var buf bytes.Buffer
	if err := snap.(*snapshot).writeTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSnapshotIsAPointInTime takes a snapshot, changes every link before
// writing it, and checks that it still holds exactly the state it was
// taken from, while the live state holds every change.
func TestSnapshotIsAPointInTime(t *testing.T) {
	before := New()
	applyAll(t, before, workload()...)
	want := snapshotBytes(t, before)

	live := New()
	applyAll(t, live, workload()...)
	links := live.Links()
	got, _ := live.Get(links[1].Code)

	snap, err := live.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	later := changesAfter(links)
	applyFrom(live, 1000, later...)
	if !bytes.Equal(writeAndRelease(t, snap), want) {
		t.Fatal("the snapshot changed after it was taken")
	}
	if again, _ := before.Get(links[1].Code); got != again {
		t.Fatalf("a link read before the changes changed: %+v, want %+v", got, again)
	}

	replayed := New()
	applyAll(t, replayed, workload()...)
	applyFrom(replayed, 1000, later...)
	if !bytes.Equal(snapshotBytes(t, live), snapshotBytes(t, replayed)) {
		t.Fatal("the live state after the snapshot differs from a replay of the same entries")
	}
	if l, ok := live.Get(links[1].Code); !ok || l.Clicks != links[1].Clicks+5 {
		t.Fatalf("clicks after the snapshot: %+v", l)
	}
}

// TestSnapshotStreamsInPieces restores from readers that hand out one byte
// or half a buffer at a time, so values straddle every block boundary, and
// from one that fails midway.
func TestSnapshotStreamsInPieces(t *testing.T) {
	src := New()
	applyAll(t, src, workload()...)
	data := snapshotBytes(t, src)
	for name, r := range map[string]io.Reader{
		"one byte": iotest.OneByteReader(bytes.NewReader(data)),
		"halves":   iotest.HalfReader(bytes.NewReader(data)),
	} {
		snap, err := ReadSnapshot(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		dst := New()
		dst.s = snap.s
		if !bytes.Equal(snapshotBytes(t, dst), data) {
			t.Fatalf("%s: restored a different state", name)
		}
	}
	failing := io.MultiReader(bytes.NewReader(data[:len(data)/2]), iotest.ErrReader(errors.New("disk gone")))
	if _, err := ReadSnapshot(failing); !errors.Is(err, ErrCorruptSnapshot) || !strings.Contains(err.Error(), "disk gone") {
		t.Fatalf("failing reader: %v", err)
	}
}

// TestRequestWindowPurges fills and purges the idempotency window on disk:
// a purge drops the records before its time from the front. Dropping a
// record that a later record of its id replaced forgets the id before
// LevelRequests, and keeps the later record from it on.
func TestRequestWindowPurges(t *testing.T) {
	for _, latestOnly := range []bool{false, true} {
		f := New()
		defer f.Close()
		w := &f.s.requests
		for i := range 20 {
			w.add(requestRecord{id: fmt.Sprint("req-", i), code: fmt.Sprint("c", i), at: int64(i)})
		}
		w.dropBefore(8, latestOnly)
		for i := range 20 {
			rec, ok := w.get(fmt.Sprint("req-", i))
			if want := i >= 8; ok != want || (ok && rec.code != fmt.Sprint("c", i)) {
				t.Fatalf("req-%d: %+v, %v; want present %v", i, rec, ok, want)
			}
		}
		w.add(requestRecord{id: "req-9", code: "again", at: 30})
		if rec, _ := w.get("req-9"); rec.code != "again" {
			t.Fatalf("req-9 after a second record: %+v", rec)
		}
		w.dropBefore(10, latestOnly)
		if rec, ok := w.get("req-9"); ok != latestOnly || (ok && rec.code != "again") {
			t.Fatalf("latest only %v: req-9 after its first record was purged: %+v, %v", latestOnly, rec, ok)
		}
		if rec, ok := w.get("req-10"); !ok || rec.code != "c10" {
			t.Fatalf("req-10: %+v, %v", rec, ok)
		}
		if at, ok := w.oldest(); !ok || at != 10 || w.len() != 11 {
			t.Fatalf("oldest %d, %v, %d records; want 10, true, 11", at, ok, w.len())
		}
		w.dropBefore(31, latestOnly)
		if _, ok := w.oldest(); ok || w.len() != 0 {
			t.Fatalf("a purge of everything left %d records", w.len())
		}
	}
}

// withMaxRecords is an empty FSM in memory whose states hold positions
// for at most n links.
func withMaxRecords(t *testing.T, n uint64) *FSM {
	t.Helper()
	f, err := Open(Config{maxRecords: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	return f
}

// TestStateFullRefusesCreates: once the cluster has given as many link
// ids as a state has record positions, a create is refused whatever its
// code (the next position would wrap to 0 and overwrite the first link),
// on every node alike and changing nothing, while what needs no new
// position still works; a delete frees none. A node whose state was
// rebuilt from a stream, its live links packed into fewer positions,
// refuses alike. A snapshot holding more links than a state's positions
// is refused and the state kept.
func TestStateFullRefusesCreates(t *testing.T) {
	const deduped = "https://example.com/dedupe"
	f := withMaxRecords(t, 3)
	applyAll(t, f, setHook(hookA, "https://hooks.example/a", allEvents()))
	first := mustCreate(t, f, 10, CreateRequest{URL: "https://example.com/a"})
	gone := mustCreate(t, f, 11, CreateRequest{URL: "https://example.com/b", CustomCode: "gone"})
	kept := mustCreate(t, f, 12, CreateRequest{URL: deduped, Dedupe: true})
	applyAll(t, f, DeleteCommand{Code: gone.Code, Now: 13}.Encode())
	// A follower that installed the state as a stream: two positions used.
	packed := withMaxRecords(t, 3)
	if err := packed.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, f))}); err != nil {
		t.Fatal(err)
	}
	if n := packed.s.links.recs.n; n != 2 {
		t.Fatalf("the installed state holds %d positions, want its 2 live links packed", n)
	}

	refused := []struct {
		name string
		r    CreateRequest
	}{
		{"a counter code", CreateRequest{URL: "https://example.com/c"}},
		{"a custom code", CreateRequest{URL: "https://example.com/c", CustomCode: "mine"}},
		{"a hash code", CreateRequest{URL: "https://example.com/c", Strategy: StrategyHash}},
		{"a dedupe create of a new URL", CreateRequest{URL: "https://example.com/c", Dedupe: true}},
		{"an import", CreateRequest{URL: "https://example.com/c", CustomCode: "old", CreatedAt: 5}},
		// What a create records besides its link: its request id, an
		// audit entry for its key, a webhook event.
		{"a keyed create with a request id", CreateRequest{URL: "https://example.com/c", RequestID: "req-full", KeyID: RootKeyID}},
	}
	for _, node := range []struct {
		name string
		f    *FSM
	}{{"the node that made them", f}, {"a node that installed them", packed}} {
		before := snapshotBytes(t, node.f)
		for _, tc := range refused {
			if res := createOne(t, node.f, 20, tc.r); !errors.Is(res.Err, ErrStateFull) {
				t.Errorf("%s: %s when full: %+v, want ErrStateFull", node.name, tc.name, res)
			}
		}
		if !bytes.Equal(snapshotBytes(t, node.f), before) {
			t.Errorf("%s: refused creates changed the state", node.name)
		}
		if got := mustCreate(t, node.f, 21, CreateRequest{URL: deduped, Dedupe: true}); got.ID != kept.ID {
			t.Errorf("%s: a dedupe create of a link's URL when full made or found %+v, want link %d", node.name, got, kept.ID)
		}
		if used, limit := node.f.LinkIDs(); used != 3 || limit != 3 {
			t.Errorf("%s: link ids %d used of %d, want 3 of 3", node.name, used, limit)
		}
		if l, ok := node.f.Get(first.Code); !ok || l.URL != first.URL {
			t.Errorf("%s: the first link after the refusals: %+v, %v", node.name, l, ok)
		}
	}

	small := withMaxRecords(t, 1)
	before := snapshotBytes(t, small)
	err := small.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, f))})
	if !errors.Is(err, ErrStateFull) {
		t.Fatalf("restore of 2 links into 1 position: %v, want ErrStateFull", err)
	}
	if !bytes.Equal(snapshotBytes(t, small), before) {
		t.Error("a refused restore changed the state")
	}

	// Raised to LevelPositions, a cluster creates past the 4-byte positions.
	applyAll(t, f, RaiseCommand{To: LevelPositions}.Encode())
	for i, tc := range refused {
		tc.r.URL = fmt.Sprintf("https://example.com/raised/%d", i) // no dedupe finds another
		if res := createOne(t, f, 30, tc.r); res.Err != nil || res.Existing {
			t.Errorf("raised: %s: %+v", tc.name, res)
		}
	}
	if used, limit := f.LinkIDs(); used != 3+uint64(len(refused)) || limit != maxPosition {
		t.Errorf("raised: link ids %d used of %d", used, limit)
	}
	if l, ok := f.Get(first.Code); !ok || l.URL != first.URL {
		t.Errorf("raised: the first link after the creates: %+v, %v", l, ok)
	}
}

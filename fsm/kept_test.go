package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm/codes"
)

// keptWorkloads are the states a kept state must bring back whole: every
// workload of the package's tests, each on an engine in a directory.
func keptWorkloads() map[string][][]byte {
	return map[string][][]byte{
		"workload": workload(), "keys": keyWorkload(), "options": optionsWorkload(),
		"targets": targetsWorkload(), "records": recordWorkload(), "renames": renameWorkload(),
		"webhooks": webhookWorkload(), "expiries": expiryWorkload(),
	}
}

// keepAndResume keeps f's state and resumes it in a new FSM of the same
// directory, as a node's stop and start do.
func keepAndResume(t *testing.T, f *FSM, dir string) *FSM {
	t.Helper()
	return keepAndResumeFrom(t, f, dir, 0)
}

// TestKeptStateResumes: a state kept at a stop and resumed at the next
// start is the state it was, to the byte, with every count and index it
// derives from its links as a restore derives them, and it goes on
// applying as a state that never stopped.
func TestKeptStateResumes(t *testing.T) {
	for name, cmds := range keptWorkloads() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			f := openIn(t, dir)
			twin := New()
			applyAll(t, f, cmds...)
			applyAll(t, twin, cmds...)
			want := snapshotBytes(t, f)

			g := keepAndResume(t, f, dir)
			if !bytes.Equal(snapshotBytes(t, g), want) {
				t.Fatal("the resumed state's snapshot differs from the kept one's")
			}
			checkLists(t, "resumed", g)
			if got, want := derivedOf(g.s), derivedOf(restoredOnDisk(t, g).s); !reflect.DeepEqual(got, want) {
				t.Errorf("resumed state derives\n%+v\na restore derives\n%+v", got, want)
			}
			more := append(workload(), keyWorkload()...)
			if a, b := applyAll(t, g, more...), applyAll(t, twin, more...); !reflect.DeepEqual(a, b) {
				t.Errorf("after the resume the same commands answer\n%v\nand without a stop\n%v", a, b)
			}
			if !bytes.Equal(snapshotBytes(t, g), snapshotBytes(t, twin)) {
				t.Error("after the resume the same commands leave another state than without a stop")
			}
		})
	}
}

// TestKeptOwnKeysResume: the mark of a key limited to its own links is
// kept, and so is every link's author.
func TestKeptOwnKeysResume(t *testing.T) {
	authored, _ := authoredState(t, LevelTargets, true)
	dir := t.TempDir()
	f, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, authored))}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Keep(); err == nil {
		t.Fatal("a state restored and not applied to since was kept: its log position is not known")
	}
	f, err = Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := f.Resume(func(uint64, uint64) bool { return true }); ok {
		t.Fatal("resumed a state that was not kept")
	}
	if err := f.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, authored))}); err != nil {
		t.Fatal(err)
	}
	f.ApplyBatch([]*raft.Log{{Index: 7, Term: 2, Type: raft.LogCommand,
		Data: create(300, CreateRequest{URL: "https://example.com/c", CustomCode: "byaagain", KeyID: authorA})}})
	want := snapshotBytes(t, f)
	g := keepAndResume(t, f, dir)
	if !bytes.Equal(snapshotBytes(t, g), want) {
		t.Fatal("the resumed state's snapshot differs from the kept one's")
	}
	if !g.s.keys[authorA].OwnLinksOnly {
		t.Error("the key limited to its own links lost the mark")
	}
}

// TestResumedStateSkipsWhatItHas: Raft hands a resumed state the entries
// since its latest snapshot again; those up to the kept index change
// nothing, the rest apply, and no snapshot is taken while the state is
// ahead of what Raft handed over (Raft would label it with the lower
// index, and a restore of it would apply the entries between twice).
func TestResumedStateSkipsWhatItHas(t *testing.T) {
	dir := t.TempDir()
	f := openIn(t, dir)
	cmds := workload()
	logs := make([]*raft.Log, len(cmds))
	for i, c := range cmds {
		logs[i] = &raft.Log{Index: uint64(i + 1), Term: 3, Type: raft.LogCommand, Data: c}
	}
	f.ApplyBatch(logs)
	want := snapshotBytes(t, f)
	g := keepAndResume(t, f, dir)
	half := len(logs) / 2
	if res := g.ApplyBatch(logs[:half]); slices.ContainsFunc(res, func(r any) bool { return r != nil }) {
		t.Errorf("entries the state had answered %v", res)
	}
	if _, err := g.Snapshot(); err == nil {
		t.Error("a snapshot was taken while Raft had handed over less than the state holds")
	}
	g.ApplyBatch(logs[half:])
	if !bytes.Equal(snapshotBytes(t, g), want) {
		t.Error("entries the kept state had changed it when handed over again")
	}
	extra := &raft.Log{Index: uint64(len(logs) + 1), Term: 4, Type: raft.LogCommand,
		Data: create(9000, CreateRequest{URL: "https://example.com/after", CustomCode: "after"})}
	if res := g.ApplyBatch([]*raft.Log{extra}); res[0].([]CreateResult)[0].Err != nil {
		t.Fatalf("the entry after the kept ones: %v", res[0])
	}
	if _, ok := g.Get("after"); !ok {
		t.Error("the entry after the kept ones was not applied")
	}
	snap, err := g.Snapshot()
	if err != nil {
		t.Fatalf("snapshot once the log caught up: %v", err)
	}
	snap.Release()
}

// TestKeptStateRefused: a kept state the node's log does not hold (accept
// says no) or whose file is damaged is removed, and the FSM starts empty:
// the node rebuilds from Raft's snapshot and log.
func TestKeptStateRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(dir string)
		accept bool
	}{
		{"not in the log", func(string) {}, false},
		{"damaged", func(dir string) {
			path := filepath.Join(dir, keptDir, keptFile)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x40
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"engine gone", func(dir string) {
			entries, _ := os.ReadDir(filepath.Join(dir, keptDir))
			for _, e := range entries {
				if e.Name() != keptFile {
					os.RemoveAll(filepath.Join(dir, keptDir, e.Name()))
				}
			}
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			f := openIn(t, dir)
			applyAll(t, f, workload()...)
			if _, err := f.Keep(); err != nil {
				t.Fatal(err)
			}
			c.damage(dir)
			g := openIn(t, dir)
			defer g.Close()
			if _, ok, _ := g.Resume(func(uint64, uint64) bool { return c.accept }); ok {
				t.Fatal("resumed")
			}
			if g.Len() != 0 {
				t.Errorf("an FSM that did not resume holds %d links", g.Len())
			}
			if _, err := os.Stat(filepath.Join(dir, keptDir)); !os.IsNotExist(err) {
				t.Errorf("the refused state is still kept: %v", err)
			}
		})
	}
}

// derived is what a state holds in memory about its links, by name and
// link id: a restore numbers records and request records afresh (a
// removed link leaves no hole), which no reader sees.
type derived struct {
	Live, Tombstones, Options int
	Visited                   int
	Newest                    uint32
	Workspaces, Authors       map[string][]uint64
	Domains                   map[string]int
	Requests, Indexed         int
	OldestAt                  int64
	Expiring                  map[uint64]int64
}

func derivedOf(s *state) derived {
	s.requests.settle() // the request index as Apply finds it, once a resume's fill is over
	lt := &s.links
	d := derived{Live: lt.codes.live, Tombstones: s.tombstones.n, Options: s.opts.n, Visited: s.visits.links,
		Newest: lt.hours.newest, Workspaces: map[string][]uint64{}, Authors: map[string][]uint64{},
		Domains: map[string]int{}, Requests: s.requests.len(), Indexed: s.requests.index.used,
		OldestAt: s.requests.oldestAt, Expiring: expiriesOf(s)}
	ids := func(list *positionList) []uint64 {
		var out []uint64
		for p := range list.values() {
			out = append(out, lt.recs.at(p).id)
		}
		return out
	}
	for i, name := range lt.workspaces.names {
		if lt.workspaces.links[i].count() != 0 {
			d.Workspaces[name] = ids(lt.workspaces.links[i])
		}
	}
	for i, id := range lt.authors.ids {
		if lt.authors.links[i].count() != 0 {
			d.Authors[id] = ids(lt.authors.links[i])
		}
	}
	for name, n := range lt.domainLinks {
		if n != 0 {
			d.Domains[name] = n
		}
	}
	return d
}

// TestResumedFilterFills: a resumed state's code filter is filled after
// the start, off its lock; until then it lets every lookup through to the
// engine, so every link redirects and an unknown code is a miss
// throughout, codes created meanwhile included; once filled it answers
// "absent" for most codes never taken, without the engine.
func TestResumedFilterFills(t *testing.T) {
	dir := t.TempDir()
	f := openIn(t, dir)
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	items := make([]CreateRequest, 2000)
	for i := range items {
		items[i] = CreateRequest{URL: benchURL(i), CustomCode: fmt.Sprintf("k%d", i), Workspace: "default"}
	}
	applyAll(t, f, CreateBatch{Now: 1e12, Items: items}.Encode())
	g := keepAndResume(t, f, dir)
	applyAll(t, g, CreateBatch{Now: 1e12, Items: []CreateRequest{{URL: benchURL(9999), CustomCode: "during", Workspace: "default"}}}.Encode())
	for _, code := range []string{"k0", "k1999", "during"} {
		if _, ok := g.Lookup([]byte(code)); !ok {
			t.Errorf("%s is not found while the filter fills", code)
		}
	}
	waitFilterFilled(t, g)
	g.mu.RLock()
	defer g.mu.RUnlock()
	x := &g.s.links.codes
	for _, code := range []string{"k0", "k777", "k1999", "during"} {
		if !x.filter.mayHold(x.hash(code)) {
			t.Errorf("the filled filter says %s was never taken", code)
		}
	}
	held := 0
	for i := range 1000 {
		if x.filter.mayHold(x.hash(fmt.Sprintf("absent%d", i))) {
			held++
		}
	}
	if held > 100 {
		t.Errorf("the filled filter may hold %d of 1000 codes never taken", held)
	}
}

// waitFilterFilled waits (10 s at most) until g's code filter is no
// longer partial.
func waitFilterFilled(t *testing.T, g *FSM) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for filled := false; !filled; {
		g.mu.RLock()
		filled = !g.s.links.codes.filter.partial
		g.mu.RUnlock()
		if !filled && time.Now().After(deadline) {
			t.Fatal("the filter of the resumed state is still partial after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCounterSkipsTombstonesAfterARebuild: the code filter a restore or a
// resume builds holds the tombstoned codes as well as the live ones, so
// the counter, which asks the filter before it reads a tombstone, still
// skips a deleted code it would draw next.
func TestCounterSkipsTombstonesAfterARebuild(t *testing.T) {
	next, _ := codes.CounterCode(testKey, 0, 7)
	after, _ := codes.CounterCode(testKey, 1, 7)
	for name, rebuild := range map[string]func(t *testing.T, f *FSM, dir string) *FSM{
		"restored from a backup": func(t *testing.T, f *FSM, _ string) *FSM {
			var backup bytes.Buffer
			if err := f.WriteBackup(&backup); err != nil {
				t.Fatal(err)
			}
			g, err := Open(Config{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close)
			if err := g.Restore(io.NopCloser(&backup)); err != nil {
				t.Fatal(err)
			}
			return g
		},
		"resumed, its filter filled": func(t *testing.T, f *FSM, dir string) *FSM {
			g := keepAndResume(t, f, dir)
			waitFilterFilled(t, g)
			return g
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			f := openIn(t, dir)
			defer f.Close()
			applyAll(t, f, InitCommand{Key: testKey}.Encode(), create(1, CreateRequest{URL: "https://example.com/a", CustomCode: next}))
			deleteAll(t, f, []string{next})
			g := rebuild(t, f, dir)
			if r := createOne(t, g, 2, CreateRequest{URL: "https://example.com/b"}); r.Err != nil || r.Link.Code != after {
				t.Fatalf("counter create = %q, %v; want %q (%q is deleted)", r.Link.Code, r.Err, after, next)
			}
		})
	}
}

// TestResumedRequestsAnswerResends: a resumed state's request index is
// built after the start, while readers are served; a create resent with
// its request id right after the start still gets its first link, the
// window's oldest record and newest alike, and a reused id for another
// URL is still refused.
func TestResumedRequestsAnswerResends(t *testing.T) {
	const n = 20_000
	dir := t.TempDir()
	f := openIn(t, dir)
	cmds := [][]byte{InitCommand{Key: testKey}.Encode()}
	req := func(i int) CreateRequest {
		return CreateRequest{URL: fmt.Sprintf("https://example.com/%d", i), RequestID: fmt.Sprintf("req-%d", i)}
	}
	for i := 0; i < n; i += 500 {
		items := make([]CreateRequest, 0, 500)
		for j := i; j < i+500; j++ {
			items = append(items, req(j))
		}
		cmds = append(cmds, create(int64(1000+i), items...))
	}
	results := applyAll(t, f, cmds...)
	first, last := results[1].([]CreateResult)[0].Link, results[len(results)-1].([]CreateResult)[499].Link

	g := keepAndResume(t, f, dir)
	again := applyAll(t, g, create(50_000, req(0), req(n-1)))[0].([]CreateResult)
	if again[0].Link != first || again[1].Link != last || g.Len() != n {
		t.Fatalf("resends after the start answered %+v and %+v (%d links), want %+v and %+v (%d links)",
			again[0].Link, again[1].Link, g.Len(), first, last, n)
	}
	other := req(7)
	other.URL = "https://example.com/another"
	if r := createOne(t, g, 50_001, other); !errors.Is(r.Err, ErrRequestIDReused) {
		t.Fatalf("a request id reused for another URL after the start: %v, want ErrRequestIDReused", r.Err)
	}
}

// TestRequestIndexIsBuiltWhenTheFillFails: a state whose index fill did
// not finish (no view of the engine, a failed read) builds the index in
// Apply, from the engine, as the fill would have.
func TestRequestIndexIsBuiltWhenTheFillFails(t *testing.T) {
	f := onDisk(t)
	defer f.Close()
	applyAll(t, f, workload()...)
	w := &f.s.requests
	want := map[string]uint64{}
	for i := range 40 { // workload's request ids
		id := fmt.Sprintf("req-%d", i)
		if seq, _, ok := w.find(id); ok {
			want[id] = seq
		}
	}
	entries := w.index.used
	w.index = hashIndex{}
	w.fill = &requestFill{done: make(chan struct{})}
	close(w.fill.done)
	applyAll(t, f, PurgeCommand{}.Encode()) // an entry Apply handles: it settles the window first
	if w.fill != nil || w.index.used != entries || len(want) != entries {
		t.Fatalf("the index built in Apply holds %d entries, the one built by creates %d (%d ids)", w.index.used, entries, len(want))
	}
	for id, seq := range want {
		if got, _, ok := w.find(id); !ok || got != seq {
			t.Errorf("%s: record %d (%v) in the index built in Apply, %d in the one built by creates", id, got, ok, seq)
		}
	}
}

// BenchmarkResumeWithRequests reports a start's resume of a kept state
// whose idempotency window holds a million records (ten minutes of
// creates at ~1700 a second): until it serves reads (ns/op), and until
// Apply takes the next entry, the window's index built (ms-to-apply).
func BenchmarkResumeWithRequests(b *testing.B) {
	const records, batch = 1_000_000, 1000
	dir := b.TempDir()
	f, err := Open(Config{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	applyAll(b, f, InitCommand{Key: testKey}.Encode())
	for i := 0; i < records; i += batch {
		items := make([]CreateRequest, 0, batch)
		for j := i; j < i+batch; j++ {
			items = append(items, CreateRequest{URL: fmt.Sprintf("https://example.com/%d", j), RequestID: fmt.Sprintf("%032x", j)})
		}
		applyAll(b, f, create(int64(1000+i), items...))
	}
	var toApply time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		index, err := f.Keep()
		if err != nil {
			b.Fatal(err)
		}
		if f, err = Open(Config{Dir: dir}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if _, ok, err := f.Resume(func(i, _ uint64) bool { return i == index }); !ok || err != nil {
			b.Fatalf("resume: %v", err)
		}
		b.StopTimer()
		f.ApplyBatch([]*raft.Log{{Index: index + 1, Type: raft.LogNoop}})
		toApply += time.Since(start)
		b.StartTimer()
	}
	b.StopTimer()
	f.Close()
	b.ReportMetric(float64(toApply.Milliseconds())/float64(b.N), "ms-to-apply")
}

// TestResentCreatesAfterARebuild: a create resent after its link was
// deleted makes a link and records its request id again. A node that
// rebuilt its request index from the records (a restart) answers a later
// resend as a node that kept its index does: with the newer link, before
// and after a purge drops the first record (from LevelRequests on).
func TestResentCreatesAfterARebuild(t *testing.T) {
	dir := t.TempDir()
	f := openIn(t, dir)
	live := New()
	defer live.Close()
	both := func(cmds ...[]byte) {
		applyAll(t, f, cmds...)
		applyAll(t, live, cmds...)
	}
	req := CreateRequest{URL: "https://example.com/again", RequestID: "r-1"}
	both(InitCommand{Key: testKey}.Encode(), RaiseCommand{To: EntryLevel}.Encode())
	first := createOne(t, f, 1, req)
	createOne(t, live, 1, req)
	both(DeleteCommand{Code: first.Link.Code, Now: 2}.Encode())
	second := createOne(t, f, 3, req)
	createOne(t, live, 3, req)
	if second.Link.Code == first.Link.Code {
		t.Fatalf("a resend after the link was deleted answered the deleted link %s", first.Link.Code)
	}
	for i, purge := range []bool{false, true} {
		if purge {
			both(PurgeCommand{RequestsBefore: 2}.Encode()) // the first record only
		}
		f = keepAndResume(t, f, dir)
		now := int64(10 + i)
		got, want := createOne(t, f, now, req), createOne(t, live, now, req)
		if got.Link.Code != second.Link.Code || want.Link.Code != second.Link.Code || f.Len() != live.Len() {
			t.Fatalf("purged %v: a resend answered %s after a restart and %s on a node that kept its index; want %s",
				purge, got.Link.Code, want.Link.Code, second.Link.Code)
		}
	}
}

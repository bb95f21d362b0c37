package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// deleteAll applies a delete of each code.
func deleteAll(t testing.TB, f *FSM, codes []string) {
	t.Helper()
	cmds := make([][]byte, len(codes))
	for i, c := range codes {
		cmds[i] = DeleteCommand{Code: c, Now: 1}.Encode()
	}
	for i, res := range applyAll(t, f, cmds...) {
		if err, _ := res.(error); err != nil {
			t.Fatalf("delete %s: %v", codes[i], err)
		}
	}
}

// tombstonesOf is every tombstoned code in f's engine, in order.
func tombstonesOf(t *testing.T, f *FSM) []string {
	t.Helper()
	var out []string
	if err := scanTombstones(f.s.eng.st.Scan, func(code []byte) bool {
		out = append(out, string(code))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTombstonesAreOnDisk: a deleted or renamed-away code is a key in the
// engine, never handed out again, and travels in snapshots and restores:
// a follower that installs the snapshot refuses the code too.
func TestTombstonesAreOnDisk(t *testing.T) {
	f, err := Open(Config{Dir: filepath.Join(t.TempDir(), "engine")})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(),
		create(1, CreateRequest{URL: "https://example.com/a", CustomCode: "gone1"},
			CreateRequest{URL: "https://example.com/b", CustomCode: "gone2"},
			CreateRequest{URL: "https://example.com/c", CustomCode: "kept1"}))
	deleteAll(t, f, []string{"gone2", "gone1"})
	if got, want := tombstonesOf(t, f), []string{"gone1", "gone2"}; !slices.Equal(got, want) {
		t.Fatalf("engine holds %v, want %v", got, want)
	}

	var snap bytes.Buffer
	if err := f.WriteBackup(&snap); err != nil {
		t.Fatal(err)
	}
	follower, err := Open(Config{Dir: filepath.Join(t.TempDir(), "engine")})
	if err != nil {
		t.Fatal(err)
	}
	defer follower.Close()
	if err := follower.Restore(nopCloser{bytes.NewReader(snap.Bytes())}); err != nil {
		t.Fatal(err)
	}
	for _, node := range []*FSM{f, follower} {
		res := applyAll(t, node, create(2, CreateRequest{URL: "https://example.com/again", CustomCode: "gone1"}))
		if got := res[0].([]CreateResult)[0].Err; !errors.Is(got, ErrCodeDeleted) {
			t.Errorf("create of a deleted code: %v, want ErrCodeDeleted", got)
		}
	}
	if got := tombstonesOf(t, follower); !slices.Equal(got, []string{"gone1", "gone2"}) {
		t.Errorf("restored engine holds %v", got)
	}
	var again bytes.Buffer
	if err := follower.WriteBackup(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap.Bytes(), again.Bytes()) {
		t.Error("the restored state's snapshot differs from the one it was restored from")
	}
}

// TestRestoreReplacesTheEngine: a restore builds the new state in an
// engine of its own and removes the old one's directory, but not while
// a snapshot taken before still reads it: that snapshot writes the state
// it was taken of.
func TestRestoreReplacesTheEngine(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "engine")
	if err := os.MkdirAll(filepath.Join(dir, "leftover"), 0o700); err != nil {
		t.Fatal(err)
	}
	f := openIn(t, dir)
	defer f.Close()
	if _, err := os.Stat(filepath.Join(dir, "leftover")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open kept what the directory held: %v", err)
	}
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), create(1, CreateRequest{URL: "https://example.com/a", CustomCode: "before"}))
	deleteAll(t, f, []string{"before"})
	old, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}

	other := New()
	defer other.Close()
	applyAll(t, other, InitCommand{Key: testKey}.Encode(), create(1, CreateRequest{URL: "https://example.com/b", CustomCode: "after"}))
	deleteAll(t, other, []string{"after"})
	var next bytes.Buffer
	if err := other.WriteBackup(&next); err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(nopCloser{bytes.NewReader(next.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if got := tombstonesOf(t, f); !slices.Equal(got, []string{"after"}) {
		t.Errorf("after the restore the engine holds %v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "0")); err != nil {
		t.Fatalf("the replaced engine is gone while a snapshot reads it: %v", err)
	}

	var sink bytes.Buffer
	if err := old.(*snapshot).writeTo(&sink); err != nil {
		t.Fatalf("the snapshot taken before the restore: %v", err)
	}
	old.Release()
	written, err := ReadSnapshot(&sink)
	if err != nil {
		t.Fatal(err)
	}
	defer written.Close()
	if !written.s.tombstones.has("before") || written.s.tombstones.has("after") {
		t.Error("the snapshot taken before the restore does not hold the state it was taken of")
	}
	if _, err := os.Stat(filepath.Join(dir, "0")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the replaced engine outlived its last snapshot: %v", err)
	}
}

// TestEngineBatchIsTheApplyBatch: the entries of one apply batch commit to
// the engine together, under the index of the last, and a later entry of
// the batch sees what an earlier one wrote (a code deleted, then taken
// again in the same batch, is refused).
func TestEngineBatchIsTheApplyBatch(t *testing.T) {
	f := New()
	defer f.Close()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), create(1, CreateRequest{URL: "https://example.com/a", CustomCode: "once1"}))
	res := f.ApplyBatch([]*raft.Log{
		{Index: 10, Type: raft.LogCommand, Data: DeleteCommand{Code: "once1", Now: 2}.Encode()},
		{Index: 11, Type: raft.LogCommand, Data: create(3, CreateRequest{URL: "https://example.com/b", CustomCode: "once1"})},
	})
	if got := res[1].([]CreateResult)[0].Err; !errors.Is(got, ErrCodeDeleted) {
		t.Errorf("a code deleted earlier in the batch: %v, want ErrCodeDeleted", got)
	}
	if got := f.s.eng.st.AppliedIndex(); got != 11 {
		t.Errorf("engine applied index %d, want 11", got)
	}
}

// BenchmarkMemoryPerTombstone reports the Go heap a deleted code costs
// once the state is rebuilt from a snapshot (as every node's is at its
// start), and what a delete costs to apply.
func BenchmarkMemoryPerTombstone(b *testing.B) {
	const n = 200_000
	src := onDisk(b)
	defer src.Close()
	loadLinks(b, src, n, imported)
	codes := make([]string, n)
	for i := range codes {
		codes[i] = fmt.Sprintf("c%07d", i)
	}
	deleteAll(b, src, codes)
	var buf bytes.Buffer
	if err := src.WriteBackup(&buf); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		before := heapInUse()
		f := onDisk(b)
		if err := f.Restore(nopCloser{bytes.NewReader(buf.Bytes())}); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(heapInUse()-before)/n, "heap-B/tombstone")
		runtime.KeepAlive(f)
		f.Close()
	}
}

// BenchmarkApplyDeletes is the cost of applying one delete, in batches of
// 1000 as a busy leader commits them.
func BenchmarkApplyDeletes(b *testing.B) {
	f := onDisk(b)
	defer f.Close()
	loadLinks(b, f, b.N, imported)
	b.ResetTimer()
	for start := 0; start < b.N; start += 1000 {
		cmds := make([][]byte, 0, 1000)
		for i := start; i < min(start+1000, b.N); i++ {
			cmds = append(cmds, DeleteCommand{Code: fmt.Sprintf("c%07d", i), Now: 1}.Encode())
		}
		applyAll(b, f, cmds...)
	}
}

// TestOptionsAreOnDisk: a link's Options live in the engine under its id;
// with a cache of two slots most reads miss it and read the engine, and
// every read, edit, removal and restore still sees the Options the log
// gave the link; a redirect of a link whose Options are cached allocates
// nothing.
func TestOptionsAreOnDisk(t *testing.T) {
	f, err := Open(Config{Dir: filepath.Join(t.TempDir(), "engine"), OptionCache: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	const n = 40
	for i := range n {
		opts := &Options{Title: fmt.Sprintf("title %d", i), Tags: []string{fmt.Sprintf("t%d", i%3)}, MaxVisits: uint64(i + 1)}
		if r := createOne(t, f, 1, CreateRequest{URL: fmt.Sprintf("https://example.com/%d", i), CustomCode: fmt.Sprintf("code%02d", i), Options: opts}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	createOne(t, f, 1, CreateRequest{URL: "https://example.com/plain", CustomCode: "plain1"})
	applyAll(t, f,
		EditCommand{Code: "code07", Now: 2, Fields: EditTitle, Title: "edited"}.Encode(),
		EditCommand{Code: "code08", Now: 2, Fields: EditTitle | EditTags | EditMaxVisits}.Encode(), // nothing left: no Options
		DeleteCommand{Code: "code09", Now: 3}.Encode())
	want := func(i int) string {
		switch i {
		case 7:
			return "edited"
		case 8, 9:
			return ""
		}
		return fmt.Sprintf("title %d", i)
	}
	check := func(f *FSM, when string) {
		t.Helper()
		for i := range n {
			l, ok := f.Get(fmt.Sprintf("code%02d", i))
			got := ""
			if ok && l.Options != nil {
				got = l.Options.Title
			}
			if got != want(i) {
				t.Errorf("%s: code%02d has title %q, want %q", when, i, got, want(i))
			}
		}
		if l, _ := f.Get("plain1"); l.Options != nil {
			t.Errorf("%s: a link made without options has %+v", when, l.Options)
		}
		if got := f.s.opts.len(); got != n-2 {
			t.Errorf("%s: %d links with options, want %d", when, got, n-2)
		}
	}
	check(f, "applied")
	var snap bytes.Buffer
	if err := f.WriteBackup(&snap); err != nil {
		t.Fatal(err)
	}
	restored, err := Open(Config{Dir: filepath.Join(t.TempDir(), "engine"), OptionCache: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	if err := restored.Restore(nopCloser{bytes.NewReader(snap.Bytes())}); err != nil {
		t.Fatal(err)
	}
	check(restored, "restored")

	code := []byte("code03")
	if tg, ok := restored.Lookup(code); !ok || tg.Options == nil || tg.Options.MaxVisits != 4 {
		t.Fatalf("Lookup(code03) = %+v, %v", tg, ok)
	}
	if allocs := testing.AllocsPerRun(100, func() { restored.Lookup(code) }); allocs != 0 {
		t.Errorf("a redirect of a link whose options are cached allocates %v times", allocs)
	}
}

// TestOptionReadersRunTogether: readers of options not in the cache read
// the engine concurrently with each other and between applies (go test
// -race sees any unguarded sharing).
func TestOptionReadersRunTogether(t *testing.T) {
	f, err := Open(Config{Dir: filepath.Join(t.TempDir(), "engine"), OptionCache: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	for i := range 20 {
		createOne(t, f, 1, CreateRequest{URL: "https://example.com/", CustomCode: fmt.Sprintf("code%02d", i), Options: &Options{Title: fmt.Sprint(i)}})
	}
	done := make(chan error, 4)
	for r := range 4 {
		go func() {
			for k := range 200 {
				i := (k*7 + r) % 20
				if l, ok := f.Get(fmt.Sprintf("code%02d", i)); !ok || l.Options == nil || l.Options.Title != fmt.Sprint(i) {
					done <- fmt.Errorf("code%02d: %+v", i, l.Options)
					return
				}
			}
			done <- nil
		}()
	}
	for i := range 50 {
		applyAll(t, f, EditCommand{Code: "code19", Now: int64(i + 2), Fields: EditTitle, Title: "19"}.Encode())
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestCatchingUpHoldsBoundedMemory: a node catching up is handed hundreds
// of entries in one apply batch; the engine takes them in pieces, so the
// heap holds a few MiB of pending writes, not every entry's, and the state
// is the one the entries give. The heap still holds the results Raft hands
// back (a Link a create) and garbage until a collection: it grew by ~180
// MiB here with the pieces, ~635 MiB without them. Readers are served
// between the pieces, not only once the whole batch is applied.
func TestCatchingUpHoldsBoundedMemory(t *testing.T) {
	f := onDisk(t)
	defer f.Close()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	const entries, perEntry = 1000, 256
	logs := make([]*raft.Log, entries)
	for i := range logs {
		items := make([]CreateRequest, perEntry)
		for j := range items {
			items[j] = CreateRequest{URL: benchURL(i*perEntry + j), CustomCode: fmt.Sprintf("c%d", i*perEntry+j), Workspace: "default"}
		}
		logs[i] = &raft.Log{Index: uint64(i + 10), Type: raft.LogCommand, Data: CreateBatch{Now: 1e12, Items: items}.Encode()}
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := make(chan uint64)
	done := make(chan struct{})
	go func() {
		var most uint64
		var m runtime.MemStats
		for stop := false; !stop; {
			select {
			case <-done:
				stop = true
			case <-time.After(5 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			most = max(most, m.HeapAlloc)
		}
		peak <- most
	}()
	reads := make(chan []time.Time)
	go func() {
		var at []time.Time
		for stop := false; !stop; {
			select {
			case <-done:
				stop = true
			default:
				f.Get("c0")
				at = append(at, time.Now())
			}
		}
		reads <- at
	}()
	start := time.Now()
	f.ApplyBatch(logs)
	took := time.Since(start)
	close(done)
	grew := int64(<-peak) - int64(before.HeapAlloc)
	between := 0
	for _, at := range <-reads {
		if d := at.Sub(start); d > took/4 && d < took*3/4 {
			between++
		}
	}
	if between == 0 {
		t.Errorf("no read was served in the middle half of the %v the apply batch took", took)
	}
	if grew > 400<<20 {
		t.Errorf("the heap grew by %d MiB while one apply batch of %d entries was applied", grew>>20, entries)
	}
	if l, ok := f.Get(fmt.Sprintf("c%d", entries*perEntry-1)); !ok || l.URL != benchURL(entries*perEntry-1) {
		t.Errorf("the last link: %+v, %v", l, ok)
	}
	if got := f.s.eng.st.AppliedIndex(); got != uint64(entries+9) {
		t.Errorf("the engine is at index %d, want %d", got, entries+9)
	}
}

package fsm

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// recordWorkload changes records every way Apply does: creates of every
// kind (dedupe, hash, a registered domain, imported clicks), clicks,
// edits of the URL and the expiry, a rename, deletes and a purge.
func recordWorkload() [][]byte {
	cmds := append(workload(),
		RaiseCommand{To: LevelDisabled}.Encode(),
		DomainCommand{Domain: Domain{Name: "sho.rt"}, By: RootKeyID, Now: 3000}.Encode(),
		create(3001, CreateRequest{URL: "https://example.com/on/domain", CustomCode: "dom1", Domain: "sho.rt"}),
		create(3002, CreateRequest{URL: "https://example.com/imported", CustomCode: "imp1", Clicks: 42, CreatedAt: 5}),
		ClickBatch{Node: "n1", Seq: 2, Now: 3100, Counts: []ClickCount{{Code: "sho.rt/dom1", Count: 2}, {Code: "imp1", Count: 1}}}.Encode(),
		EditCommand{Code: "imp1", Now: 3200, KeyID: RootKeyID, Fields: EditURL | EditExpiresAt, URL: "https://example.com/moved", ExpiresAt: 9000}.Encode(),
		RenameCommand{NewCode: "sho.rt/dom2", Edit: EditCommand{Code: "sho.rt/dom1", Now: 3300, KeyID: RootKeyID}}.Encode(),
		create(3400, CreateRequest{URL: "https://example.com/brief", CustomCode: "brief", ExpiresAt: 3500}),
		PurgeCommand{ExpiredBefore: 3600}.Encode(),
	)
	return cmds
}

// TestRecordsAreOnDisk: a state whose record cache holds two records
// answers every read, writes the same snapshot and restores to the same
// state as one whose cache holds them all; a redirect of a cached link
// allocates nothing, and the cache's counters see hits and misses.
func TestRecordsAreOnDisk(t *testing.T) {
	open := func(slots int) *FSM {
		f, err := Open(Config{Dir: filepath.Join(t.TempDir(), "engine"), RecordCache: slots})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Close)
		return f
	}
	small, big := open(2), open(1<<12)
	for _, f := range []*FSM{small, big} {
		for _, res := range applyAll(t, f, recordWorkload()...) {
			if err, ok := res.(error); ok {
				t.Fatal(err)
			}
		}
	}
	want := snapshotBytes(t, big)
	if got := snapshotBytes(t, small); !bytes.Equal(got, want) {
		t.Fatal("a state with a cache of 2 records writes another snapshot than one that caches them all")
	}
	links := big.Links()
	if got := small.Links(); !reflect.DeepEqual(got, links) {
		t.Fatalf("Links with a cache of 2: %d links, want %d equal ones", len(got), len(links))
	}
	for _, l := range links {
		if got, ok := small.Get(l.Qualified()); !ok || !reflect.DeepEqual(got, l) {
			t.Fatalf("Get(%s) = %+v, want %+v", l.Qualified(), got, l)
		}
	}
	if l, ok := small.Get("sho.rt/dom2"); !ok || l.Clicks != 2 {
		t.Fatalf("the renamed link: %+v, %v", l, ok)
	}
	if l, ok := small.Get("imp1"); !ok || l.URL != "https://example.com/moved" || l.Clicks != 43 || l.ExpiresAt != 9000 {
		t.Fatalf("the edited link: %+v, %v", l, ok)
	}
	if _, ok := small.Get("brief"); ok {
		t.Fatal("the purge left an expired link")
	}
	checkRestoredRecords(t, open(2), want, links)
}

// checkRestoredRecords restores a snapshot into an FSM with a cache of
// two records: the state is the same, and a cached redirect allocates
// nothing and counts a hit.
func checkRestoredRecords(t *testing.T, restored *FSM, want []byte, links []Link) {
	t.Helper()
	if err := restored.Restore(nopCloser{bytes.NewReader(want)}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, restored), want) {
		t.Fatal("the restored state writes another snapshot")
	}
	if got := restored.Links(); !reflect.DeepEqual(got, links) {
		t.Fatal("the restored state holds other links")
	}

	code := []byte("imp1")
	if tg, ok := restored.Lookup(code); !ok || tg.URL != "https://example.com/moved" {
		t.Fatalf("Lookup(imp1) = %+v, %v", tg, ok)
	}
	hits, misses := restored.RecordCacheStats()
	if allocs := testing.AllocsPerRun(100, func() { restored.Lookup(code) }); allocs != 0 {
		t.Errorf("a redirect of a link whose record is cached allocates %v times", allocs)
	}
	if h, m := restored.RecordCacheStats(); h < hits+100 || m != misses {
		t.Errorf("100 cached lookups: hits %d → %d, misses %d → %d", hits, h, misses, m)
	}
	restored.Lookup([]byte(links[0].Code)) // another slot's link is read from the engine
	restored.Lookup([]byte(links[2].Code))
	if _, m := restored.RecordCacheStats(); m <= misses {
		t.Errorf("lookups of links not in a cache of 2: misses %d → %d", misses, m)
	}
	restored.Lookup(code)
	applyFrom(restored, 1, EditCommand{Code: "imp1", Now: 4000, KeyID: RootKeyID, Fields: EditURL, URL: "https://example.com/again"}.Encode())
	if tg, _ := restored.Lookup(code); tg.URL != "https://example.com/again" {
		t.Errorf("a cached record after an edit: %+v", tg)
	}
}

// TestRecordCacheIsBounded: the cache holds its slots' records and no
// more, however many links the state has.
func TestRecordCacheIsBounded(t *testing.T) {
	f, err := Open(Config{RecordCache: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	for i := range 300 {
		applyAll(t, f, create(int64(i+1), CreateRequest{URL: fmt.Sprintf("https://example.com/%d", i)}))
	}
	f.Links()
	for _, l := range f.Links() {
		f.Get(l.Qualified())
	}
	cached := 0
	for i := range f.s.links.recs.cache.slots {
		if f.s.links.recs.cache.slots[i].Load() != nil {
			cached++
		}
	}
	if n := len(f.s.links.recs.cache.slots); n != 4 || cached > 4 {
		t.Fatalf("%d slots hold %d records, want 4 slots", n, cached)
	}
	if f.Len() != 300 {
		t.Fatalf("%d links, want 300", f.Len())
	}
}

// TestRecordReadersRunTogether: readers of records not in the cache read
// the engine concurrently with each other and between applies that
// change the records they read (go test -race sees any unguarded
// sharing); each reads a whole record, never a mix of two versions.
func TestRecordReadersRunTogether(t *testing.T) {
	f, err := Open(Config{Dir: filepath.Join(t.TempDir(), "engine"), RecordCache: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	for i := range 20 {
		createOne(t, f, 1, CreateRequest{URL: fmt.Sprintf("https://example.com/%d", i), CustomCode: fmt.Sprintf("code%02d", i)})
	}
	done := make(chan error, 4)
	for r := range 4 {
		go func() {
			for k := range 300 {
				i := (k*7 + r) % 20
				code := fmt.Sprintf("code%02d", i)
				tg, ok := f.Lookup([]byte(code))
				if !ok || tg.Code != code || !strings.HasPrefix(tg.URL, "https://example.com/") {
					done <- fmt.Errorf("%s: %+v", code, tg)
					return
				}
				if l, ok := f.Get(code); !ok || l.URL != tg.URL && !strings.HasPrefix(l.URL, "https://example.com/v") {
					done <- fmt.Errorf("%s: %+v", code, l)
					return
				}
				f.List(nil, 0, 5)
			}
			done <- nil
		}()
	}
	for i := range 50 {
		applyAll(t, f,
			ClickBatch{Node: "n1", Seq: uint64(i + 1), Now: int64(i + 2), Counts: []ClickCount{{Code: "code03", Count: 1}, {Code: "code11", Count: 2}}}.Encode(),
			EditCommand{Code: "code19", Now: int64(i + 2), Fields: EditURL, URL: fmt.Sprintf("https://example.com/v%d", i)}.Encode())
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	if l, _ := f.Get("code11"); l.Clicks != 100 {
		t.Fatalf("code11 has %d clicks, want 100", l.Clicks)
	}
}

// TestDamagedRecordFailsTheRead: a record the engine lost or damaged is
// never served as a link without it: the read panics (a reader's request
// fails, the writer stops).
func TestDamagedRecordFailsTheRead(t *testing.T) {
	f, err := Open(Config{RecordCache: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	createOne(t, f, 1, CreateRequest{URL: "https://example.com/a", CustomCode: "a"})
	createOne(t, f, 1, CreateRequest{URL: "https://example.com/b", CustomCode: "b"})
	f.s.eng.set(recordKey(nil, 0), []byte{1, 2})
	if err := f.s.eng.settle(); err != nil {
		t.Fatal(err)
	}
	f.Get("b") // pushes a out of the one slot
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "record at 0") {
			t.Fatalf("a damaged record read as %v", r)
		}
	}()
	f.Get("a")
}

// TestRecordEncodingRoundTrips: every field and text comes back, and a
// value cut short is refused, not read past.
func TestRecordEncodingRoundTrips(t *testing.T) {
	r := record{id: 1 << 40, createdAt: -5, expiresAt: 1 << 50, clicks: 7, lastAccess: 99, workspace: 3,
		author: 2, flags: flagLive | flagDedupe, pos: 9}
	r.setTexts("sho.rt/abc", "https://example.com/x", "https://example.com/y")
	v := encodeRecord(nil, &r)
	var got record
	if err := decodeRecord(v, 9, &got, true); err != nil || got != r {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, r)
	}
	if err := decodeRecord(v, 9, &got, false); err != nil || got.code != "" || got.clicks != 7 {
		t.Fatalf("fixed fields only: %+v, %v", got, err)
	}
	for n := range len(v) - len("https://example.com/y") {
		if err := decodeRecord(v[:n], 9, &got, true); err == nil {
			t.Fatalf("a value cut to %d bytes decoded: %+v", n, got)
		}
	}
}

// BenchmarkRedirectLookup is FSM.Lookup of one of 10,000 links: with its
// record (and every other) in the cache, and with a cache of 2 records
// (each lookup reads the engine's block cache).
func BenchmarkRedirectLookup(b *testing.B) {
	for _, c := range []struct {
		name  string
		slots int
	}{{"hit", 1 << 14}, {"miss", 2}} {
		b.Run(c.name, func(b *testing.B) {
			f, err := Open(Config{Dir: b.TempDir(), RecordCache: c.slots})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			loadLinks(b, f, 10_000, imported)
			links := f.Links()
			codes := make([][]byte, len(links))
			for i, l := range links {
				codes[i] = []byte(l.Code)
				f.Lookup(codes[i])
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, ok := f.Lookup(codes[(i*7919)%len(codes)]); !ok {
					b.Fatal("no link")
				}
			}
		})
	}
}

// TestWriterPushesNoHotLinkOut: what Apply reads or changes (a delete, a
// click counted for a link another node served, a create) never takes
// the slot of a link a reader cached, and a deleted link's slot is freed.
// With 2 slots, even positions share slot 0 and odd ones slot 1.
func TestWriterPushesNoHotLinkOut(t *testing.T) {
	f, err := Open(Config{Dir: filepath.Join(t.TempDir(), "engine"), RecordCache: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	for i := range 6 {
		createOne(t, f, 1, CreateRequest{URL: fmt.Sprintf("https://example.com/%d", i), CustomCode: fmt.Sprintf("code%02d", i)})
	}
	f.Lookup([]byte("code00")) // position 0: slot 0
	f.Lookup([]byte("code01")) // position 1: slot 1
	applyAll(t, f,
		DeleteCommand{Code: "code02", Now: 2, KeyID: RootKeyID}.Encode(),
		ClickBatch{Node: "n2", Seq: 1, Now: 3, Counts: []ClickCount{{Code: "code04", Count: 5}}}.Encode(),
		create(4, CreateRequest{URL: "https://example.com/6", CustomCode: "code06"}),
		DeleteCommand{Code: "code01", Now: 5, KeyID: RootKeyID}.Encode())
	_, misses := f.RecordCacheStats()
	if tg, ok := f.Lookup([]byte("code00")); !ok || tg.Code != "code00" {
		t.Fatalf("Lookup(code00) = %+v, %v", tg, ok)
	}
	if _, m := f.RecordCacheStats(); m != misses {
		t.Errorf("the link a reader cached was pushed out by Apply: misses %d → %d", misses, m)
	}
	if r := f.s.links.recs.cache.slots[1].Load(); r != nil {
		t.Errorf("the deleted link's slot still holds position %d", r.pos)
	}
	if l, ok := f.Get("code04"); !ok || l.Clicks != 5 {
		t.Errorf("the clicked link: %+v, %v", l, ok)
	}
	if _, ok := f.Get("code01"); ok {
		t.Error("the deleted link is still found")
	}
}

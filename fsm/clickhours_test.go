package fsm

import (
	"bytes"
	"os"
	"reflect"
	"testing"
)

const hour = int64(hourMillis)

// clickAt is a click batch from node n with sequence seq, flushed at now.
func clickAt(n string, seq uint64, now int64, counts ...ClickCount) []byte {
	return ClickBatch{Node: n, Seq: seq, Now: now, Counts: counts}.Encode()
}

// withClickHours is the workload plus clicks on two of its links over
// several hours, from two nodes, one of them with a clock running behind.
func withClickHours(t testing.TB) (*FSM, []Link) {
	f := New()
	applyAll(t, f, workload()...)
	links := f.Links()
	a, b := links[0].Code, links[1].Code
	base := 500_000 * hour
	applyFrom(f, 1000,
		clickAt("p1", 1, base+10, ClickCount{Code: a, Count: 2}, ClickCount{Code: b, Count: 1}),
		clickAt("p1", 2, base+hour+5, ClickCount{Code: a, Count: 3}),
		clickAt("p2", 1, base+hour/2, ClickCount{Code: a, Count: 4}),      // same hour as n1's first, later
		clickAt("p1", 3, base+5*hour, ClickCount{Code: b, Count: 7}),      // a gap of hours
		clickAt("p2", 2, base+4*hour+1, ClickCount{Code: b, Count: 1}),    // behind n1: inserted before
		clickAt("p2", 2, base+6*hour, ClickCount{Code: b, Count: 100}),    // a retry: ignored
		clickAt("p3", 1, -5, ClickCount{Code: a, Count: 1}),               // before 1970: total only
		clickAt("p3", 2, base+5*hour, ClickCount{Code: "nope", Count: 9}), // no such link
	)
	return f, links
}

func TestClickHours(t *testing.T) {
	f, links := withClickHours(t)
	base := 500_000 * hour
	tests := []struct {
		name     string
		code     string
		from, to int64
		want     []HourClicks
	}{
		{"every hour of a", links[0].Code, 0, 1 << 60, []HourClicks{{base, 6}, {base + hour, 3}}},
		{"out-of-order hour of b", links[1].Code, 0, 1 << 60, []HourClicks{{base, 1}, {base + 4*hour, 1}, {base + 5*hour, 7}}},
		{"from is inclusive, to exclusive", links[1].Code, base + 4*hour, base + 5*hour, []HourClicks{{base + 4*hour, 1}}},
		{"a link never clicked", links[2].Code, 0, 1 << 60, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := f.ClickHours(tt.code, tt.from, tt.to)
			if !ok || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ClickHours = %v, %v; want %v", got, ok, tt.want)
			}
		})
	}
	if l, _ := f.Get(links[0].Code); l.Clicks != 10 {
		t.Fatalf("total clicks of a = %d, want 10 (hours plus the untimed click)", l.Clicks)
	}
	if _, ok := f.ClickHours("nope", 0, 1<<60); ok {
		t.Fatal("ClickHours found a code that does not exist")
	}
}

func TestClickHoursRetention(t *testing.T) {
	f, links := withClickHours(t)
	a, b := links[0].Code, links[1].Code
	base := 500_000 * hour
	// A click on b exactly 90 days after a's first hour pushes that hour out
	// of retention for every link, clicked again or not.
	last := base + ClickRetentionHours*hour
	applyFrom(f, 2000, clickAt("p1", 10, last, ClickCount{Code: b, Count: 1}))
	gotA, _ := f.ClickHours(a, 0, 1<<60)
	if want := []HourClicks{{base + hour, 3}}; !reflect.DeepEqual(gotA, want) {
		t.Fatalf("a after retention: %v, want %v", gotA, want)
	}
	gotB, _ := f.ClickHours(b, 0, 1<<60)
	if want := []HourClicks{{base + 4*hour, 1}, {base + 5*hour, 7}, {last, 1}}; !reflect.DeepEqual(gotB, want) {
		t.Fatalf("b after retention: %v, want %v", gotB, want)
	}
	// A snapshot keeps only what is within retention, and a restore answers
	// the same.
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, f))}); err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{a, b} {
		want, _ := f.ClickHours(code, 0, 1<<60)
		if got, _ := restored.ClickHours(code, 0, 1<<60); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s after restore: %v, want %v", code, got, want)
		}
	}
	if l, _ := restored.Get(a); l.Clicks != 10 {
		t.Fatalf("total clicks of a after restore = %d; retention must not change totals", l.Clicks)
	}
}

func TestClickHoursSurviveSnapshots(t *testing.T) {
	f, links := withClickHours(t)
	data := snapshotBytes(t, f)
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, restored), data) {
		t.Fatal("a restored state's snapshot differs from the original")
	}
	for _, l := range links[:3] {
		want, _ := f.ClickHours(l.Code, 0, 1<<60)
		if got, _ := restored.ClickHours(l.Code, 0, 1<<60); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %v after restore, want %v", l.Code, got, want)
		}
	}
}

// TestClickHoursAreAPointInTime changes counts a snapshot shares, in place
// and by insertion, between taking it and writing it.
func TestClickHoursAreAPointInTime(t *testing.T) {
	f, links := withClickHours(t)
	want := snapshotBytes(t, f)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	base := 500_000 * hour
	applyFrom(f, 3000,
		clickAt("p1", 20, base+hour, ClickCount{Code: links[0].Code, Count: 1}),   // an hour the snapshot holds
		clickAt("p2", 20, base+2*hour, ClickCount{Code: links[1].Code, Count: 1}), // inserted between held hours
		clickAt("p1", 21, base+9*hour, ClickCount{Code: links[2].Code, Count: 1}), // a link without hours
	)
	if !bytes.Equal(writeAndRelease(t, snap), want) {
		t.Fatal("the snapshot changed after it was taken")
	}
	if got, _ := f.ClickHours(links[0].Code, base+hour, base+2*hour); len(got) != 1 || got[0].Clicks != 4 {
		t.Fatalf("live state after the snapshot: %v", got)
	}
}

// TestOlderSnapshotsStillRestore restores snapshots written by the builds
// before version 4 (the workload, testdata/) and checks that each is the
// state the workload gives today. The workload clicks no live link, so
// there are no hours for the older versions to lack; it has no keys, and
// the audit log it now records is what older versions lack.
func TestOlderSnapshotsStillRestore(t *testing.T) {
	applied := New()
	applyAll(t, applied, workload()...)
	applied.s.audit = auditLog{}
	for _, file := range []string{"testdata/snapshot-v1.bin", "testdata/snapshot-v2.bin", "testdata/snapshot-v3.bin"} {
		t.Run(file, func(t *testing.T) {
			old, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			restored := New()
			if err := restored.Restore(nopCloser{bytes.NewReader(old)}); err != nil {
				t.Fatalf("restore: %v", err)
			}
			if !bytes.Equal(snapshotBytes(t, restored), snapshotBytes(t, applied)) {
				t.Fatal("restored to a different state")
			}
			// Dedupe still finds the restored links.
			res := createOne(t, restored, 5000, CreateRequest{URL: "https://example.com/3/", Dedupe: true, Workspace: "ws"})
			if !res.Existing {
				t.Fatalf("dedupe after restoring %s created %q", file, res.Link.Code)
			}
		})
	}
}

// engineHours is every hour the engine holds for the link id, retention
// or not: what is on disk, not what readers are shown.
func engineHours(f *FSM, id uint64) []hourCount {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.links.hours.read(id, 0, 1<<32)
}

// TestClickHoursOnDisk follows what the engine holds for a link's hours
// through the writes that change them: clicks add up within one apply
// batch, retention drops a link's old hours when it is next clicked, and
// a removed link or deleted visits leave no hour behind.
func TestClickHoursOnDisk(t *testing.T) {
	base := 500_000 * hour
	setup := func(t *testing.T) (*FSM, map[string]uint64) {
		f := onDisk(t)
		t.Cleanup(f.Close)
		applyAll(t, f, InitCommand{Key: testKey}.Encode(), RaiseCommand{To: LevelVisitRows}.Encode(),
			create(1000,
				CreateRequest{URL: "https://example.com/a", CustomCode: "a"},
				CreateRequest{URL: "https://example.com/b", CustomCode: "b", ExpiresAt: base + 2*hour},
				CreateRequest{URL: "https://example.com/c", CustomCode: "c"}),
			clickAt("n1", 1, base, ClickCount{Code: "a", Count: 2}, ClickCount{Code: "b", Count: 5}, ClickCount{Code: "c", Count: 1}),
			clickAt("n1", 2, base+hour, ClickCount{Code: "a", Count: 1}, ClickCount{Code: "b", Count: 1}))
		ids := map[string]uint64{}
		for _, l := range f.Links() {
			ids[l.Code] = l.ID
		}
		return f, ids
	}
	tests := []struct {
		name string
		// then are entries applied as one Raft apply batch after setup's.
		then [][]byte
		want map[string][]hourCount // per code, what the engine holds
	}{
		{"two entries of one batch add up", [][]byte{
			clickAt("n1", 3, base+hour+5, ClickCount{Code: "a", Count: 4}),
			clickAt("n2", 1, base+hour+9, ClickCount{Code: "a", Count: 3}, ClickCount{Code: "c", Count: 2}),
			VisitCommand{Code: "a", Now: base + hour + 10}.Encode(),
		}, map[string][]hourCount{
			"a": {{500_000, 2}, {500_001, 9}},
			"b": {{500_000, 5}, {500_001, 1}},
			"c": {{500_000, 1}, {500_001, 2}},
		}},
		{"retention drops the hours of a link clicked again", [][]byte{
			clickAt("n1", 3, base+ClickRetentionHours*hour, ClickCount{Code: "a", Count: 1}),
		}, map[string][]hourCount{
			"a": {{500_001, 1}, {500_000 + ClickRetentionHours, 1}},
			"b": {{500_000, 5}, {500_001, 1}}, // not clicked since: kept on disk, skipped by readers
			"c": {{500_000, 1}},
		}},
		{"a deleted link's hours go", [][]byte{
			DeleteCommand{Code: "a", Now: base + 2*hour}.Encode(),
			clickAt("n1", 3, base+2*hour, ClickCount{Code: "a", Count: 1}), // gone: not counted
		}, map[string][]hourCount{
			"b": {{500_000, 5}, {500_001, 1}},
			"c": {{500_000, 1}},
		}},
		{"an expired link's hours go with its purge", [][]byte{
			PurgeCommand{ExpiredBefore: base + 3*hour}.Encode(),
		}, map[string][]hourCount{
			"a": {{500_000, 2}, {500_001, 1}},
			"c": {{500_000, 1}},
		}},
		{"deleted visits take the hours", [][]byte{
			clickAt("n1", 3, base+2*hour, ClickCount{Code: "c", Count: 1}),
			VisitsDeleteCommand{Code: "c", Now: base + 2*hour}.Encode(),
			clickAt("n1", 4, base+3*hour, ClickCount{Code: "c", Count: 6}),
		}, map[string][]hourCount{
			"a": {{500_000, 2}, {500_001, 1}},
			"b": {{500_000, 5}, {500_001, 1}},
			"c": {{500_003, 6}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ids := setup(t)
			for _, res := range applyAll(t, f, tt.then...) {
				if err, ok := res.(error); ok {
					t.Fatalf("apply: %v", err)
				}
			}
			for code, id := range ids {
				if got := engineHours(f, id); !reflect.DeepEqual(got, tt.want[code]) {
					t.Errorf("the engine holds %v for %s, want %v", got, code, tt.want[code])
				}
			}
			// A restore holds the same within retention, and writes the same bytes.
			restored := restoredOnDisk(t, f)
			for _, l := range f.Links() {
				want, _ := f.ClickHours(l.Code, 0, 1<<60)
				if got, _ := restored.ClickHours(l.Code, 0, 1<<60); !reflect.DeepEqual(got, want) {
					t.Errorf("%s after restore: %v, want %v", l.Code, got, want)
				}
			}
		})
	}
}

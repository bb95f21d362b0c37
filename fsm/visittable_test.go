package fsm

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
)

// engineVisitDay is one day of a link's visitors as the engine holds it,
// and the size of its value.
type engineVisitDay struct {
	day  *dayVisits
	size int
}

// engineVisitDays is every day the engine holds for the link id, those
// past retention included, oldest first.
func engineVisitDays(f *FSM, id uint64) []engineVisitDay {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []engineVisitDay
	f.s.eng.scan(visitKey(nil, id), nil, func(key, value []byte) bool {
		if len(key) == visitDayKeyLen {
			day := binary.BigEndian.Uint32(key[visitTotalsKeyLen:])
			out = append(out, engineVisitDay{decodeStoredDay(id, day, value, false), len(value)})
		}
		return true
	})
	return out
}

// setEngineVisitDay writes d as the link id's day, outside Apply, as a
// damaged engine would hold it; the next snapshot's view sees it.
func setEngineVisitDay(f *FSM, id uint64, d *dayVisits) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.s.visits.setDay(id, d)
}

// visitBytes is the size of every key and value of the visitors' table.
func visitBytes(f *FSM) int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := 0
	f.s.eng.scan([]byte{visitPrefix}, nil, func(key, value []byte) bool {
		n += len(key) + len(value)
		return true
	})
	return n
}

// engineVisits is what the engine holds for the link id: its bots in
// all (nil without totals) and its days by day number, with their
// clicks that carried a visitor and their tallied hours.
type engineVisits struct {
	Bots []uint64
	Days map[uint32][2]int // day: clicks, tallied hours
}

func engineVisitsOf(f *FSM, id uint64) engineVisits {
	var out engineVisits
	f.mu.RLock()
	if bots, ok := f.s.visits.totals(id); ok {
		out.Bots = []uint64{bots[Crawler], bots[Preview]}
	}
	f.mu.RUnlock()
	for _, d := range engineVisitDays(f, id) {
		if out.Days == nil {
			out.Days = map[uint32][2]int{}
		}
		clicks := 0
		for _, c := range d.day.browsers {
			clicks += int(c)
		}
		out.Days[d.day.day] = [2]int{clicks, len(d.day.tallies)}
	}
	return out
}

// TestVisitsOnDisk follows what the engine holds for a link's visitors
// through the writes that change them: visitors add up within one apply
// batch, retention drops a link's old days when it is next visited on a
// new day, and a removed link or deleted visits leave no key behind.
func TestVisitsOnDisk(t *testing.T) {
	base := 500_000 * hour // day 20833, hour 8
	day := uint32(base / dayMillis)
	setup := func(t *testing.T) (*FSM, map[string]uint64) {
		f := onDisk(t)
		t.Cleanup(f.Close)
		applyAll(t, f, InitCommand{Key: testKey}.Encode(), RaiseCommand{To: LevelVisitRows}.Encode(),
			create(1000,
				CreateRequest{URL: "https://example.com/a", CustomCode: "a"},
				CreateRequest{URL: "https://example.com/b", CustomCode: "b", ExpiresAt: base + 2*hour},
				CreateRequest{URL: "https://example.com/c", CustomCode: "c"}),
			visitorsAt("n1", 1, base, ClickCount{Code: "a", Count: 2, Visitor: chromeDE},
				ClickCount{Code: "b", Count: 5, Visitor: safariUS}, ClickCount{Code: "c", Count: 1, Visitor: slackbot}),
			visitorsAt("n1", 2, base+dayMillis, ClickCount{Code: "a", Count: 1, Visitor: safariUS},
				ClickCount{Code: "b", Count: 1, Visitor: chromeDE}))
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
		want map[string]engineVisits // per code, what the engine holds
	}{
		{"entries of one batch add up", [][]byte{
			visitorsAt("n1", 3, base+dayMillis+5, ClickCount{Code: "a", Count: 4, Visitor: chromeDE},
				ClickCount{Code: "c", Count: 2, Visitor: googlebot}, ClickCount{Code: "a", Count: 2, Visitor: variedVisitor(3)}),
			visitorsAt("n2", 1, base+dayMillis+9, ClickCount{Code: "a", Count: 3, Visitor: slackbot}, ClickCount{Code: "c", Count: 2, Visitor: chromeDE}),
			VisitCommand{Code: "a", Now: base + dayMillis + 10, HasVisitor: true, Visitor: safariUS}.Encode(),
		}, map[string]engineVisits{
			"a": {[]uint64{0, 3}, map[uint32][2]int{day: {2, 1}, day + 1: {8, 1}}},
			"b": {[]uint64{0, 0}, map[uint32][2]int{day: {5, 1}, day + 1: {1, 1}}},
			"c": {[]uint64{2, 1}, map[uint32][2]int{day: {0, 1}, day + 1: {2, 1}}},
		}},
		{"retention drops the days of a link visited again", [][]byte{
			visitorsAt("n1", 3, base+ClickRetentionHours*hour+dayMillis, ClickCount{Code: "a", Count: 1, Visitor: chromeDE}),
		}, map[string]engineVisits{
			"a": {[]uint64{0, 0}, map[uint32][2]int{day + 1: {1, 1}, day + 91: {1, 1}}},
			"b": {[]uint64{0, 0}, map[uint32][2]int{day: {5, 1}, day + 1: {1, 1}}}, // not visited since: kept on disk, skipped by readers
			"c": {[]uint64{0, 1}, map[uint32][2]int{day: {0, 1}}},
		}},
		{"a visitor past retention counts its bot alone", [][]byte{
			visitorsAt("n1", 3, base+ClickRetentionHours*hour+dayMillis, ClickCount{Code: "b", Count: 1, Visitor: chromeDE}),
			visitorsAt("n2", 1, base, ClickCount{Code: "c", Count: 3, Visitor: googlebot}),
		}, map[string]engineVisits{
			"a": {[]uint64{0, 0}, map[uint32][2]int{day: {2, 1}, day + 1: {1, 1}}},
			"b": {[]uint64{0, 0}, map[uint32][2]int{day + 1: {1, 1}, day + 91: {1, 1}}},
			"c": {[]uint64{3, 1}, map[uint32][2]int{day: {0, 1}}},
		}},
		{"a deleted link's visitors go", [][]byte{
			DeleteCommand{Code: "a", Now: base + 2*hour}.Encode(),
			visitorsAt("n1", 3, base+2*hour, ClickCount{Code: "a", Count: 1, Visitor: chromeDE}), // gone: not counted
		}, map[string]engineVisits{
			"b": {[]uint64{0, 0}, map[uint32][2]int{day: {5, 1}, day + 1: {1, 1}}},
			"c": {[]uint64{0, 1}, map[uint32][2]int{day: {0, 1}}},
		}},
		{"an expired link's visitors go with its purge", [][]byte{
			PurgeCommand{ExpiredBefore: base + 3*hour}.Encode(),
		}, map[string]engineVisits{
			"a": {[]uint64{0, 0}, map[uint32][2]int{day: {2, 1}, day + 1: {1, 1}}},
			"c": {[]uint64{0, 1}, map[uint32][2]int{day: {0, 1}}},
		}},
		{"deleted visits take the visitors", [][]byte{
			visitorsAt("n1", 3, base+2*hour, ClickCount{Code: "c", Count: 1, Visitor: chromeDE}),
			VisitsDeleteCommand{Code: "c", Now: base + 2*hour}.Encode(),
			visitorsAt("n1", 4, base+dayMillis, ClickCount{Code: "c", Count: 6, Visitor: safariUS}),
		}, map[string]engineVisits{
			"a": {[]uint64{0, 0}, map[uint32][2]int{day: {2, 1}, day + 1: {1, 1}}},
			"b": {[]uint64{0, 0}, map[uint32][2]int{day: {5, 1}, day + 1: {1, 1}}},
			"c": {[]uint64{0, 0}, map[uint32][2]int{day + 1: {6, 1}}},
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
				if got := engineVisitsOf(f, id); !reflect.DeepEqual(got, tt.want[code]) {
					t.Errorf("the engine holds %v for %s, want %v", got, code, tt.want[code])
				}
			}
			// A restore holds the same within retention, and writes the same bytes.
			restored := restoredOnDisk(t, f)
			if f.Level() != restored.Level() {
				t.Errorf("level %d, restored %d", f.Level(), restored.Level())
			}
			for _, l := range f.Links() {
				for _, by := range []Dimension{ByBrowser, ByReferrer} {
					want, _ := f.LinkVisits(l.Code, 0, 1<<50, by)
					if got, _ := restored.LinkVisits(l.Code, 0, 1<<50, by); !reflect.DeepEqual(got, want) {
						t.Errorf("%s by %s after restore: %+v, want %+v", l.Code, by, got, want)
					}
				}
				want, _ := f.LinkVisitRows(l.Code, RowQuery{To: 1 << 50, Limit: 100})
				if got, _ := restored.LinkVisitRows(l.Code, RowQuery{To: 1 << 50, Limit: 100}); !reflect.DeepEqual(got, want) {
					t.Errorf("%s rows after restore: %+v, want %+v", l.Code, got, want)
				}
			}
		})
	}
}

// TestVisitorsLevelFollowsTheirLinks: the links with visitors, counted in
// memory while their visitors are on disk, decide the level (and so the
// snapshot's version) as before: a link's first visitor raises it, even
// on a day past retention; a restore counts the links the snapshot holds
// (those with kept days or bots); the last such link's removal lowers it.
func TestVisitorsLevelFollowsTheirLinks(t *testing.T) {
	base := 500_000 * hour
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), create(1000,
		CreateRequest{URL: "https://example.com/a", CustomCode: "a"}, CreateRequest{URL: "https://example.com/b", CustomCode: "b"}))
	if f.Level() != LevelKeys {
		t.Fatalf("level %d before any visitor", f.Level())
	}
	applyAll(t, f, visitorsAt("n1", 1, base, ClickCount{Code: "a", Count: 1, Visitor: chromeDE}),
		visitorsAt("n1", 2, base+ClickRetentionHours*hour+dayMillis, ClickCount{Code: "a", Count: 1, Visitor: chromeDE}),
		visitorsAt("n2", 1, base, ClickCount{Code: "b", Count: 1, Visitor: safariUS})) // b's day is past retention
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, f))}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		f    *FSM
		want int
	}{{"applied", f, 2}, {"restored", restored, 1}} {
		if tt.f.Level() != LevelVisits || tt.f.s.visits.links != tt.want {
			t.Errorf("%s: level %d with %d links with visitors, want %d and %d", tt.name, tt.f.Level(), tt.f.s.visits.links, LevelVisits, tt.want)
		}
	}
	applyAll(t, f, DeleteCommand{Code: "a", Now: base}.Encode())
	if f.Level() != LevelVisits {
		t.Errorf("level %d with b's visitors left", f.Level())
	}
	applyAll(t, f, DeleteCommand{Code: "b", Now: base}.Encode())
	if f.Level() != LevelKeys || f.s.visits.links != 0 {
		t.Errorf("level %d with %d links with visitors once both are gone", f.Level(), f.s.visits.links)
	}
}

// TestDamagedVisitTotalsFailTheSnapshot: a link's visitor totals damaged
// on disk fail the snapshot or backup being written, with an error, as a
// damaged day does; the node goes on (nothing panics on the goroutine
// that persists snapshots, where nothing would recover).
func TestDamagedVisitTotalsFailTheSnapshot(t *testing.T) {
	f := onDisk(t)
	defer f.Close()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(),
		create(1000, CreateRequest{URL: "https://example.com/a", CustomCode: "a"}),
		visitorsAt("n1", 1, 500_000*hour, ClickCount{Code: "a", Count: 1, Visitor: googlebot}))
	l, _ := f.Get("a")
	f.mu.Lock()
	f.s.eng.set(visitKey(nil, l.ID), []byte{0xff}) // a varint that never ends
	f.mu.Unlock()
	var buf bytes.Buffer
	if err := f.WriteBackup(&buf); err == nil || !strings.Contains(err.Error(), "damaged visitor totals") {
		t.Fatalf("a backup over damaged visitor totals: %v", err)
	}
	if got, ok := f.Get("a"); !ok || got.URL != "https://example.com/a" {
		t.Fatalf("the link after the failed backup: %+v, %v", got, ok)
	}
}

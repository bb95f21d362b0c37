package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"testing"
)

var talliesDay = int64(20_100) * dayMillis

// variedVisitor is the i-th of a spread of visitors: every class, 40
// referrer hosts (past a day's bound), 30 countries, and a bot every 11th.
func variedVisitor(i int) Visitor {
	v := Visitor{Browser: Browser(i % int(browserCount)), OS: OS(i / 3 % int(osCount)), Device: DeviceClass(i / 5 % int(deviceCount))}
	if i%9 != 0 {
		v.Referrer = fmt.Sprintf("r%d.example", i%40)
	}
	if i%13 != 0 {
		v.Country = [2]byte{'A' + byte(i%30/26), 'A' + byte(i%30%26)}
	}
	if i%11 == 0 {
		v = Visitor{Bot: Bot(1 + i/11%2)}
	}
	return v
}

// tallied is a link with clicks of varied visitors over three days: the
// first before the cluster is raised to LevelVisitRows, the others after,
// one hour of them past the tuple bound.
func tallied(t testing.TB) (*FSM, string) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), create(1000, CreateRequest{URL: "https://example.com/t", CustomCode: "t"}),
		RaiseCommand{To: LevelCerts}.Encode())
	seq := uint64(0)
	batch := func(now int64, from, n int) []byte {
		seq++
		var counts []ClickCount
		for i := from; i < from+n; i++ {
			counts = append(counts, ClickCount{Code: "t", Count: uint64(1 + i%3), Visitor: variedVisitor(i)})
		}
		return visitorsAt("n1", seq, now, counts...)
	}
	applyFrom(f, 10, batch(talliesDay+3*hour, 0, 50))
	applyFrom(f, 11, RaiseCommand{To: LevelVisitRows}.Encode())
	applyFrom(f, 12,
		batch(talliesDay+5*hour, 50, 20), // the same day, now tallied
		batch(talliesDay+dayMillis+hour, 0, 30),
		batch(talliesDay+dayMillis+2*hour, 0, 300), // past the bound
		batch(talliesDay+2*dayMillis+23*hour, 7, 40),
		clickAt("n2", 1, talliesDay+2*dayMillis+22*hour, ClickCount{Code: "t", Count: 5}), // no visitors
	)
	return f, "t"
}

// allRows lists every row of code, a page of limit at a time.
func allRows(t testing.TB, f *FSM, code string, q RowQuery, limit uint64) []VisitRow {
	return pagedRows(t, q, limit, func(q RowQuery) VisitRows {
		got, ok := f.LinkVisitRows(code, q)
		if !ok {
			t.Fatalf("no link %q", code)
		}
		return got
	})
}

// pagedRows reads every row through read, a page of limit at a time, and
// checks that they are as many as each page counts.
func pagedRows(t testing.TB, q RowQuery, limit uint64, read func(RowQuery) VisitRows) []VisitRow {
	var rows []VisitRow
	for range 10_000 {
		q.Offset, q.Limit = uint64(len(rows)), limit
		got := read(q)
		rows = append(rows, got.Rows...)
		if uint64(len(got.Rows)) < limit {
			if uint64(len(rows)) != got.Matched(q.ExcludeBots) {
				t.Fatalf("listed %d rows, counted %d", len(rows), got.Matched(q.ExcludeBots))
			}
			return rows
		}
	}
	t.Fatal("too many pages")
	return nil
}

// groupRows counts non-bot rows of one day by a dimension, named as
// breakdowns name values.
func groupRows(rows []VisitRow, day int64, by Dimension) map[string]uint64 {
	out := map[string]uint64{}
	for _, r := range rows {
		if r.Bot != NotBot || r.At/dayMillis != day/dayMillis {
			continue
		}
		switch by {
		case ByBrowser:
			out[r.Browser.String()]++
		case ByOS:
			out[r.OS.String()]++
		case ByDevice:
			out[r.Device.String()]++
		case ByCountry:
			out[r.Country]++
		case ByReferrer:
			name := r.Referrer
			if name == "" {
				name = Direct
			}
			out[name]++
		}
	}
	return out
}

func TestRowsAddUpToBreakdowns(t *testing.T) {
	f, code := tallied(t)
	rows := allRows(t, f, code, RowQuery{From: 0, To: 1 << 50}, 97)
	for i := 1; i < len(rows); i++ {
		if rows[i].At > rows[i-1].At {
			t.Fatalf("row %d at %d after row %d at %d: not newest first", i, rows[i].At, i-1, rows[i-1].At)
		}
	}
	for d := range int64(3) {
		day := talliesDay + d*dayMillis
		for _, by := range []Dimension{ByBrowser, ByOS, ByDevice, ByCountry, ByReferrer} {
			v, _ := f.LinkVisits(code, day, day+dayMillis, by)
			want := map[string]uint64{}
			for _, g := range v.Groups {
				want[g.Value] = g.Clicks
			}
			if got := groupRows(rows, day, by); !maps.Equal(got, want) {
				t.Errorf("day %d by %s: rows give %v, the breakdown %v", d, by, got, want)
			}
		}
		v, _ := f.LinkVisits(code, day, day+dayMillis, ByNothing)
		var crawlers, previews uint64
		for _, r := range rows {
			if r.At/dayMillis == day/dayMillis {
				crawlers += b2u(r.Bot == Crawler)
				previews += b2u(r.Bot == Preview)
			}
		}
		if crawlers != v.Crawlers || previews != v.Previews {
			t.Errorf("day %d: %d crawler and %d preview rows, want %d and %d", d, crawlers, previews, v.Crawlers, v.Previews)
		}
	}
	noBots := allRows(t, f, code, RowQuery{From: 0, To: 1 << 50, ExcludeBots: true}, 1000)
	for _, r := range noBots {
		if r.Bot != NotBot {
			t.Fatal("a bot row with ExcludeBots")
		}
	}
	if len(noBots) >= len(rows) {
		t.Errorf("%d rows without bots, %d with", len(noBots), len(rows))
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func TestRowsOfAnHourRange(t *testing.T) {
	f, code := tallied(t)
	from := talliesDay + dayMillis + 2*hour
	rows := allRows(t, f, code, RowQuery{From: from, To: from + hour}, 50)
	if len(rows) == 0 {
		t.Fatal("no rows in the hour")
	}
	for _, r := range rows {
		if r.At < from || r.At >= from+hour {
			t.Fatalf("row at %d outside [%d, %d)", r.At, from, from+hour)
		}
	}
	if rows, _ := f.LinkVisitRows(code, RowQuery{From: from, To: from, Limit: 10}); len(rows.Rows) != 0 || rows.Matched(false) != 0 {
		t.Errorf("an empty range lists %d rows", len(rows.Rows))
	}
	if _, ok := f.LinkVisitRows("nope", RowQuery{To: 1 << 50, Limit: 1}); ok {
		t.Error("rows of a missing link")
	}
}

// TestRowsOfTheCurrentHourAreNotInTheFuture: a row is dated within its
// hour, but in the hour that is still going on, never after the query's
// now: three clicks at 02:07 are listed at 02:00, not at 02:20 and 02:40,
// and in the same place by every later query of that hour.
func TestRowsOfTheCurrentHourAreNotInTheFuture(t *testing.T) {
	f, code := tallied(t)
	from := talliesDay + dayMillis + 2*hour
	for _, tt := range []struct {
		name string
		now  int64
		last int64 // no row after
	}{
		{"seven minutes into the hour", from + 7*60_000, from},
		{"a minute before its end", from + hour - 60_000, from},
		{"at the hour's start", from, from},
		{"the hour is over", from + 3*hour, from + hour - 1},
		{"no now given", 0, from + hour - 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rows := allRows(t, f, code, RowQuery{From: from, To: from + hour, Now: tt.now}, 50)
			if len(rows) == 0 {
				t.Fatal("no rows in the hour")
			}
			for i, r := range rows {
				if r.At < from || r.At > tt.last {
					t.Fatalf("row %d at %d outside [%d, %d]", i, r.At, from, tt.last)
				}
				if i > 0 && r.At > rows[i-1].At {
					t.Fatalf("row %d at %d is newer than the row before it (%d)", i, r.At, rows[i-1].At)
				}
			}
		})
	}
}

func TestTalliesOnlyOnceRaised(t *testing.T) {
	f, _ := tallied(t)
	l, _ := f.Get("t")
	var days []*dayVisits
	for _, d := range engineVisitDays(f, l.ID) {
		days = append(days, d.day)
	}
	tallies := func(d *dayVisits) map[uint8]int {
		out := map[uint8]int{}
		for _, h := range d.tallies {
			out[h.hour] = len(h.tuples)
		}
		return out
	}
	if got := tallies(days[0]); len(got) != 1 || got[5] == 0 {
		t.Errorf("the first day tallies hours %v, want hour 5 only (hour 3 was before the raise)", got)
	}
	h := days[1].tallies[1]
	if h.hour != 2 || h.people() != MaxTuplesPerHour || h.overflow == 0 {
		t.Errorf("the bounded hour keeps %d tuples and %d past the bound, want %d and more than 0", h.people(), h.overflow, MaxTuplesPerHour)
	}
}

func TestTalliesSnapshot(t *testing.T) {
	f, code := tallied(t)
	first := snapshotBytes(t, f)
	if first[len(snapshotMagic)] != snapshotV10 {
		t.Fatalf("version %d", first[len(snapshotMagic)])
	}
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(first)}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, restored), first) {
		t.Fatal("a restored state writes other bytes")
	}
	// The same clicks on both: a new referrer host shifts the restored
	// state's indices as it does the original's.
	more := visitorsAt("n9", 1, talliesDay+2*dayMillis+23*hour,
		ClickCount{Code: code, Count: 2, Visitor: Visitor{Referrer: "a.example", Browser: Firefox}},
		ClickCount{Code: code, Count: 1, Visitor: variedVisitor(8)})
	applyFrom(f, 100, more)
	applyFrom(restored, 100, more)
	if !bytes.Equal(snapshotBytes(t, restored), snapshotBytes(t, f)) {
		t.Fatal("after the same clicks the states differ")
	}
	q := RowQuery{To: 1 << 50}
	if a, b := allRows(t, f, code, q, 1000), allRows(t, restored, code, q, 1000); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("the restored state lists other rows")
	}
}

func TestSnapshotSharesTallies(t *testing.T) {
	f, code := tallied(t)
	before := snapshotBytes(t, f)
	f.mu.Lock()
	snap, err := f.s.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Unlock()
	defer snap.Release()
	// Every change a click makes to a day's tallies: a new host shifting
	// indices, a tuple's count, a new tuple, a new hour.
	applyFrom(f, 100, visitorsAt("n9", 1, talliesDay+2*dayMillis+23*hour,
		ClickCount{Code: code, Count: 2, Visitor: Visitor{Referrer: "a.example"}},
		ClickCount{Code: code, Count: 3, Visitor: variedVisitor(8)}),
		visitorsAt("n9", 2, talliesDay+2*dayMillis+20*hour, ClickCount{Code: code, Count: 1, Visitor: variedVisitor(1)}))
	var buf bytes.Buffer
	if err := snap.writeTo(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), before) {
		t.Fatal("a snapshot saw clicks applied after it was taken")
	}
}

func TestRestoreVersion9(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), create(1000, CreateRequest{URL: "https://example.com/t", CustomCode: "t"}),
		RaiseCommand{To: LevelCerts}.Encode(),
		visitorsAt("n1", 1, talliesDay, ClickCount{Code: "t", Count: 4, Visitor: chromeDE}))
	old := snapshotBytes(t, f)
	if old[len(snapshotMagic)] != snapshotV9 {
		t.Fatalf("version %d, want 9", old[len(snapshotMagic)])
	}
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(old)}); err != nil {
		t.Fatal(err)
	}
	applyFrom(restored, 10, RaiseCommand{To: LevelVisitRows}.Encode(),
		visitorsAt("n1", 2, talliesDay+hour, ClickCount{Code: "t", Count: 1, Visitor: safariUS}))
	rows := allRows(t, restored, "t", RowQuery{To: 1 << 50}, 10)
	if len(rows) != 5 || rows[0].Browser != Safari || rows[4].Browser != Chrome {
		t.Errorf("rows %v, want the tallied Safari first and four paired Chrome", rows)
	}
}

func TestSnapshotRefusesBadTallies(t *testing.T) {
	tests := map[string]func(d *dayVisits){
		"more than the day":  func(d *dayVisits) { d.tallies[0].tuples[0].count += 1000 },
		"unknown referrer":   func(d *dayVisits) { d.tallies[0].tuples[0].t |= 40 << referrerShift },
		"class out of range": func(d *dayVisits) { d.tallies[0].tuples[0].t |= 7 },
		"bot with classes": func(d *dayVisits) {
			d.tallies[0].tuples = append(d.tallies[0].tuples, tupleCount{tuple(Crawler)<<8 | 1, 1})
		},
		"hour out of order":    func(d *dayVisits) { d.tallies = append(d.tallies, d.tallies[0]) },
		"hour 24":              func(d *dayVisits) { d.tallies[len(d.tallies)-1].hour = 24 },
		"empty hour":           func(d *dayVisits) { d.tallies[0].tuples, d.tallies[0].overflow = nil, 0 },
		"overflow past clicks": func(d *dayVisits) { d.tallies[0].overflow = 1 << 30 },
		"past the bound": func(d *dayVisits) {
			h := &d.tallies[0]
			for i := range MaxTuplesPerHour + 1 {
				h.tuples = append(h.tuples, tupleCount{packTuple(&Visitor{Country: [2]byte{'Q', 'A' + byte(i%26)}, Browser: Browser(i / 26)}, otherSlot), 1})
			}
		},
	}
	for name, corrupt := range tests {
		t.Run(name, func(t *testing.T) {
			f, _ := tallied(t)
			l, _ := f.Get("t")
			d := engineVisitDays(f, l.ID)[1].day
			corrupt(d)
			setEngineVisitDay(f, l.ID, d)
			_, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, f)))
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Errorf("ReadSnapshot = %v, want ErrCorruptSnapshot", err)
			}
		})
	}
}

func TestTalliesRetention(t *testing.T) {
	f, code := tallied(t)
	late := talliesDay + 2*dayMillis + ClickRetentionHours*hour
	applyFrom(f, 100, visitorsAt("n9", 1, late, ClickCount{Code: code, Count: 1, Visitor: chromeDE}))
	rows := allRows(t, f, code, RowQuery{To: 1 << 50}, 1000)
	for _, r := range rows {
		if r.At < talliesDay+2*dayMillis {
			t.Fatalf("a row at %d, before retention", r.At)
		}
	}
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, f))}); err != nil {
		t.Fatal(err)
	}
	if got := allRows(t, restored, code, RowQuery{To: 1 << 50}, 1000); len(got) != len(rows) {
		t.Errorf("restored %d rows, want %d", len(got), len(rows))
	}
}

func TestDeleteVisits(t *testing.T) {
	del := func(code, key string) []byte { return VisitsDeleteCommand{Code: code, Now: 5000, KeyID: key}.Encode() }
	t.Run("before the raise", func(t *testing.T) {
		f := New()
		applyAll(t, f, InitCommand{Key: testKey}.Encode(), create(1000, CreateRequest{URL: "https://example.com/t", CustomCode: "t"}))
		if err, _ := applyAll(t, f, del("t", ""))[0].(error); !errors.Is(err, ErrNotRaised) {
			t.Errorf("delete before the raise = %v, want ErrNotRaised", err)
		}
	})
	f, code := tallied(t)
	applyFrom(f, 50, VisitCommand{Code: code, Now: talliesDay + 3*dayMillis, HasVisitor: true, Visitor: slackbot}.Encode())
	l, _ := f.Get(code)
	crawlers, previews := f.BotsInAll(code)
	if got := applyAll(t, f, del("missing", ""))[0]; !errors.Is(got.(error), ErrNotFound) {
		t.Errorf("delete of a missing link = %v", got)
	}
	if got := applyAll(t, f, del(code, "nosuchkey"))[0]; !errors.Is(got.(error), ErrUnauthorized) {
		t.Errorf("delete with an unknown key = %v", got)
	}
	if got, want := applyAll(t, f, del(code, ""))[0], l.Clicks+crawlers+previews; got != want {
		t.Fatalf("deleted %v visits, want %d", got, want)
	}
	l, _ = f.Get(code)
	v, _ := f.LinkVisits(code, 0, 1<<50, ByBrowser)
	hours, _ := f.ClickHours(code, 0, 1<<50)
	rows, _ := f.LinkVisitRows(code, RowQuery{To: 1 << 50, Limit: 10})
	if l.Clicks != 0 || l.LastAccess != 0 || v.Clicks+v.Crawlers+v.Previews != 0 || len(hours) != 0 || rows.Matched(false) != 0 || f.VisitsUsed(code) != 0 {
		t.Errorf("after deleting: %d clicks, %+v, %d hours, %d rows", l.Clicks, v, len(hours), rows.Matched(false))
	}
	if a := f.Audit(AuditQuery{Kind: AuditLinks, Limit: 1})[0]; a.Action != AuditLinkEdit || a.Subject != code {
		t.Errorf("audit %+v", a)
	}
}

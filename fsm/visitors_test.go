package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

var (
	chromeDE   = Visitor{Referrer: "news.example", Country: [2]byte{'D', 'E'}, Browser: Chrome, OS: Windows, Device: DeviceClassDesktop}
	safariUS   = Visitor{Country: [2]byte{'U', 'S'}, Browser: Safari, OS: IOS, Device: DeviceClassMobile}
	unknownWho = Visitor{Referrer: "mail.example"}
	slackbot   = Visitor{Bot: Preview}
	googlebot  = Visitor{Bot: Crawler, Referrer: "ignored.example"}
)

// visitorsAt is a click batch with visitors from node n.
func visitorsAt(n string, seq uint64, now int64, counts ...ClickCount) []byte {
	return ClickBatch{Node: n, Seq: seq, Now: now, Counts: counts, Visitors: true}.Encode()
}

// withVisitors is the workload plus clicks with visitors on two links over
// two days, bots among them, and a batch without visitors.
func withVisitors(t testing.TB) (*FSM, []Link) {
	f := New()
	applyAll(t, f, workload()...)
	links := f.Links()
	a, b := links[0].Code, links[1].Code
	day := int64(20_000) * dayMillis
	applyFrom(f, 1000,
		visitorsAt("p1", 1, day+hour,
			ClickCount{Code: a, Count: 3, Visitor: chromeDE},
			ClickCount{Code: a, Count: 2, Visitor: safariUS},
			ClickCount{Code: a, Count: 4, Visitor: slackbot},
			ClickCount{Code: b, Count: 1, Visitor: unknownWho}),
		visitorsAt("p2", 1, day+dayMillis+5,
			ClickCount{Code: a, Count: 1, Visitor: safariUS},
			ClickCount{Code: a, Count: 2, Visitor: googlebot}),
		clickAt("p3", 1, day+dayMillis+6, ClickCount{Code: a, Count: 7}),                        // an older build's batch
		visitorsAt("p2", 1, day+2*dayMillis, ClickCount{Code: a, Count: 50, Visitor: chromeDE}), // a retry: ignored
	)
	return f, links
}

func TestVisitBreakdowns(t *testing.T) {
	f, links := withVisitors(t)
	a := links[0].Code
	day := int64(20_000) * dayMillis
	tests := []struct {
		by   Dimension
		want []VisitGroup
	}{
		{ByCountry, []VisitGroup{{"US", 3}, {"DE", 3}}},
		{ByBrowser, []VisitGroup{{"chrome", 3}, {"safari", 3}}},
		{ByOS, []VisitGroup{{"ios", 3}, {"windows", 3}}},
		{ByDevice, []VisitGroup{{"desktop", 3}, {"mobile", 3}}},
		{ByReferrer, []VisitGroup{{"direct", 3}, {"news.example", 3}}},
		{ByNothing, nil},
	}
	for _, tt := range tests {
		t.Run(tt.by.String(), func(t *testing.T) {
			v, ok := f.LinkVisits(a, 0, 1<<50, tt.by)
			if !ok {
				t.Fatal("link not found")
			}
			// Ties are ordered by value; sort the want the same way.
			want := tt.want
			if len(want) == 2 && want[0].Clicks == want[1].Clicks && want[0].Value > want[1].Value {
				want = []VisitGroup{want[1], want[0]}
			}
			if !reflect.DeepEqual(v.Groups, want) {
				t.Errorf("groups = %v, want %v", v.Groups, want)
			}
			if v.Clicks != 6 || v.Crawlers != 2 || v.Previews != 4 {
				t.Errorf("clicks %d crawlers %d previews %d, want 6, 2, 4", v.Clicks, v.Crawlers, v.Previews)
			}
			wantDays := []DayClicks{{day, 5, 0, 4}, {day + dayMillis, 1, 2, 0}}
			if !reflect.DeepEqual(v.Days, wantDays) {
				t.Errorf("days = %v, want %v", v.Days, wantDays)
			}
		})
	}
	// Bots stay out of the clicks; the older build's batch is in them
	// without a breakdown.
	if l, _ := f.Get(a); l.Clicks != 6+7 {
		t.Fatalf("clicks of a = %d, want 13", l.Clicks)
	}
	if c, p := f.BotsInAll(a); c != 2 || p != 4 {
		t.Fatalf("bots in all = %d, %d; want 2, 4", c, p)
	}
	// One day only.
	v, _ := f.LinkVisits(a, day+dayMillis, day+dayMillis+1, ByCountry)
	if want := []VisitGroup{{"US", 1}}; !reflect.DeepEqual(v.Groups, want) || v.Crawlers != 2 || v.Previews != 0 {
		t.Fatalf("second day: %+v", v)
	}
	// A visitor whose classes are unknown counts as other and XX.
	v, _ = f.LinkVisits(links[1].Code, 0, 1<<50, ByCountry)
	if want := []VisitGroup{{"XX", 1}}; !reflect.DeepEqual(v.Groups, want) {
		t.Fatalf("unknown country: %v", v.Groups)
	}
}

func TestWorkspaceVisits(t *testing.T) {
	f, links := withVisitors(t)
	v := f.WorkspaceVisits(nil, Filter{AnyDomain: true}, 0, 1<<50, ByReferrer)
	want := []VisitGroup{{"direct", 3}, {"news.example", 3}, {"mail.example", 1}}
	if !reflect.DeepEqual(v.Groups, want) || v.Clicks != 7 || v.Links != len(links) {
		t.Fatalf("every workspace: %+v", v)
	}
	if v := f.WorkspaceVisits([]string{"nobody"}, Filter{AnyDomain: true}, 0, 1<<50, ByReferrer); v.Clicks != 0 || v.Links != 0 {
		t.Fatalf("an unknown workspace: %+v", v)
	}
}

func TestReferrerHostsAreBounded(t *testing.T) {
	f := New()
	applyAll(t, f, workload()...)
	a := f.Links()[0].Code
	var counts []ClickCount
	for i := range MaxReferrersPerDay + 5 {
		counts = append(counts, ClickCount{Code: a, Count: 2, Visitor: Visitor{Referrer: fmt.Sprintf("r%02d.example", i)}})
	}
	applyFrom(f, 1000, visitorsAt("p1", 1, 20_000*dayMillis, counts...))
	// A later click of a host that got a place still counts for it.
	applyFrom(f, 1001, visitorsAt("p1", 2, 20_000*dayMillis+1, ClickCount{Code: a, Count: 1, Visitor: Visitor{Referrer: "r00.example"}}))
	v, _ := f.LinkVisits(a, 0, 1<<50, ByReferrer)
	if len(v.Groups) != MaxReferrersPerDay+1 || v.Groups[0] != (VisitGroup{"other", 10}) || v.Groups[1] != (VisitGroup{"r00.example", 3}) {
		t.Fatalf("groups: %v", v.Groups)
	}
	var sum uint64
	for _, g := range v.Groups {
		sum += g.Clicks
	}
	if sum != v.Clicks {
		t.Fatalf("groups sum to %d, clicks %d", sum, v.Clicks)
	}
}

func TestVisitorsSurviveSnapshots(t *testing.T) {
	f, links := withVisitors(t)
	data := snapshotBytes(t, f)
	if data[len(snapshotMagic)] != snapshotV6 || f.Level() != LevelVisits {
		t.Fatalf("a state with visitors: snapshot version %d, level %d", data[len(snapshotMagic)], f.Level())
	}
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, restored), data) {
		t.Fatal("a restored state's snapshot differs from the original")
	}
	for _, l := range links[:3] {
		for by := ByNothing; by <= ByCountry; by++ {
			want, _ := f.LinkVisits(l.Code, 0, 1<<50, by)
			if got, _ := restored.LinkVisits(l.Code, 0, 1<<50, by); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s by %v after restore: %+v, want %+v", l.Code, by, got, want)
			}
		}
	}
}

// TestVisitorsAreAPointInTime changes what a snapshot shares between
// taking it and writing it: the snapshot must hold the state as taken.
func TestVisitorsAreAPointInTime(t *testing.T) {
	f, links := withVisitors(t)
	a := links[0].Code
	want := snapshotBytes(t, f)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	day := int64(20_000) * dayMillis
	applyFrom(f, 5000,
		visitorsAt("p1", 9, day+2*hour, ClickCount{Code: a, Count: 5, Visitor: chromeDE}, ClickCount{Code: a, Count: 1, Visitor: Visitor{Referrer: "new.example"}}),
		visitorsAt("p1", 10, day+3*dayMillis, ClickCount{Code: a, Count: 1, Visitor: slackbot}),
		DeleteCommand{Code: links[1].Code, Now: day}.Encode(),
	)
	var buf bytes.Buffer
	if err := snap.(*snapshot).writeTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatal("changes applied after the snapshot was taken reached it")
	}
}

func TestVisitorsRetention(t *testing.T) {
	f, links := withVisitors(t)
	a := links[0].Code
	// Both days of withVisitors end more than 90 days before this batch.
	last := int64(20_000)*dayMillis + ClickRetentionHours*hour + 2*dayMillis
	applyFrom(f, 2000, visitorsAt("p1", 10, last, ClickCount{Code: a, Count: 1, Visitor: safariUS}))
	v, _ := f.LinkVisits(a, 0, 1<<50, ByCountry)
	if want := []VisitGroup{{"US", 1}}; !reflect.DeepEqual(v.Groups, want) || v.Previews+v.Crawlers != 0 {
		t.Fatalf("after retention: %+v", v)
	}
	if c, p := f.BotsInAll(a); c != 2 || p != 4 {
		t.Fatalf("bots in all after retention = %d, %d; want 2, 4", c, p)
	}
}

func TestBotsUseUpALimitedLink(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(),
		create(1000, CreateRequest{URL: "https://example.com/once", CustomCode: "once", Options: &Options{MaxVisits: 2}}))
	visit := func(v Visitor) any {
		return applyAll(t, f, VisitCommand{Code: "once", Now: 2000, HasVisitor: true, Visitor: v}.Encode())[0]
	}
	if err := visit(slackbot); err != nil {
		t.Fatalf("first visit, a previewer: %v", err)
	}
	if err := visit(chromeDE); err != nil {
		t.Fatalf("second visit: %v", err)
	}
	if err := visit(chromeDE); !errors.Is(err.(error), ErrVisitLimit) {
		t.Fatalf("third visit: %v, want the limit", err)
	}
	if l, _ := f.Get("once"); l.Clicks != 1 {
		t.Fatalf("clicks = %d, want 1 (the previewer is a bot)", l.Clicks)
	}
}

func TestVisitorEncoding(t *testing.T) {
	for _, v := range []Visitor{chromeDE, safariUS, slackbot, {}} {
		got, err := DecodeVisitor(EncodeVisitor(v))
		if err != nil || got != v {
			t.Fatalf("round trip of %+v: %+v, %v", v, got, err)
		}
	}
	bad := []Visitor{
		{Browser: browserCount}, {OS: osCount}, {Device: deviceCount}, {Bot: botCount},
		{Country: [2]byte{'d', 'e'}}, {Country: [2]byte{'D', 0}},
		{Referrer: "Upper.example"}, {Referrer: "a b"}, {Referrer: "direct"}, {Referrer: "other"},
		{Referrer: string(make([]byte, MaxReferrerLen+1))},
	}
	for _, v := range bad {
		if _, err := DecodeVisitor(EncodeVisitor(v)); err == nil {
			t.Errorf("%+v decoded", v)
		}
		if _, err := DecodeCommand(visitorsAt("n", 1, 1, ClickCount{Code: "x", Count: 1, Visitor: v})); err == nil {
			t.Errorf("a batch with %+v decoded", v)
		}
	}
}

func TestBatchWithoutVisitors(t *testing.T) {
	b := ClickBatch{Node: "n", Seq: 3, Now: 9, Visitors: true, Counts: []ClickCount{
		{Code: "a", Count: 2, Visitor: chromeDE}, {Code: "a", Count: 1, Visitor: safariUS},
		{Code: "a", Count: 5, Visitor: slackbot}, {Code: "b", Count: 4, Visitor: googlebot},
		{Code: "c", Count: 1, Visitor: unknownWho},
	}}
	want := ClickBatch{Node: "n", Seq: 3, Now: 9, Counts: []ClickCount{{Code: "a", Count: 3}, {Code: "c", Count: 1}}}
	got := b.WithoutVisitors()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("WithoutVisitors = %+v, want %+v", got, want)
	}
	if RequiredLevel(got.Encode()) != LevelKeys || RequiredLevel(b.Encode()) != LevelVisits {
		t.Fatal("a batch with visitors must need LevelVisits, one without LevelKeys")
	}
}

// TestStepDay: a snapshot names its days as steps forward from the one
// before; a step that stands still, wraps past the top of 64 bits back to
// an earlier day, or lands outside the days kept is refused.
func TestStepDay(t *testing.T) {
	const oldest, newest = 20000, 20100
	for _, c := range []struct {
		name        string
		day, step   uint64
		first, want bool
	}{
		{"first day", 0, 20050, true, true},
		{"next day", 20050, 1, false, true},
		{"the newest", 20050, 50, false, true},
		{"past the newest", 20050, 51, false, false},
		{"standing still", 20050, 0, false, false},
		{"wrapping back a day", 20051, ^uint64(0), false, false},
		{"32-bit underflow", 20051, 1<<32 - 1, false, false},
		{"before the oldest", 0, 19999, true, false},
	} {
		if _, ok := stepDay(c.day, c.step, c.first, oldest, newest); ok != c.want {
			t.Errorf("%s: day %d, step %d: %v, want %v", c.name, c.day, c.step, ok, c.want)
		}
	}
}

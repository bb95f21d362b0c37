package httpd

import (
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

func TestParseSeriesRange(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 17, 5, 0, time.UTC)
	at := func(s string) int64 {
		ts, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return ts.UnixMilli()
	}
	tests := []struct {
		query    string
		interval string
		from, to string
		points   int64
		err      string
	}{
		{query: "", interval: "hour", from: "2026-11-22T11:00:00Z", to: "2026-11-23T11:00:00Z", points: 24},
		{query: "interval=day", interval: "day", from: "2026-10-25T00:00:00Z", to: "2026-11-24T00:00:00Z", points: 30},
		{query: "from=2026-11-23T08:30:00Z&to=2026-11-23T09:00:00Z", interval: "hour", from: "2026-11-23T08:00:00Z", to: "2026-11-23T09:00:00Z", points: 1},
		{query: "from=2026-11-23T08:30:00%2B02:00", interval: "hour", from: "2026-11-23T06:00:00Z", to: "2026-11-23T11:00:00Z", points: 5},
		{query: "to=2026-11-20T00:00:01Z&interval=day", interval: "day", from: "2026-10-22T00:00:00Z", to: "2026-11-21T00:00:00Z", points: 30},
		{query: "from=1969-12-31T22:30:00Z&to=1970-01-01T01:00:00Z", interval: "hour", from: "1969-12-31T22:00:00Z", to: "1970-01-01T01:00:00Z", points: 3},
		{query: "from=2026-08-25T11:00:00Z", interval: "hour", from: "2026-08-25T11:00:00Z", to: "2026-11-23T11:00:00Z", points: fsm.ClickRetentionHours},
		{query: "from=2026-08-25T10:00:00Z", err: "spans 2161 hours"},
		{query: "interval=week", err: `interval "week"`},
		{query: "from=yesterday", err: "RFC 3339"},
		{query: "to=2026-11-23", err: "RFC 3339"},
		{query: "from=2026-11-23T10:00:00Z&to=2026-11-23T10:00:00Z", err: "before to"},
		{query: "from=2026-11-23T12:00:00Z&to=2026-11-23T10:00:00Z", err: "before to"},
		{query: "from=2024-01-01T00:00:00Z&interval=day", err: "at most 366"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			var args fasthttp.Args
			args.Parse(tt.query)
			r, err := parseSeriesRange(&args, now)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.interval != tt.interval || r.from != at(tt.from) || r.to != at(tt.to) || (r.to-r.from)/r.step != tt.points {
				t.Fatalf("got %s [%s, %s) %d points; want %s [%s, %s) %d",
					r.interval, timestamp(r.from), timestamp(r.to), (r.to-r.from)/r.step, tt.interval, tt.from, tt.to, tt.points)
			}
		})
	}
}

func TestClickSeriesIsDense(t *testing.T) {
	day := (24 * time.Hour).Milliseconds()
	hour := time.Hour.Milliseconds()
	from := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC).UnixMilli()
	r := seriesRange{interval: "day", step: day, from: from, to: from + 3*day}
	got := clickSeries(r, []fsm.HourClicks{{Start: from + 2*hour, Clicks: 3}, {Start: from + 23*hour, Clicks: 1}, {Start: from + 2*day, Clicks: 5}})
	want := []seriesPoint{
		{"2026-11-20T00:00:00.000Z", 4},
		{"2026-11-21T00:00:00.000Z", 0},
		{"2026-11-22T00:00:00.000Z", 5},
	}
	if len(got) != len(want) {
		t.Fatalf("%d points, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("point %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

package compat

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestParseBitlink(t *testing.T) {
	cases := []struct {
		id           string
		domain, code string
		ok           bool
	}{
		{"bit.ly/abc123", "", "abc123", true},
		{"BIT.LY/abc123", "", "abc123", true},
		{"sho.rt/abc123", "", "abc123", true}, // the default domain's own name
		{"10.0.0.7:8080/abc", "", "abc", true},
		{"https://bit.ly/abc", "", "abc", true},
		{"HTTP://Brand.example/abc", "brand.example", "abc", true},
		{"brand.example/abc", "brand.example", "abc", true},
		{"abc", "", "abc", true}, // a bare hash: the default domain
		{"bit.ly/", "", "", false},
		{"/abc", "", "", false},
		{"", "", "", false},
	}
	for _, c := range cases {
		r, ok := parseBitlink(c.id, "sho.rt", "10.0.0.7:8080")
		if ok != c.ok || ok && (r.domain != c.domain || r.code != c.code) {
			t.Errorf("parseBitlink(%q) = %+v, %v; want %q %q %v", c.id, r, ok, c.domain, c.code, c.ok)
		}
	}
}

func TestSplitBitlinkPath(t *testing.T) {
	cases := []struct{ path, id, rest string }{
		{"bit.ly/abc", "bit.ly/abc", ""},
		{"bit.ly/abc/clicks/summary", "bit.ly/abc", "clicks/summary"},
		{"localhost:8080/abc/referrers", "localhost:8080/abc", "referrers"},
		{"abc/clicks", "abc", "clicks"}, // a code has no dot: a bare hash
		{"abc", "abc", ""},
	}
	for _, c := range cases {
		if id, rest := splitBitlinkPath(c.path); id != c.id || rest != c.rest {
			t.Errorf("splitBitlinkPath(%q) = %q, %q; want %q, %q", c.path, id, rest, c.id, c.rest)
		}
	}
}

func TestBitlyEdit(t *testing.T) {
	cases := []struct {
		in, want, field string
	}{
		{`{"title":"T","tags":["a"],"long_url":"https://example.com/"}`, `{"original_url":"https://example.com/","tags":["a"],"title":"T"}`, ""},
		{`{"title":null,"tags":null}`, `{"tags":[],"title":""}`, ""},
		// A bitlink read and sent back whole: the read-only fields change nothing.
		{`{"id":"bit.ly/x","link":"https://bit.ly/x","references":{},"created_at":"x","archived":false,"deeplinks":[],"domain":"bit.ly"}`, `{}`, ""},
		{`{"archived":true}`, ``, "archived"},
		{`{"deeplinks":[{"app_uri_path":"/x"}]}`, ``, "deeplinks"},
		{`{"long_url":""}`, ``, "long_url"},
		{`{"tags":"a"}`, ``, "tags"},
		{`{"group_guid":"g"}`, ``, "group_guid"},
		{`[]`, ``, "body"},
	}
	for _, c := range cases {
		got, ferr := bitlyEdit([]byte(c.in))
		switch {
		case c.field != "":
			if ferr == nil || ferr.Field != c.field {
				t.Errorf("bitlyEdit(%s): %+v, want a refusal of %s", c.in, ferr, c.field)
			}
		case ferr != nil:
			t.Errorf("bitlyEdit(%s): %+v", c.in, ferr)
		default:
			if b, _ := json.Marshal(got); string(b) != c.want {
				t.Errorf("bitlyEdit(%s) = %s, want %s", c.in, b, c.want)
			}
		}
	}
}

func TestBitlyCreateBody(t *testing.T) {
	cases := []struct {
		name string
		in   bitlyCreate
		want map[string]any
		err  string
	}{
		{"bit.ly is the default domain", bitlyCreate{LongURL: "https://e.example/", Domain: "bit.ly"},
			map[string]any{"url": "https://e.example/", "dedupe": true, "domain": nil}, ""},
		{"the default domain by name", bitlyCreate{LongURL: "https://e.example/", Domain: "SHO.RT"}, map[string]any{"domain": nil}, ""},
		{"another domain", bitlyCreate{LongURL: "https://e.example/", Domain: "brand.example"}, map[string]any{"domain": "brand.example"}, ""},
		{"a group is a workspace", bitlyCreate{LongURL: "https://e.example/", GroupGUID: "team", Title: "T", Tags: []string{"a"}},
			map[string]any{"workspace": "team", "title": "T"}, ""},
		{"no long_url", bitlyCreate{Domain: "bit.ly"}, nil, "long_url"},
		{"deeplinks", bitlyCreate{LongURL: "https://e.example/", Deeplinks: []json.RawMessage{json.RawMessage(`{}`)}}, nil, "deeplinks"},
	}
	for _, c := range cases {
		got, ferr := c.in.native("sho.rt")
		if c.err != "" {
			if ferr == nil || ferr.Field != c.err {
				t.Errorf("%s: %+v, want a refusal of %s", c.name, ferr, c.err)
			}
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s = %#v, want %#v", c.name, k, got[k], v)
			}
		}
	}
}

func TestMetricsQuery(t *testing.T) {
	now := time.Date(2026, 11, 26, 15, 30, 0, 0, time.UTC) // a Thursday
	kept := keptHours(now)                                 // 2026-08-28T16:00:00Z
	cases := []struct {
		query    string
		from, to string
		field    string
	}{
		{"", "2026-08-29T00:00:00Z", "2026-11-27T00:00:00Z", ""}, // day, all kept
		{"unit=day&units=3&size=50&unit_reference=", "2026-11-24T00:00:00Z", "2026-11-27T00:00:00Z", ""},
		{"unit=hour&units=2", "2026-11-26T14:00:00Z", "2026-11-26T16:00:00Z", ""},
		{"unit=week&units=2", "2026-11-16T00:00:00Z", "2026-11-30T00:00:00Z", ""}, // weeks from Monday
		{"unit=month&units=1&unit_reference=2026-10-05T10:00:00%2B0000", "2026-10-01T00:00:00Z", "2026-11-01T00:00:00Z", ""},
		{"unit=month&units=4", "", "", "units"}, // August is not kept whole
		{"unit=month&units=-1", "2026-09-01T00:00:00Z", "2026-12-01T00:00:00Z", ""},
		{"unit=hour&units=-1", "2026-08-28T16:00:00Z", "2026-11-26T16:00:00Z", ""},
		{"unit=day&units=90", "2026-08-29T00:00:00Z", "2026-11-27T00:00:00Z", ""},
		{"unit=day&units=91", "", "", "units"},
		{"unit=minute", "", "", "unit"},
		{"unit=year", "", "", "unit"},
		{"units=0", "", "", "units"},
		{"units=-2", "", "", "units"},
		{"unit_reference=yesterday", "", "", "unit_reference"},
		{"size=0", "", "", "size"},
	}
	for _, c := range cases {
		var args fasthttp.Args
		args.Parse(c.query)
		q, ferr := parseMetricsQuery(&args, now)
		var from, to time.Time
		var err error
		if ferr == nil {
			from, to, err = q.span(kept)
		}
		field := ""
		switch {
		case ferr != nil:
			field = ferr.Field
		case err != nil:
			field = "units"
		}
		if field != c.field {
			t.Errorf("%q: refused %q (%v %v), want %q", c.query, field, ferr, err, c.field)
			continue
		}
		if field == "" && (from.Format(time.RFC3339) != c.from || to.Format(time.RFC3339) != c.to) {
			t.Errorf("%q: [%s, %s), want [%s, %s)", c.query, from.Format(time.RFC3339), to.Format(time.RFC3339), c.from, c.to)
		}
	}
}

func TestBucketClicks(t *testing.T) {
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t }
	points := []clickPoint{
		{at("2026-11-15T00:00:00Z"), 1}, // a Sunday: the week before
		{at("2026-11-16T00:00:00Z"), 2},
		{at("2026-11-22T00:00:00Z"), 3},
		{at("2026-11-23T00:00:00Z"), 4},
	}
	got := bucketClicks("week", at("2026-11-16T00:00:00Z"), at("2026-11-30T00:00:00Z"), points)
	b, _ := json.Marshal(got)
	if want := `[{"clicks":4,"date":"2026-11-23T00:00:00+0000"},{"clicks":5,"date":"2026-11-16T00:00:00+0000"}]`; string(b) != want {
		t.Errorf("weeks: %s, want %s", b, want)
	}
}

func TestTopMetrics(t *testing.T) {
	groups := []metric{{"b.example", 2}, {"direct", 5}, {"a.example", 2}, {"c.example", 1}}
	got := topMetrics(groups, 3)
	var names []string
	for _, m := range got {
		names = append(names, m.Value)
	}
	if strings.Join(names, ",") != "direct,a.example,b.example" {
		t.Errorf("topMetrics = %v", got)
	}
	if groups[0].Value != "b.example" {
		t.Error("topMetrics sorted its argument")
	}
	if got := topMetrics(nil, 50); got == nil || len(got) != 0 {
		t.Errorf("topMetrics(nil) = %#v, want an empty list", got)
	}
}

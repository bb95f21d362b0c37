package compat

import (
	"encoding/json"
	"fmt"
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

// TestParseBitlyList reads getBitlinksByGroup's query parameters as
// Bitly's v4 spec lists them (size, page, search_after, query, keyword,
// created_before/after, tags, archived and the other on/off/both
// filters), refusing those linkraft cannot honour.
func TestParseBitlyList(t *testing.T) {
	cases := []struct {
		query string
		want  string // the query read, as %+v of its parts
		field string // the refused field
	}{
		{"", "size=50 page=1 after=0 text= tags=[] none=false", ""},
		{"size=10&page=3&search_after=42", "size=10 page=3 after=42 text= tags=[] none=false", ""},
		{"query=abc&keyword=abc&tags=a&tags[]=b", "size=50 page=1 after=0 text=abc tags=[a b] none=false", ""},
		{"archived=off&deeplinks=both&custom_bitlink=off&has_qr_codes=both", "size=50 page=1 after=0 text= tags=[] none=false", ""},
		{"archived=on", "size=50 page=1 after=0 text= tags=[] none=true", ""},
		{"has_qr_codes=on", "size=50 page=1 after=0 text= tags=[] none=true", ""},
		{"size=&unit_reference=", "size=50 page=1 after=0 text= tags=[] none=false", ""}, // empty: absent, even unknown
		{"size=1001", "", "size"},
		{"page=0", "", "page"},
		{"search_after=-1", "", "search_after"},
		{"query=a&keyword=b", "", "keyword"},
		{"created_before=yesterday", "", "created_before"},
		{"archived=yes", "", "archived"},
		{"is_expired=maybe", "", "is_expired"},
		{"encoding_login=chauncey", "", "encoding_login"},
		{"launchpad_ids=M1", "", "launchpad_ids"},
		{"channel_guid=Ha1", "", "channel_guid"},
		{"sort=clicks", "", "sort"},
	}
	for _, c := range cases {
		var args fasthttp.Args
		args.Parse(c.query)
		q, ferr := parseBitlyList(&args)
		switch {
		case c.field != "":
			if ferr == nil || ferr.Field != c.field {
				t.Errorf("%q: %+v, want a refusal of %s", c.query, ferr, c.field)
			}
		case ferr != nil:
			t.Errorf("%q: %+v", c.query, ferr)
		default:
			tags := q.tags
			if tags == nil {
				tags = []string{}
			}
			got := fmt.Sprintf("size=%d page=%d after=%d text=%s tags=%v none=%v", q.size, q.page, q.after, q.text, tags, q.none)
			if got != c.want {
				t.Errorf("%q: %s, want %s", c.query, got, c.want)
			}
		}
	}
}

// TestBitlyListKeeps applies the filters linkraft's list leaves to the
// adapter: created_before/after (Unix seconds, strictly), tags (any),
// hostname_path_query (host and path, without the query), is_expired and
// has_expiration.
func TestBitlyListKeeps(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	past, future := "2029-12-31T00:00:00Z", "2030-06-01T00:00:00Z"
	links := map[string]Link{
		"old":     {CreatedAt: "2029-01-01T00:00:00Z", OriginalURL: "https://Sub.Example.com/Path?x=needle", Tags: []string{"A"}},
		"new":     {CreatedAt: "2029-12-01T00:00:00Z", OriginalURL: "https://example.org/other", Tags: []string{"b"}},
		"expired": {CreatedAt: "2029-12-01T00:00:00Z", OriginalURL: "https://example.org/x", ExpiresAt: &past},
		"expires": {CreatedAt: "2029-12-01T00:00:00Z", OriginalURL: "https://example.org/y", ExpiresAt: &future},
	}
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t }
	cases := []struct {
		name  string
		q     bitlyListQuery
		keeps string
	}{
		{"no filter", bitlyListQuery{}, "expired,expires,new,old"},
		{"created before", bitlyListQuery{createdBefore: at("2029-12-01T00:00:00Z")}, "old"},
		{"created after", bitlyListQuery{createdAfter: at("2029-01-01T00:00:00Z")}, "expired,expires,new"},
		{"any of two tags", bitlyListQuery{tags: []string{"a", "B"}}, "new,old"},
		{"host and path", bitlyListQuery{hostPath: "example.com/path"}, "old"},
		{"not the query", bitlyListQuery{hostPath: "needle"}, ""},
		{"expired", bitlyListQuery{expired: "on"}, "expired"},
		{"not expired", bitlyListQuery{expired: "off"}, "expires,new,old"},
		{"with an expiry", bitlyListQuery{expiring: "on"}, "expired,expires"},
		{"without one", bitlyListQuery{expiring: "off"}, "new,old"},
	}
	for _, c := range cases {
		var kept []string
		for _, name := range []string{"expired", "expires", "new", "old"} {
			l := links[name]
			if c.q.keeps(&l, now) {
				kept = append(kept, name)
			}
		}
		if got := strings.Join(kept, ","); got != c.keeps {
			t.Errorf("%s: keeps %s, want %s", c.name, got, c.keeps)
		}
	}
}

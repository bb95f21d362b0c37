package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestKuttIDRoundTrip(t *testing.T) {
	for _, id := range []uint64{1, 42, 1 << 28, 1<<40 + 7, 1<<63 + 12345, ^uint64(0)} {
		s := kuttID(id)
		if len(s) != 36 || s[14] != '8' || !strings.ContainsRune("89ab", rune(s[19])) {
			t.Errorf("kuttID(%d) = %s: not a version 8 UUID", id, s)
		}
		if got, ok := linkIDOf(s); !ok || got != id {
			t.Errorf("linkIDOf(kuttID(%d)) = %d, %v", id, got, ok)
		}
	}
	for _, s := range []string{"kutt-1", "00000000-0000-4000-8000-000000000000", "6c6b7266-0000-8000-8000-0000f0000000"} {
		if _, ok := linkIDOf(s); ok {
			t.Errorf("linkIDOf(%q) took it", s)
		}
	}
}

func TestExpireIn(t *testing.T) {
	cases := []struct {
		in   string
		secs int64
		ok   bool
	}{
		{"2 hours", 7200, true}, {"30m", 1800, true}, {"1 day", 86400, true}, {"1.5h", 5400, true},
		{"2 weeks", 14 * 86400, true}, {"1 minute", 60, true},
		{"30 seconds", 0, false}, {"soon", 0, false}, {"2 fortnights", 0, false}, {"-1 hour", 0, false}, {"", 0, false},
	}
	for _, c := range cases {
		secs, err := expireIn(c.in)
		if (err == nil) != c.ok || secs != c.secs {
			t.Errorf("expireIn(%q) = %d, %v; want %d, ok %v", c.in, secs, err, c.secs, c.ok)
		}
	}
}

func TestShlinkListQuery(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	max := uint64(3)
	past := "2029-12-31T00:00:00Z"
	links := map[string]Link{
		"ab":      {ShortCode: "ab", Tags: []string{"A", "b"}, CreatedAt: "2029-06-01T00:00:00Z"},
		"a":       {ShortCode: "a", Tags: []string{"a"}, CreatedAt: "2029-01-01T00:00:00Z"},
		"full":    {ShortCode: "full", MaxVisits: &max, ClickCount: 3, CreatedAt: "2029-06-01T00:00:00Z"},
		"expired": {ShortCode: "expired", ExpiresAt: &past, CreatedAt: "2029-06-01T00:00:00Z"},
	}
	cases := []struct {
		query string
		keeps []string
		err   bool
	}{
		{"", []string{"ab", "a", "full", "expired"}, false},
		{"tags[]=a&tags[]=b", []string{"ab", "a"}, false},
		{"tags[]=a&tags[]=b&tagsMode=all", []string{"ab"}, false},
		{"excludeTags[]=b", []string{"a", "full", "expired"}, false},
		{"startDate=2029-03-01T00:00:00%2B00:00", []string{"ab", "full", "expired"}, false},
		{"endDate=2029-03-01T00:00:00Z", []string{"a"}, false},
		{"excludeMaxVisitsReached=true&excludePastValidUntil=true", []string{"ab", "a"}, false},
		{"tagsMode=some", nil, true},
		{"orderBy=visits-UP", nil, true},
		{"itemsPerPage=0", nil, true},
		{"startDate=yesterday", nil, true},
	}
	for _, c := range cases {
		var args fasthttp.Args
		args.Parse(c.query)
		q, err := parseShlinkList(&args, "sho.rt")
		if (err != nil) != c.err {
			t.Errorf("%q: error %v, want error %v", c.query, err, c.err)
			continue
		}
		if c.err {
			continue
		}
		var kept []string
		for _, name := range []string{"ab", "a", "full", "expired"} {
			l := links[name]
			if q.keeps(&l, now) {
				kept = append(kept, name)
			}
		}
		if strings.Join(kept, ",") != strings.Join(c.keeps, ",") {
			t.Errorf("%q keeps %v, want %v", c.query, kept, c.keeps)
		}
	}
}

func TestShlinkCreateAndEditBodies(t *testing.T) {
	long := "https://example.com/"
	no := false
	str := func(s string) *string { return &s }
	cases := []struct {
		name string
		in   shlinkCreate
		want map[string]any
		err  bool
	}{
		{"forwardQuery defaults to true", shlinkCreate{LongURL: &long}, map[string]any{"url": long, "forward_query": true}, false},
		{"forwardQuery false", shlinkCreate{LongURL: &long, ForwardQuery: &no}, map[string]any{"forward_query": false}, false},
		{"findIfExists", shlinkCreate{LongURL: &long, FindIfExists: true}, map[string]any{"dedupe": true}, false},
		{"default domain by name", shlinkCreate{LongURL: &long, Domain: str("SHO.RT")}, map[string]any{"domain": nil}, false},
		{"other domain", shlinkCreate{LongURL: &long, Domain: str("brand.example")}, map[string]any{"domain": "brand.example"}, false},
		{"no url", shlinkCreate{}, nil, true},
		{"crawlable", shlinkCreate{LongURL: &long, Crawlable: true}, map[string]any{"crawlable": true}, false},
	}
	for _, c := range cases {
		got, _, err := c.in.nativeCreate("sho.rt", false)
		if (err != nil) != c.err {
			t.Errorf("%s: error %v", c.name, err)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s = %#v, want %#v", c.name, k, got[k], v)
			}
		}
	}
	edits := []struct {
		in, want string
		err      bool
	}{
		{`{"title":null,"tags":null,"maxVisits":null}`, `{"max_visits":null,"tags":[],"title":""}`, false},
		{`{"validUntil":"2030-01-01T01:00:00+01:00","forwardQuery":false}`, `{"expires_at":"2030-01-01T00:00:00Z","forward_query":false}`, false},
		{`{"crawlable":false,"validateUrl":true}`, `{"crawlable":false}`, false},
		{`{"crawlable":true}`, `{"crawlable":true}`, false},
		{`{"crawlable":null}`, `{"crawlable":false}`, false},
		{`{"shortCode":"x"}`, ``, true},
		{`{"validSince":"tomorrow"}`, ``, true},
	}
	for _, e := range edits {
		got, err := nativeEdit([]byte(e.in), func() bool { return false })
		if (err != nil) != e.err {
			t.Errorf("edit %s: error %v", e.in, err)
			continue
		}
		if b, _ := json.Marshal(got); !e.err && string(b) != e.want {
			t.Errorf("edit %s = %s, want %s", e.in, b, e.want)
		}
	}
}

// TestShlinkPastValidUntil: a past validUntil goes to linkraft's create
// and edit as their expiry when the cluster keeps disabled links
// (Native's AllowPastExpiry), as Shlink takes it
// (CreateShortUrlTest::createsShortUrlWithValidUntil,
// EditShortUrlTest::metadataCanBeReset); until then it is refused naming
// validUntil. The edit asks for any validUntil (one may pass on its way to
// the leader), and a later one goes through either way.
func TestShlinkPastValidUntil(t *testing.T) {
	long, past, future := "https://example.com/", "2001-02-03T04:05:06+00:00", "2999-01-01T00:00:00+00:00"
	for _, pastOK := range []bool{false, true} {
		body, _, err := (&shlinkCreate{LongURL: &long, ValidUntil: &past}).nativeCreate("sho.rt", pastOK)
		if pastOK && (err != nil || body["expires_at"] != "2001-02-03T04:05:06Z") {
			t.Errorf("create taking a past validUntil: %v %v", body, err)
		}
		if r, ok := err.(refusal); !pastOK && (!ok || r.field != "validUntil") {
			t.Errorf("create refusing a past validUntil: %v", err)
		}
		asked := false
		edit, err := nativeEdit([]byte(`{"validUntil":"`+past+`"}`), func() bool { asked = true; return pastOK })
		if !asked || (err == nil) != pastOK || pastOK && string(edit["expires_at"]) != `"2001-02-03T04:05:06Z"` {
			t.Errorf("edit to a past validUntil (taken: %v): %s %v", pastOK, edit["expires_at"], err)
		}
	}
	asked := false
	if _, err := nativeEdit([]byte(`{"validUntil":"`+future+`"}`), func() bool { asked = true; return false }); err != nil || !asked {
		t.Errorf("edit to a later validUntil: %v, asked %v", err, asked)
	}
}

func TestYOURLSDocAndCallback(t *testing.T) {
	d := doc{{"statusCode", 200}, {"link", doc{{"url", "https://e.example/?a=1&b=<2>"}}}, {"nothing", nil}, {"empty", ""}}
	b, err := json.Marshal(d)
	if err != nil || string(b) != `{"statusCode":200,"link":{"url":"https://e.example/?a=1\u0026b=\u003c2\u003e"},"nothing":null,"empty":""}` {
		t.Errorf("json: %s %v", b, err)
	}
	var x bytes.Buffer
	d.writeXML(&x)
	if want := `<statusCode>200</statusCode><link><url>https://e.example/?a=1&amp;b=&lt;2&gt;</url></link><nothing/><empty/>`; x.String() != want {
		t.Errorf("xml: %s", x.String())
	}
	for cb, ok := range map[string]bool{"": false, "cb": true, "jQuery123_x.y": true, "alert(1)//": false, "a b": false, strings.Repeat("a", 65): false} {
		if validCallback(cb) != ok {
			t.Errorf("validCallback(%q) = %v", cb, !ok)
		}
	}
}

func TestYOURLSIntval(t *testing.T) {
	for in, want := range map[string]int{"": 0, "10": 10, " 7": 7, "10abc": 10, "ten": 0, "-3": -3, "+4": 4, "1.5": 1} {
		if got := phpIntval(in); got != want {
			t.Errorf("phpIntval(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestShlinkRedirectRuleConditions(t *testing.T) {
	str := func(s string) *string { return &s }
	cond := func(typ, key, value string) shlinkCondition {
		c := shlinkCondition{Type: typ, MatchValue: str(value)}
		if key != "" {
			c.MatchKey = str(key)
		}
		return c
	}
	cases := []struct {
		name  string
		conds []shlinkCondition
		want  string // the native rule's when, as JSON
		err   string // a word the refusal names
	}{
		{"device", []shlinkCondition{cond("device", "", "android")}, `{"device":"android"}`, ""},
		{"every kind linkraft has", []shlinkCondition{
			cond("device", "", "desktop"), cond("browser", "", "firefox"), cond("language", "", "es-ES"),
			cond("query-param", "utm", "x"), cond("ip-address", "", "192.168.1.*"),
			cond("after-date", "", "2030-01-02T03:04:05+02:00"), cond("before-date", "", "2031-01-01T00:00:00Z"),
		}, `{"device":"desktop","language":"es-ES","query":{"utm":"x"},"after":"2030-01-02T01:04:05Z","before":"2031-01-01T00:00:00Z","browser":"firefox","ip":["192.168.1.*"]}`, ""},
		{"an operating system", []shlinkCondition{cond("device", "", "windows")}, "", "windows"},
		{"android's browser", []shlinkCondition{cond("browser", "", "android_browser")}, "", "android_browser"},
		{"any value", []shlinkCondition{cond("any-value-query-param", "a", "")}, "", "any-value-query-param"},
		{"valueless", []shlinkCondition{cond("valueless-query-param", "a", "")}, "", "valueless-query-param"},
		{"city", []shlinkCondition{cond("geolocation-city-name", "", "Paris")}, "", "geolocation-city-name"},
		{"two addresses", []shlinkCondition{cond("ip-address", "", "10.0.0.1"), cond("ip-address", "", "10.0.0.2")}, "", "ip-address"},
		{"two devices", []shlinkCondition{cond("device", "", "ios"), cond("device", "", "android")}, "", "device"},
		// Shlink test-api SetRedirectRulesTest::errorIsReturnedWhenInvalidDataIsProvided: what Shlink
		// refuses too is its invalid data naming redirectRules.
		{"query without key", []shlinkCondition{cond("query-param", "", "x")}, "", "invalid: redirectRules"},
		{"bad date", []shlinkCondition{cond("before-date", "", "soon")}, "", "invalid: redirectRules"},
		{"unknown", []shlinkCondition{cond("moon-phase", "", "full")}, "", "invalid: redirectRules"},
		{"a device Shlink lacks too", []shlinkCondition{cond("device", "", "invalid-device")}, "", "invalid: redirectRules"},
	}
	for _, c := range cases {
		r, err := nativeRule(shlinkRule{LongURL: "https://example.com/to", Conditions: c.conds})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one naming %q", c.name, err, c.err)
			}
			continue
		}
		if b, _ := json.Marshal(r.When); err != nil || string(b) != c.want {
			t.Errorf("%s: %s (%v), want %s", c.name, b, err, c.want)
		}
	}
	// Shown back: a rule with two addresses is two Shlink rules, in order.
	shown := shlinkRulesOf([]Rule{
		{When: RuleWhen{Device: "ios", IP: []string{"10.0.0.0/8", "192.168.1.*"}}, URL: "https://example.com/a"},
		{When: RuleWhen{Query: map[string]string{"b": "2", "a": "1"}}, URL: "https://example.com/b"},
	})
	b, _ := json.Marshal(shown)
	want := `[{"longUrl":"https://example.com/a","priority":1,"conditions":[{"type":"device","matchKey":null,"matchValue":"ios"},{"type":"ip-address","matchKey":null,"matchValue":"10.0.0.0/8"}]},` +
		`{"longUrl":"https://example.com/a","priority":2,"conditions":[{"type":"device","matchKey":null,"matchValue":"ios"},{"type":"ip-address","matchKey":null,"matchValue":"192.168.1.*"}]},` +
		`{"longUrl":"https://example.com/b","priority":3,"conditions":[{"type":"query-param","matchKey":"a","matchValue":"1"},{"type":"query-param","matchKey":"b","matchValue":"2"}]}]`
	if string(b) != want {
		t.Errorf("shown %s\nwant  %s", b, want)
	}
}

// TestShlinkVisitDatesNotInTheFuture: a row's date is spread within its
// hour, which may lie past now; Shlink's rows are never dated after now.
func TestShlinkVisitDatesNotInTheFuture(t *testing.T) {
	now := time.Now().UTC()
	future := now.Add(40 * time.Minute).Format(time.RFC3339)
	got, err := time.Parse(shlinkTime, visitOf(&nativeRow{At: future, Bot: "none"}).Date)
	if err != nil || got.After(time.Now()) || got.Before(now.Add(-time.Second)) {
		t.Errorf("a row at %s is dated %v (%v), want now, %s", future, got, err, now.Format(shlinkTime))
	}
	past := now.Add(-time.Hour).Truncate(time.Second)
	if got := visitOf(&nativeRow{At: past.Format(time.RFC3339), Bot: "none"}).Date; got != past.Format(shlinkTime) {
		t.Errorf("a past row is dated %s, want %s", got, past.Format(shlinkTime))
	}
}

// TestKuttPeriodViews counts clicks into Kutt's views as its
// visit.queries.js find does: a visit after the period's start counts
// in views[len-1-diff], diff being whole hours, days (date-fns
// differenceInHours/Days) or calendar months (differenceInMonths) back
// from now.
func TestKuttPeriodViews(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 30, 0, 0, time.UTC)
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t }
	points := []clickPoint{
		{at("2026-11-29T10:00:00Z"), 1},  // this hour, today, this month
		{at("2026-11-28T11:00:00Z"), 2},  // 23 whole hours back
		{at("2026-11-28T10:00:00Z"), 4},  // 24 hours and a half: not in lastDay
		{at("2026-11-22T00:00:00Z"), 8},  // 7 days and 10 hours: in lastMonth only
		{at("2026-10-29T00:00:00Z"), 16}, // a month and 10 hours: lastYear's 11th
		{at("2025-11-30T00:00:00Z"), 32}, // 11 whole months back: lastYear's first
		{at("2025-11-29T00:00:00Z"), 64}, // 12 months and 10 hours: out
	}
	want := map[string]struct {
		total uint64
		first uint64 // views[0]
		last  uint64 // views[len-1]
	}{
		"lastDay":   {3, 2, 1},
		"lastWeek":  {7, 0, 3},
		"lastMonth": {15, 0, 3},
		"lastYear":  {63, 32, 15},
	}
	for _, p := range kuttPeriods(now) {
		views, total := p.views(points, now)
		w := want[p.name]
		if len(views) != p.points || total != w.total || views[0] != w.first || views[len(views)-1] != w.last {
			t.Errorf("%s: %v (total %d), want total %d, first %d, last %d", p.name, views, total, w.total, w.first, w.last)
		}
	}
}

// TestWholeMonths counts calendar months as date-fns' differenceInMonths.
func TestWholeMonths(t *testing.T) {
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t }
	cases := []struct {
		from, to string
		want     int
	}{
		{"2026-11-01T00:00:00Z", "2026-11-29T10:00:00Z", 0},
		{"2026-10-29T10:00:00Z", "2026-11-29T10:00:00Z", 1},
		{"2026-10-29T10:00:01Z", "2026-11-29T10:00:00Z", 0},
		{"2025-11-29T10:00:00Z", "2026-11-29T10:00:00Z", 12},
		{"2026-01-31T00:00:00Z", "2026-03-01T00:00:00Z", 1},
	}
	for _, c := range cases {
		if got := wholeMonths(at(c.from), at(c.to)); got != c.want {
			t.Errorf("wholeMonths(%s, %s) = %d, want %d", c.from, c.to, got, c.want)
		}
	}
}

// TestKuttNames shows linkraft's breakdowns under Kutt's names
// (utils.getInitStats: every browser and system, zeros too; countries
// and referrers lower case as visit.queries.js add stores them), most
// first (utils.statsObjectToArray).
func TestKuttNames(t *testing.T) {
	cases := []struct {
		dim    string
		groups []metric
		want   string
	}{
		{"browser", nil, "chrome:0 edge:0 firefox:0 ie:0 opera:0 other:0 safari:0"},
		{"browser", []metric{{"firefox", 3}, {"safari", 5}, {"other", 1}}, "safari:5 firefox:3 other:1 chrome:0 edge:0 ie:0 opera:0"},
		{"os", []metric{{"chromeos", 2}, {"other", 1}, {"windows", 2}}, "other:3 windows:2 android:0 ios:0 linux:0 macos:0"},
		{"country", []metric{{"US", 4}, {"DE", 3}}, "us:4 de:3"},
		{"referrer", nil, ""},
	}
	for _, c := range cases {
		var got []string
		for _, s := range kuttNames(c.dim, c.groups) {
			got = append(got, fmt.Sprintf("%s:%d", s.Name, s.Value))
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s %v: %s, want %s", c.dim, c.groups, strings.Join(got, " "), c.want)
		}
	}
}

// TestKuttCreateBody checks Kutt's create validation
// (validators.handler.js createLink) and where linkraft is narrower.
func TestKuttCreateBody(t *testing.T) {
	cases := []struct {
		name string
		in   kuttCreate
		want map[string]any
		err  string
	}{
		{"no target", kuttCreate{Target: "  "}, nil, "Target is missing."},
		{"no scheme: http", kuttCreate{Target: " example.com/a "}, map[string]any{"url": "http://example.com/a"}, ""},
		{"scheme kept", kuttCreate{Target: "https://example.com/a"}, map[string]any{"url": "https://example.com/a"}, ""},
		{"other scheme kept", kuttCreate{Target: "mailto:a@example.com"}, map[string]any{"url": "mailto:a@example.com"}, ""},
		{"description at 512", kuttCreate{Target: "https://e.example", Description: strings.Repeat("é", 512)}, map[string]any{"title": strings.Repeat("é", 512)}, ""},
		{"description past 2040", kuttCreate{Target: "https://e.example", Description: strings.Repeat("d", 2041)}, nil, "Description length must be between 1 and 2040."},
		{"description past 512", kuttCreate{Target: "https://e.example", Description: strings.Repeat("d", 513)}, nil, "linkraft keeps a description of up to 512 characters"},
		{"description past 1024 bytes", kuttCreate{Target: "https://e.example", Description: strings.Repeat("€", 400)}, nil, "linkraft keeps a description of up to 1024 bytes in UTF-8"},
		{"customurl trimmed", kuttCreate{Target: "https://e.example", CustomURL: " abc "}, map[string]any{"custom_code": "abc"}, ""},
		{"customurl of 2", kuttCreate{Target: "https://e.example", CustomURL: "ab"}, nil, "linkraft's custom URLs are 3 to 64 characters long"},
		{"customurl past 64", kuttCreate{Target: "https://e.example", CustomURL: strings.Repeat("c", 65)}, nil, "Custom URL length must be between 1 and 64."},
	}
	for _, c := range cases {
		got, err := c.in.native("sho.rt")
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s: %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s = %#v, want %#v", c.name, k, got[k], v)
			}
		}
	}
}

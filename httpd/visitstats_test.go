package httpd

import (
	"context"
	"encoding/base64"
	"encoding/csv"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/httpd/geo"
)

// countries loads the embedded table once for the package's tests.
var countries = sync.OnceValues(geo.Load)

func withCountries(tb testing.TB) func(*Config) {
	table, err := countries()
	if err != nil {
		tb.Fatal(err)
	}
	return func(c *Config) {
		c.Countries = table
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	}
}

const (
	chromeWindows = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
	safariIPhone  = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1"
	firefoxLinux  = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"
	slackbotUA    = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
	googlebotUA   = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
)

// TestVisitBreakdowns: clicks with known User-Agents, referrers and
// addresses (direct and through a trusted proxy) give the expected
// breakdowns, summing to the link's clicks; bots are apart.
func TestVisitBreakdowns(t *testing.T) {
	s := newTestServer(t, withCountries(t))
	code := mustCreate(t, s, `{"url":"https://example.com/counted","tags":["launch"]}`)
	clicks := []struct {
		remote  string // the connection's address
		xff     string
		ua, ref string
		times   int
	}{
		{"8.8.8.8", "", chromeWindows, "https://News.Example.com:443/story?id=1", 3},
		{"127.0.0.1", "81.2.69.142", safariIPhone, "", 2},                         // through the proxy: GB
		{"127.0.0.1", "8.8.8.8, 193.0.6.139", firefoxLinux, "android-app://x", 1}, // the nearest untrusted hop: NL
		{"203.0.113.9", "81.2.69.142", chromeWindows, "", 1},                      // not a trusted proxy: its own address, unknown
		{"8.8.8.8", "", slackbotUA, "https://chat.example/", 4},
		{"8.8.8.8", "", googlebotUA, "", 1},
	}
	for _, c := range clicks {
		for range c.times {
			headers := []string{"User-Agent", c.ua, "Authorization", ""}
			if c.ref != "" {
				headers = append(headers, "Referer", c.ref)
			}
			if c.xff != "" {
				headers = append(headers, "X-Forwarded-For", c.xff)
			}
			if got := status(doFrom(s, net.ParseIP(c.remote), "GET", "/"+code, "", "", headers...)); got != 302 {
				t.Fatalf("redirect: %d", got)
			}
		}
	}
	if err := realNode(s).Clicks().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]float64{
		"country":  {"US": 3, "GB": 2, "NL": 1, "XX": 1},
		"browser":  {"chrome": 4, "safari": 2, "firefox": 1},
		"os":       {"windows": 4, "ios": 2, "linux": 1},
		"device":   {"desktop": 5, "mobile": 2},
		"referrer": {"news.example.com": 3, "direct": 4},
	}
	for dim, groups := range want {
		v := body(t, do(s, "GET", "/api/v1/urls/"+code+"/stats?group_by="+dim, "", ""))
		visits := v["visits"].(map[string]any)
		got := map[string]float64{}
		var sum float64
		for _, g := range visits["groups"].([]any) {
			g := g.(map[string]any)
			got[g["value"].(string)] = g["clicks"].(float64)
			sum += g["clicks"].(float64)
		}
		if len(got) != len(groups) {
			t.Errorf("%s: groups %v, want %v", dim, got, groups)
		}
		for k, n := range groups {
			if got[k] != n {
				t.Errorf("%s %s: %v clicks, want %v (all: %v)", dim, k, got[k], n, got)
			}
		}
		if sum != 7 || visits["clicks"] != 7.0 || v["clicks"] != 7.0 {
			t.Errorf("%s: groups sum to %v, visits %v, link clicks %v; want 7 each", dim, sum, visits["clicks"], v["clicks"])
		}
		if visits["previews"] != 4.0 || visits["crawlers"] != 1.0 {
			t.Errorf("%s: bots %v/%v, want 1 crawler, 4 previews", dim, visits["crawlers"], visits["previews"])
		}
	}
	// The series answer says the bots too, in all.
	v := body(t, do(s, "GET", "/api/v1/urls/"+code+"/stats", "", ""))
	if bots := v["bots"].(map[string]any); bots["crawlers"] != 1.0 || bots["previews"] != 4.0 || v["clicks"] != 7.0 {
		t.Fatalf("stats: clicks %v bots %v", v["clicks"], bots)
	}
	// The workspace and the tag see the same.
	for _, q := range []string{"?group_by=country", "?workspace=default&group_by=country", "?tag=launch&group_by=country"} {
		v := body(t, do(s, "GET", "/api/v1/stats"+q, "", ""))
		if visits := v["visits"].(map[string]any); visits["clicks"] != 7.0 || v["links"] != 1.0 {
			t.Errorf("%s: %v", q, v)
		}
	}
	if v := body(t, do(s, "GET", "/api/v1/stats?tag=other", "", "")); v["links"] != 0.0 {
		t.Errorf("another tag: %v", v)
	}
	// CSV, asked for either way, parses, and holds the same numbers.
	for _, ctx := range []*fasthttp.RequestCtx{
		do(s, "GET", "/api/v1/urls/"+code+"/stats?group_by=country&format=csv", "", ""),
		do(s, "GET", "/api/v1/urls/"+code+"/stats?group_by=country", "", "", "Accept", "text/csv"),
	} {
		rows, err := csv.NewReader(strings.NewReader(string(ctx.Response.Body()))).ReadAll()
		if err != nil || !strings.HasPrefix(string(ctx.Response.Header.ContentType()), "text/csv") {
			t.Fatalf("csv: %v %q", err, ctx.Response.Body())
		}
		if len(rows) != 5 || rows[0][0] != "country" || rows[1][0] != "US" || rows[1][1] != "3" {
			t.Fatalf("csv rows: %v", rows)
		}
	}
	rows, err := csv.NewReader(strings.NewReader(string(do(s, "GET", "/api/v1/stats?format=csv", "", "").Response.Body()))).ReadAll()
	if err != nil || len(rows) != 31 || rows[0][3] != "previews" || rows[30][1] != "7" || rows[30][3] != "4" {
		t.Fatalf("workspace csv by day: %v %v", err, rows)
	}
}

func TestVisitStatsRefuseBadQueries(t *testing.T) {
	s := newTestServer(t, nil)
	code := mustCreate(t, s, `{"url":"https://example.com/x"}`)
	for _, q := range []string{
		"/api/v1/urls/" + code + "/stats?group_by=ip",
		"/api/v1/urls/" + code + "/stats?format=xml",
		"/api/v1/urls/" + code + "/stats?group_by=os&from=2026-01-01T00:00:00Z&to=2025-01-01T00:00:00Z",
		"/api/v1/urls/" + code + "/stats?group_by=os&from=2025-01-01T00:00:00Z&to=2026-01-01T00:00:00Z",
		"/api/v1/urls/" + code + "/stats?group_by=os&from=yesterday",
		"/api/v1/stats?group_by=bots",
	} {
		if got := status(do(s, "GET", q, "", "")); got != 400 {
			t.Errorf("%s: %d, want 400", q, got)
		}
	}
	if got := status(do(s, "GET", "/api/v1/stats", "", "", "Authorization", "")); got != 401 {
		t.Errorf("workspace stats without a key: %d, want 401", got)
	}
}

func TestReferrerHost(t *testing.T) {
	tests := []struct{ referer, want string }{
		{"https://News.Example.com/a?b#c", "news.example.com"},
		{"http://user:pw@example.org:8080/", "example.org"},
		{"https://[2001:db8::1]:443/x", "[2001:db8::1]"},
		{"https://example.com./", "example.com"},
		{"HTTPS://EXAMPLE.COM", "example.com"},
		{"", ""},
		{"android-app://com.example", ""},
		{"https://", ""},
		{"https://exa mple.com/", ""},
		{"https://other/", ""},
		{"https://" + strings.Repeat("a", 300) + ".com/", ""},
	}
	r := newReferrerHosts()
	for _, tt := range tests {
		for range 2 { // the second is served from the cache
			if got := r.host([]byte(tt.referer)); got != tt.want {
				t.Errorf("host(%q) = %q, want %q", tt.referer, got, tt.want)
			}
		}
	}
}

// TestVisitorWithoutHeaders: a request with no User-Agent skips the
// agent cache, and must be recorded as the cache would have classified
// it: an "other" browser, system and device, and not a bot.
func TestVisitorWithoutHeaders(t *testing.T) {
	if got := classesOf(nil); got != (fsm.Visitor{}) {
		t.Fatalf("classesOf(no User-Agent) = %+v, want the zero visitor", got)
	}
	s := newTestServer(t, nil)
	var ctx fasthttp.RequestCtx
	if got := s.redirects.visitorOf(&ctx); got != (fsm.Visitor{}) {
		t.Fatalf("a request without headers: %+v", got)
	}
}

// TestWorkspaceStatsShowOnlyWhatTheKeyReads: a key of another workspace,
// asking for this one or for all, sees none of its links.
func TestWorkspaceStatsShowOnlyWhatTheKeyReads(t *testing.T) {
	s := newTestServer(t, nil)
	mustCreate(t, s, `{"url":"https://example.com/team","workspace":"team"}`)
	_, other := addKey(t, s, fsm.ScopeStatsRead, 0, "other")
	for _, q := range []string{"?workspace=team", "", "?group_by=country"} {
		v := body(t, do(s, "GET", "/api/v1/stats"+q, "", "", "Authorization", "Bearer "+other))
		if v["links"] != 0.0 {
			t.Errorf("%q with a key of another workspace: %v", q, v)
		}
	}
	if v := body(t, do(s, "GET", "/api/v1/stats?workspace=team", "", "")); v["links"] != 1.0 {
		t.Fatalf("the admin token: %v", v)
	}
}

// TestClientCannotClaimAVisitor: the header a peer uses to carry a
// forwarded visit's visitor is not believed from a client, so a client
// cannot pass as a bot (or as anyone) to a limited link.
func TestClientCannotClaimAVisitor(t *testing.T) {
	s := newTestServer(t, nil)
	code := mustCreate(t, s, `{"url":"https://example.com/limited","max_visits":5}`)
	forged := base64.RawURLEncoding.EncodeToString(fsm.EncodeVisitor(fsm.Visitor{Bot: fsm.Preview}))
	if got := status(do(s, "GET", "/"+code, "", "", "User-Agent", chromeWindows, wire.VisitorHeader, forged, "Authorization", "")); got != 302 {
		t.Fatalf("visit: %d", got)
	}
	if l, _ := s.fsm.Get(code); l.Clicks != 1 {
		t.Fatalf("clicks = %d, want 1: the forged visitor header was believed", l.Clicks)
	}
	if c, p := s.fsm.BotsInAll(code); c+p != 0 {
		t.Fatalf("bots = %d+%d, want none", c, p)
	}
}

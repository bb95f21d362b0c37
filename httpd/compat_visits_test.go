package httpd

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/httpd/agent"
	"github.com/linkraft/linkraft/httpd/compat"
)

// TestShlinkVisitRows: the rows Shlink's visits routes list, grouped by
// browser, OS, referrer and country as the Shlink web client groups them,
// give linkraft's own breakdowns; paging and excludeBots are Shlink's;
// deleting visits forgets them.
func TestShlinkVisitRows(t *testing.T) {
	s := newTestServer(t, withCountries(t))
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, fsm.AllWorkspaces)
	code := mustCreate(t, s, `{"url":"https://example.com/rows","custom_code":"rows","tags":["launch"]}`)
	clicks := []struct {
		ua, ref, remote string
		times           int
	}{
		{chromeWindows, "https://news.example.com/a", "8.8.8.8", 3},
		{safariIPhone, "", "81.2.69.142", 2},
		{firefoxLinux, "https://blog.example/", "193.0.6.139", 1},
		{slackbotUA, "", "8.8.8.8", 2},
	}
	for _, c := range clicks {
		for range c.times {
			headers := []string{"User-Agent", c.ua}
			if c.ref != "" {
				headers = append(headers, "Referer", c.ref)
			}
			if got := status(doFrom(s, net.ParseIP(c.remote), "GET", "/"+code, "", "", headers...)); got != 302 {
				t.Fatalf("redirect: %d", got)
			}
		}
	}
	if err := realNode(s).Clicks().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	shlink := func(method, uri string) map[string]any {
		t.Helper()
		ctx := do(s, method, uri, "", "", "X-Api-Key", key)
		if ctx.Response.StatusCode() != 200 {
			t.Fatalf("%s %s: %d %s", method, uri, ctx.Response.StatusCode(), ctx.Response.Body())
		}
		return body(t, ctx)
	}
	visits := shlink("GET", "/rest/v3/short-urls/"+code+"/visits?excludeBots=true")
	data := field(visits, "visits.data").([]any)
	if n := field(visits, "visits.pagination.totalItems"); n != 6.0 || len(data) != 6 {
		t.Fatalf("%v rows, %d listed; want 6", n, len(data))
	}
	got := map[string]map[string]float64{"browser": {}, "os": {}, "referrer": {}, "country": {}}
	for _, r := range data {
		r := r.(map[string]any)
		if _, ok := r["ip"]; ok || r["potentialBot"] != false || r["visitedUrl"] != "http://sho.rt/"+code {
			t.Fatalf("row %v", r)
		}
		// Shlink test-api OrphanVisitsTest::properVisitsAreReturnedBasedInQuery: a row without its
		// redirect URL has redirectUrl null.
		if redirect, ok := r["redirectUrl"]; !ok || redirect != nil {
			t.Fatalf("row %v: want redirectUrl null", r)
		}
		if _, err := time.Parse(time.RFC3339, r["date"].(string)); err != nil {
			t.Fatalf("row date: %v", err)
		}
		c := classesOf([]byte(r["userAgent"].(string)))
		got["browser"][c.Browser.String()]++
		got["os"][c.OS.String()]++
		ref := r["referer"].(string)
		if ref == "" {
			ref = "direct"
		}
		got["referrer"][strings.Trim(strings.TrimPrefix(ref, "https://"), "/")]++
		country := "XX"
		if loc, ok := r["visitLocation"].(map[string]any); ok {
			country = loc["countryCode"].(string)
		}
		got["country"][country]++
	}
	for dim, groups := range got {
		v := body(t, do(s, "GET", "/api/v1/urls/"+code+"/stats?group_by="+dim, "", "", "X-Api-Key", key))
		want := map[string]float64{}
		for _, g := range field(v, "visits.groups").([]any) {
			g := g.(map[string]any)
			want[g["value"].(string)] = g["clicks"].(float64)
		}
		if len(want) != len(groups) {
			t.Errorf("%s: rows give %v, linkraft %v", dim, groups, want)
		}
		for k, n := range want {
			if groups[k] != n {
				t.Errorf("%s %s: rows give %v, linkraft %v", dim, k, groups[k], n)
			}
		}
	}
	page := shlink("GET", "/rest/v3/tags/launch/visits?page=2&itemsPerPage=3")
	if p := field(page, "visits.pagination").(map[string]any); p["totalItems"] != 8.0 || p["pagesCount"] != 3.0 || p["itemsInCurrentPage"] != 3.0 {
		t.Errorf("tag page 2 of 3: %v", p)
	}
	for uri, want := range map[string]float64{
		"/rest/v3/visits/non-orphan?domain=DEFAULT":               8,
		"/rest/v3/domains/sho.rt/visits":                          8,
		"/rest/v3/tags/launch/visits?excludeBots=true":            6,
		"/rest/v3/visits/non-orphan?endDate=2020-01-01T00:00:00Z": 0,
	} {
		if got := field(shlink("GET", uri), "visits.pagination.totalItems"); got != want {
			t.Errorf("%s: %v rows, want %v", uri, got, want)
		}
	}
	overview := shlink("GET", "/rest/v3/visits")
	if field(overview, "visits.nonOrphanVisits.total") != 8.0 || field(overview, "visits.nonOrphanVisits.bots") != 2.0 || field(overview, "visits.orphanVisits.total") != 0.0 {
		t.Errorf("overview %v", overview)
	}
	if ctx := do(s, "GET", "/rest/v3/short-urls/"+code+"/visits?startDate=yesterday", "", "", "X-Api-Key", key); ctx.Response.StatusCode() != 400 {
		t.Errorf("a bad startDate: %d", ctx.Response.StatusCode())
	}
	if ctx := do(s, "GET", "/rest/v3/short-urls/missing/visits", "", "", "X-Api-Key", key); ctx.Response.StatusCode() != 404 ||
		!strings.Contains(string(ctx.Response.Body()), "short-url-not-found") {
		t.Errorf("rows of a missing link: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	if d := shlink("DELETE", "/rest/v3/short-urls/"+code+"/visits"); d["deletedVisits"] != 8.0 {
		t.Errorf("delete visits: %v", d)
	}
	if after := shlink("GET", "/rest/v3/short-urls/"+code+"/visits"); field(after, "visits.pagination.totalItems") != 0.0 {
		t.Errorf("rows after deleting: %v", after)
	}
}

// TestRowUserAgents: the User-Agent a row carries is read back by
// linkraft's classifier as the row's browser and system.
func TestRowUserAgents(t *testing.T) {
	for b := fsm.BrowserOther; b <= fsm.Opera; b++ {
		for o := fsm.OSOther; o <= fsm.ChromeOS; o++ {
			if b == fsm.Safari && o == fsm.Android {
				continue // the classifier reads Safari's token on Android as the stock browser: no UA says both
			}
			ua := compat.UserAgentOf(b.String(), o.String(), "desktop")
			c := agent.Classify([]byte(ua))
			if got := classesOf([]byte(ua)); got.Browser != b || got.OS != o || c.Bot != agent.NotBot {
				t.Errorf("%s on %s: %q reads as %s on %s", b, o, ua, got.Browser, got.OS)
			}
		}
	}
}

// TestShlinkVisitListIsBounded: one Shlink answer lists at most 100,000
// rows (httpd/compat: 20 native pages of 5,000); a link with more visits in range is refused
// with invalid-data asking for pages, and a page of them is still served.
func TestShlinkVisitListIsBounded(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	code := mustCreate(t, s, `{"url":"https://example.com/busy","custom_code":"busy"}`)
	const many = 100_001
	batch := fsm.ClickBatch{Node: "elsewhere", Seq: 1, Now: time.Now().UnixMilli(), Visitors: true,
		Counts: []fsm.ClickCount{{Code: code, Count: many, Visitor: fsm.Visitor{Browser: fsm.Chrome}}}}
	if _, err := s.node.Writes.Propose(context.Background(), batch, cluster.ProposeOptions{}); err != nil {
		t.Fatal(err)
	}
	all := do(s, "GET", "/rest/v3/short-urls/"+code+"/visits", "", "")
	if all.Response.StatusCode() != 400 || !strings.Contains(string(all.Response.Body()), "invalid-data") {
		t.Fatalf("every row of %d: %d %.200s", many, all.Response.StatusCode(), all.Response.Body())
	}
	page := do(s, "GET", "/rest/v3/short-urls/"+code+"/visits?page=3&itemsPerPage=5000", "", "")
	if page.Response.StatusCode() != 200 || field(body(t, page), "visits.pagination.totalItems") != float64(many) {
		t.Fatalf("a page of them: %d %.200s", page.Response.StatusCode(), page.Response.Body())
	}
}

// TestShlinkTagVisitsOfADomain follows Shlink test-api
// TagVisitsTest::expectedVisitsAreReturned ("foo with specific domain",
// "foo with default domain"): a tag's visits keep only the rows of the
// domain asked for, though the tag lookup runs a call of its own first.
func TestShlinkTagVisitsOfADomain(t *testing.T) {
	s := newTestServer(t, nil)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, fsm.AllWorkspaces)
	if ctx := do(s, "POST", "/admin/domains", "application/json", `{"domain":"example.com"}`); status(ctx) != 200 {
		t.Fatalf("domain: %d %s", status(ctx), ctx.Response.Body())
	}
	mustCreate(t, s, `{"url":"https://example.com/a","custom_code":"abc123","tags":["foo"]}`)
	mustCreate(t, s, `{"url":"https://example.com/b","custom_code":"ghi789","tags":["foo"],"domain":"example.com"}`)
	if got := status(do(s, "GET", "/abc123", "", "", "User-Agent", chromeWindows)); got != 302 {
		t.Fatalf("redirect: %d", got)
	}
	if err := realNode(s).Clicks().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for query, want := range map[string]float64{"": 1, "?domain=example.com": 0, "?domain=DEFAULT": 1} {
		ctx := do(s, "GET", "/rest/v3/tags/foo/visits"+query, "", "", "X-Api-Key", key)
		if n := field(body(t, ctx), "visits.pagination.totalItems"); status(ctx) != 200 || n != want {
			t.Errorf("tag visits%s: %d, %v rows; want %v", query, status(ctx), n, want)
		}
	}
}

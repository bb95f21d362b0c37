package httpd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// TestOrphanVisitsCounted: a root visit, a code that names no link, a
// link not yet valid and a page not found each count once as their kind
// after the flush, a bot's as a bot's, on the domain the Host names;
// HEAD, POST and API paths count nothing; Shlink's routes list and
// delete them.
func TestOrphanVisitsCounted(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	if ctx := do(s, "POST", "/admin/domains", "application/json", `{"domain":"brand.example"}`); status(ctx) != 200 {
		t.Fatalf("register domain: %d %s", status(ctx), ctx.Response.Body())
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	embargoed := mustCreate(t, s, `{"url":"https://example.com/later","valid_since":"`+future+`"}`)
	visits := []struct {
		method, path, host, ua string
		status                 int
	}{
		{"GET", "/", "", chromeWindows, 200},
		{"GET", "/", "", slackbotUA, 200},
		{"GET", "/", "brand.example", safariIPhone, 200},
		{"GET", "/nosuchcode", "", chromeWindows, 404},
		{"GET", "/" + embargoed, "", chromeWindows, 404},
		{"GET", "/no/such/page", "brand.example", firefoxLinux, 404},
		// Not visits: HEAD, a form's POST, API clients' misses.
		{"HEAD", "/nosuchcode", "", chromeWindows, 404},
		{"POST", "/nosuchcode", "", chromeWindows, 404},
		{"GET", "/api/v1/nosuchroute", "", chromeWindows, 404},
		{"GET", "/rest/v3/nosuchroute", "", chromeWindows, 404},
	}
	for _, v := range visits {
		headers := []string{"User-Agent", v.ua}
		if v.host != "" {
			headers = append(headers, "Host", v.host)
		}
		if got := status(do(s, v.method, v.path, "", "", headers...)); got != v.status {
			t.Fatalf("%s %s: %d, want %d", v.method, v.path, got, v.status)
		}
	}
	if err := realNode(s).Clicks().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows := body(t, do(s, "GET", "/api/v1/visits/orphan", "", ""))
	got := map[string]int{}
	for _, r := range rows["visits"].([]any) {
		r := r.(map[string]any)
		got[fmt.Sprintf("%s %s %s %s", r["domain"], r["type"], r["bot"], r["visited_url"])]++
	}
	want := map[string]int{
		" base_url none http://sho.rt/":                      1,
		" base_url preview http://sho.rt/":                   1,
		"brand.example base_url none https://brand.example/": 1,
		" invalid_short_url none ":                           2,
		"brand.example regular_404 none ":                    1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || rows["total"] != 6.0 || rows["bots"] != 1.0 {
		t.Errorf("orphan rows %v (total %v, bots %v), want %v", got, rows["total"], rows["bots"], want)
	}
	for query, n := range map[string]float64{"?type=base_url": 3, "?type=regular_404&domain=brand.example": 1, "?domain=": 4, "?exclude_bots=true": 5} {
		if v := body(t, do(s, "GET", "/api/v1/visits/orphan"+query, "", "")); v["total"] != n {
			t.Errorf("%s: total %v, want %v", query, v["total"], n)
		}
	}
	if ctx := do(s, "GET", "/api/v1/visits/orphan?type=base", "", ""); status(ctx) != 400 {
		t.Errorf("an unknown type: %d", status(ctx))
	}

	// Shlink's shapes.
	_, key := addKey(t, s, fsm.ScopeAdmin, 0, fsm.AllWorkspaces)
	shlink := func(method, uri string) map[string]any {
		t.Helper()
		ctx := do(s, method, uri, "", "", "X-Api-Key", key)
		if status(ctx) != 200 {
			t.Fatalf("%s %s: %d %s", method, uri, status(ctx), ctx.Response.Body())
		}
		return body(t, ctx)
	}
	list := shlink("GET", "/rest/v3/visits/orphan?type=base_url&excludeBots=true&itemsPerPage=1&page=2")
	data := field(list, "visits.data").([]any)
	if p := field(list, "visits.pagination").(map[string]any); p["totalItems"] != 2.0 || p["pagesCount"] != 2.0 || len(data) != 1 {
		t.Fatalf("page 2 of base URL visits: %v, %d rows", p, len(data))
	}
	if r := data[0].(map[string]any); r["type"] != "base_url" || r["potentialBot"] != false || r["visitedUrl"] == "" {
		t.Errorf("row %v", r)
	}
	for query, n := range map[string]float64{"?domain=DEFAULT": 4, "?domain=brand.example&type=regular_404": 1} {
		if v := shlink("GET", "/rest/v3/visits/orphan"+query); field(v, "visits.pagination.totalItems") != n {
			t.Errorf("Shlink's orphan visits%s: %v, want %v", query, field(v, "visits.pagination.totalItems"), n)
		}
	}
	if ctx := do(s, "GET", "/rest/v3/visits/orphan?type=nope", "", "", "X-Api-Key", key); status(ctx) != 400 {
		t.Errorf("an unknown Shlink type: %d", status(ctx))
	}
	overview := shlink("GET", "/rest/v3/visits")
	if field(overview, "visits.orphanVisits.total") != 6.0 || field(overview, "visits.orphanVisits.bots") != 1.0 ||
		field(overview, "visits.orphanVisits.nonBots") != 5.0 || field(overview, "visits.orphanVisits.total") != 6.0 {
		t.Errorf("overview %v", overview["visits"])
	}
	_, stats := addKey(t, s, fsm.ScopeStatsRead|fsm.ScopeLinksRead, 0, fsm.AllWorkspaces)
	if v := body(t, do(s, "GET", "/rest/v3/visits", "", "", "X-Api-Key", stats)); field(v, "visits.orphanVisits.total") != 0.0 {
		t.Errorf("a key that is not an admin's sees %v orphan visits", field(v, "visits.orphanVisits.total"))
	}
	if v := shlink("DELETE", "/rest/v3/visits/orphan"); v["deletedVisits"] != 6.0 {
		t.Errorf("deleted %v", v)
	}
	if v := body(t, do(s, "GET", "/api/v1/visits/orphan", "", "")); v["total"] != 0.0 {
		t.Errorf("after deleting: %v", v)
	}
}

package httpd

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/migrate"
)

// TestBitlyAPI sends the requests of Bitly's clients (the npm client
// sends the token bare and domain bit.ly in every body) through a real
// node and checks what they read, errors in Bitly's shape included.
func TestBitlyAPI(t *testing.T) {
	s := newTestServer(t, nil)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	bitly := func(method, uri, body string, auth ...string) (int, map[string]any, string) {
		t.Helper()
		header := []string{"Authorization", key} // bare, as the npm client sends it
		if len(auth) > 0 {
			header = []string{"Authorization", auth[0]}
		}
		ctx := do(s, method, uri, "application/json", body, header...)
		return ctx.Response.StatusCode(), decodeBody(t, ctx.Response.Body()), string(ctx.Response.Body())
	}
	const target = "https://example.com/bitly"
	status, created, raw := bitly("POST", "/v4/shorten", `{"long_url":"`+target+`","domain":"bit.ly"}`)
	if status != 201 {
		t.Fatalf("shorten: %d %s", status, raw)
	}
	id, _ := created["id"].(string)
	code := strings.TrimPrefix(id, "sho.rt/")
	if code == id || created["link"] != "http://sho.rt/"+code || created["long_url"] != target {
		t.Fatalf("shorten: %s", raw)
	}
	if _, err := time.Parse("2006-01-02T15:04:05-0700", created["created_at"].(string)); err != nil {
		t.Errorf("created_at: %v", err)
	}
	if field(created, "references.group") != "http://sho.rt/v4/groups/team" {
		t.Errorf("references: %s", raw)
	}
	// The link is linkraft's own, in the key's workspace.
	if ctx := do(s, "GET", "/api/v1/urls/"+code, "", ""); !strings.Contains(string(ctx.Response.Body()), `"workspace":"team"`) {
		t.Errorf("native read of a Bitly shorten: %s", ctx.Response.Body())
	}

	// A click with a referrer, for the metrics (from an address the test
	// server knows no country of).
	if ctx := doFrom(s, net.ParseIP("8.8.8.8"), "GET", "/"+code, "", "", "Authorization", "", "Referer", "https://news.example/a"); ctx.Response.StatusCode() != 302 {
		t.Fatalf("redirect: %d", ctx.Response.StatusCode())
	}
	if err := realNode(s).Clicks().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, method, uri, body string
		auth                    []string
		status                  int
		want                    map[string]any
	}{
		{"shorten again finds it", "POST", "/v4/shorten", `{"long_url":"` + target + `"}`, nil, 200, map[string]any{"id": id}},
		{"Bearer", "POST", "/v4/shorten", `{"long_url":"` + target + `"}`, []string{"Bearer " + key}, 200, map[string]any{"id": id}},
		{"create", "POST", "/v4/bitlinks", `{"long_url":"https://example.com/bitly-2","domain":"bit.ly","title":"T","tags":["a"]}`, nil, 201,
			map[string]any{"title": "T", "long_url": "https://example.com/bitly-2", "archived": false}},
		{"create in another group", "POST", "/v4/bitlinks", `{"long_url":"https://example.com/bitly-3","group_guid":"other"}`, nil, 403,
			map[string]any{"message": "FORBIDDEN", "resource": "bitlinks"}},
		{"deeplinks refused", "POST", "/v4/bitlinks", `{"long_url":"https://example.com/bitly-3","deeplinks":[{"app_uri_path":"/x"}]}`, nil, 400,
			map[string]any{"message": "INVALID_ARG_DEEPLINKS"}},
		{"no long_url", "POST", "/v4/shorten", `{"domain":"bit.ly"}`, nil, 400, map[string]any{"message": "INVALID_ARG_LONG_URL"}},
		{"bad long_url", "POST", "/v4/shorten", `{"long_url":"ftp://example.com/x"}`, nil, 400, map[string]any{"message": "INVALID_ARG_LONG_URL"}},
		{"unknown field", "POST", "/v4/shorten", `{"long_url":"https://example.com/y","title":"no"}`, nil, 400, map[string]any{"message": "INVALID_ARG_TITLE"}},
		{"expand bit.ly", "POST", "/v4/expand", `{"bitlink_id":"bit.ly/` + code + `","domain":"bit.ly"}`, nil, 200,
			map[string]any{"long_url": target, "id": id, "link": "http://sho.rt/" + code}},
		{"expand own domain", "POST", "/v4/expand", `{"bitlink_id":"` + id + `"}`, nil, 200, map[string]any{"long_url": target}},
		{"expand a node's address", "POST", "/v4/expand", `{"bitlink_id":"10.0.0.7:8080/` + code + `"}`, nil, 200, map[string]any{"long_url": target}},
		{"expand short URL", "POST", "/v4/expand", `{"bitlink_id":"http://sho.rt/` + code + `"}`, nil, 200, map[string]any{"long_url": target}},
		{"expand unknown", "POST", "/v4/expand", `{"bitlink_id":"bit.ly/nope123"}`, nil, 404,
			map[string]any{"message": "NOT_FOUND", "resource": "bitlinks"}},
		{"get", "GET", "/v4/bitlinks/bit.ly/" + code, "", nil, 200, map[string]any{"id": id, "long_url": target, "is_deleted": false}},
		{"get bare hash", "GET", "/v4/bitlinks/" + code, "", nil, 200, map[string]any{"id": id}},
		{"update", "PATCH", "/v4/bitlinks/bit.ly/" + code, `{"title":"New","tags":["x","y"],"domain":"bit.ly","archived":false,"id":"ignored"}`, nil, 200,
			map[string]any{"title": "New", "id": id}},
		{"update clears", "PATCH", "/v4/bitlinks/" + id, `{"title":null,"long_url":"https://example.com/bitly-moved"}`, nil, 200,
			map[string]any{"title": nil, "long_url": "https://example.com/bitly-moved"}},
		{"update not JSON", "PATCH", "/v4/bitlinks/" + id, `title=x`, nil, 400, map[string]any{"message": "INVALID_BODY"}},
		{"archive refused", "PATCH", "/v4/bitlinks/" + id, `{"archived":true}`, nil, 400, map[string]any{"message": "INVALID_ARG_ARCHIVED"}},
		{"update unknown", "PATCH", "/v4/bitlinks/bit.ly/nope123", `{"title":"x"}`, nil, 404, map[string]any{"message": "NOT_FOUND"}},
		{"clicks summary", "GET", "/v4/bitlinks/bit.ly/" + code + "/clicks/summary?unit=day&units=-1", "", nil, 200,
			map[string]any{"total_clicks": 1.0, "unit": "day", "units": -1.0}},
		{"clicks summary of a week", "GET", "/v4/bitlinks/bit.ly/" + code + "/clicks/summary?unit=week&units=1", "", nil, 200,
			map[string]any{"total_clicks": 1.0, "unit": "week", "units": 1.0}},
		{"clicks", "GET", "/v4/bitlinks/bit.ly/" + code + "/clicks?unit=day&units=3&size=50&unit_reference=", "", nil, 200,
			map[string]any{"unit": "day", "units": 3.0}},
		{"minutes refused", "GET", "/v4/bitlinks/bit.ly/" + code + "/clicks?unit=minute", "", nil, 400, map[string]any{"message": "INVALID_ARG_UNIT"}},
		{"past retention refused", "GET", "/v4/bitlinks/bit.ly/" + code + "/clicks?unit=day&units=400", "", nil, 400,
			map[string]any{"message": "INVALID_ARG_UNITS"}},
		{"referrers", "GET", "/v4/bitlinks/bit.ly/" + code + "/referrers", "", nil, 200, map[string]any{"facet": "referrers", "unit": "day"}},
		{"countries", "GET", "/v4/bitlinks/bit.ly/" + code + "/countries?unit=month&units=1", "", nil, 200, map[string]any{"facet": "countries"}},
		{"referrers by the hour refused", "GET", "/v4/bitlinks/bit.ly/" + code + "/referrers?unit=hour&units=2", "", nil, 400,
			map[string]any{"message": "INVALID_ARG_UNIT"}},
		{"devices", "GET", "/v4/bitlinks/bit.ly/" + code + "/devices?unit=week&units=1", "", nil, 200, map[string]any{"facet": "devices", "unit": "week"}},
		{"referring domains", "GET", "/v4/bitlinks/bit.ly/" + code + "/referring_domains", "", nil, 200, map[string]any{"facet": "referring_domains"}},
		{"cities not answered", "GET", "/v4/bitlinks/bit.ly/" + code + "/cities", "", nil, 501, map[string]any{"message": "NOT_IMPLEMENTED"}},
		{"user", "GET", "/v4/user", "", nil, 200, map[string]any{"default_group_guid": "team", "is_active": true}},
		{"user, wrong token", "GET", "/v4/user", "", []string{"Bearer lk_wrong"}, 403, map[string]any{"message": "FORBIDDEN"}},
		{"the key's group", "GET", "/v4/groups/team", "", nil, 200, map[string]any{"guid": "team", "role": "group-admin"}},
		{"another group", "GET", "/v4/groups/other", "", nil, 404, map[string]any{"message": "NOT_FOUND"}},
		{"organizations not answered", "GET", "/v4/organizations", "", nil, 501, map[string]any{"message": "NOT_IMPLEMENTED"}},
		{"no token", "POST", "/v4/shorten", `{"long_url":"https://example.com/z"}`, []string{""}, 403, map[string]any{"message": "FORBIDDEN"}},
		{"wrong token", "POST", "/v4/shorten", `{"long_url":"https://example.com/z"}`, []string{"lk_wrong"}, 403, map[string]any{"message": "FORBIDDEN"}},
		{"wrong Bearer", "GET", "/v4/bitlinks/" + id, "", []string{"Bearer lk_wrong"}, 403, map[string]any{"message": "FORBIDDEN"}},
	}
	// A key's groups are its workspaces.
	if status, _, raw := bitly("GET", "/v4/groups", ""); status != 200 || !strings.Contains(raw, `"groups":[{`) || !strings.Contains(raw, `"guid":"team"`) {
		t.Errorf("groups: %d %s", status, raw)
	}
	for _, c := range cases {
		status, got, raw := bitly(c.method, c.uri, c.body, c.auth...)
		if status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, status, c.status, raw)
			continue
		}
		if status >= 400 {
			for _, f := range []string{"message", "resource", "description", "errors"} {
				if _, ok := got[f]; !ok {
					t.Errorf("%s: error without %s: %s", c.name, f, raw)
				}
			}
		}
		for path, want := range c.want {
			if v := field(got, path); v != want {
				t.Errorf("%s: %s = %#v, want %#v (%s)", c.name, path, v, want, raw)
			}
		}
	}

	// The metrics' items: one click today, from news.example.
	_, clicks, raw := bitly("GET", "/v4/bitlinks/bit.ly/"+code+"/clicks?unit=day&units=3", "")
	days, _ := clicks["link_clicks"].([]any)
	if len(days) != 3 || field(days[0].(map[string]any), "clicks") != 1.0 || field(days[1].(map[string]any), "clicks") != 0.0 {
		t.Errorf("clicks by day, newest first: %s", raw)
	}
	// Bitly's ClickMetrics (BaseMetrics' facets devices and
	// referring_domains too); a click without a User-Agent is device other.
	for _, c := range []struct{ facet, value string }{{"referrers", "news.example"}, {"countries", "XX"}, {"referring_domains", "news.example"}, {"devices", "other"}} {
		_, m, raw := bitly("GET", "/v4/bitlinks/bit.ly/"+code+"/"+c.facet+"?unit=day&units=-1", "")
		if b, _ := json.Marshal(m["metrics"]); string(b) != `[{"clicks":1,"value":"`+c.value+`"}]` || m["facet"] != c.facet {
			t.Errorf("%s: %s", c.facet, raw)
		}
	}
	// Bitly's deleteBitlink (current API): LinkDeletionResponse; then the
	// bitlink is gone, and a second delete finds nothing.
	for _, c := range []struct {
		method string
		status int
		want   string
	}{{"DELETE", 200, `{"links_deleted":[{"id":"` + id + `"}]}`}, {"GET", 404, `"NOT_FOUND"`}, {"DELETE", 404, `"NOT_FOUND"`}} {
		if status, _, raw := bitly(c.method, "/v4/bitlinks/bit.ly/"+code, ""); status != c.status || !strings.Contains(raw, c.want) {
			t.Errorf("%s after delete: %d %s, want %d %s", c.method, status, raw, c.status, c.want)
		}
	}
	// A browser's preflight.
	ctx := do(s, "OPTIONS", "/v4/shorten", "", "", "Origin", "https://app.example", "Access-Control-Request-Method", "POST")
	if ctx.Response.StatusCode() != 204 || !strings.Contains(string(ctx.Response.Header.Peek("Access-Control-Allow-Headers")), "Authorization") {
		t.Errorf("preflight: %d %s", ctx.Response.StatusCode(), ctx.Response.Header.String())
	}
}

// bitlyMatrixRows are the authorization matrix's rows for Bitly's API,
// on the team link code: Bitly refuses a missing or wrong token with 403.
func bitlyMatrixRows(code string) []struct {
	method, path, body string
	write              bool
	want               []int
} {
	type row = struct {
		method, path, body string
		write              bool
		want               []int
	}
	r403 := []int{403, 403, 403, 403, 403}
	with := func(rest ...int) []int { return append(append([]int{}, r403...), rest...) }
	all := func(status int) []int {
		return []int{status, status, status, status, status, status, status, status, status, status, status}
	}
	id := "bit.ly/" + code
	return []row{
		{"POST", "/v4/shorten", `{"long_url":"https://example.com/bitly-shorten","domain":"bit.ly"}`, true, with(403, 201, 201, 200, 201, 200)},
		{"POST", "/v4/bitlinks", `{"long_url":"https://example.com/bitly-create","domain":"bit.ly","title":"b"}`, true, with(403, 201, 201, 200, 201, 200)},
		{"POST", "/v4/expand", `{"bitlink_id":"` + id + `"}`, false, with(200, 404, 200, 200, 200, 200)},
		{"GET", "/v4/bitlinks/" + id, "", false, with(200, 404, 200, 200, 200, 200)},
		{"PATCH", "/v4/bitlinks/" + id, `{"title":"bitly"}`, true, with(403, 404, 200, 200, 200, 200)},
		{"GET", "/v4/bitlinks/" + id + "/clicks", "", false, with(403, 404, 403, 200, 200, 200)},
		{"GET", "/v4/bitlinks/" + id + "/clicks/summary", "", false, with(403, 404, 403, 200, 200, 200)},
		{"GET", "/v4/bitlinks/" + id + "/referrers", "", false, with(403, 404, 403, 200, 200, 200)},
		{"GET", "/v4/bitlinks/" + id + "/countries", "", false, with(403, 404, 403, 200, 200, 200)},
		{"GET", "/v4/bitlinks/" + id + "/devices", "", false, with(403, 404, 403, 200, 200, 200)},
		{"GET", "/v4/bitlinks/" + id + "/referring_domains", "", false, with(403, 404, 403, 200, 200, 200)},
		{"GET", "/v4/user", "", false, with(200, 200, 200, 200, 200, 200)},
		{"GET", "/v4/groups", "", false, with(200, 200, 200, 200, 200, 200)},
		{"GET", "/v4/groups/team", "", false, with(200, 404, 200, 200, 200, 200)},
		{"GET", "/v4/groups/team/bitlinks", "", false, with(200, 404, 200, 200, 200, 200)},
		// What linkraft does not answer is the same to everyone.
		{"POST", "/v4/custom_bitlinks", `{"custom_bitlink":"x.example/y","bitlink_id":"` + id + `"}`, true, all(501)},
		{"PUT", "/v4/groups/team", `{}`, true, all(501)},
		{"PATCH", "/v4/user", `{"name":"x"}`, true, all(501)},
		// Refused deletes only: a granted one would remove the link.
		{"DELETE", "/v4/bitlinks/" + id, "", true, with(403, 404)},
	}
}

// TestBitlyGroupBitlinks pages through a group's bitlinks as Bitly's
// getBitlinksByGroup does and applies the filters its spec lists.
func TestBitlyGroupBitlinks(t *testing.T) {
	s := newTestServer(t, nil)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite, 0, "team")
	bitly := func(uri string) (int, map[string]any, string) {
		t.Helper()
		ctx := do(s, "GET", uri, "", "", "Authorization", "Bearer "+key)
		return ctx.Response.StatusCode(), decodeBody(t, ctx.Response.Body()), string(ctx.Response.Body())
	}
	// Five links of the group, oldest first, and one of another group.
	var ids []string
	for i, body := range []string{
		`{"long_url":"https://example.com/list-0","tags":["a"]}`,
		`{"long_url":"https://example.com/list-1","tags":["b"],"title":"Beta"}`,
		`{"long_url":"https://example.com/list-2","tags":["a","c"]}`,
		`{"long_url":"https://sub.example.org/list-3?q=1"}`,
		`{"long_url":"https://example.com/list-4"}`,
	} {
		ctx := do(s, "POST", "/v4/bitlinks", "application/json", body, "Authorization", key)
		if ctx.Response.StatusCode() != 201 {
			t.Fatalf("create %d: %d %s", i, ctx.Response.StatusCode(), ctx.Response.Body())
		}
		ids = append(ids, decodeBody(t, ctx.Response.Body())["id"].(string))
	}
	mustCreate(t, s, `{"url":"https://example.com/elsewhere","workspace":"other"}`)
	newest := func(n ...int) string {
		var out []string
		for _, i := range n {
			out = append(out, ids[i])
		}
		return strings.Join(out, ",")
	}
	list := "/v4/groups/team/bitlinks"
	cases := []struct {
		name, query string
		status      int
		ids         string         // the page's bitlinks, in order
		want        map[string]any // fields of the answer
	}{
		// Pagination: size (default 50), page, and total where known.
		{"all", "", 200, newest(4, 3, 2, 1, 0), map[string]any{"pagination.size": 50.0, "pagination.page": 1.0, "pagination.total": 5.0, "pagination.next": "", "pagination.prev": ""}},
		{"first page", "?size=2", 200, newest(4, 3), map[string]any{"pagination.page": 1.0, "pagination.total": nil, "pagination.prev": ""}},
		{"second page by number", "?size=2&page=2", 200, newest(2, 1), map[string]any{"pagination.page": 2.0}},
		{"last page by number", "?size=2&page=3", 200, newest(0), map[string]any{"pagination.total": 5.0, "pagination.next": ""}},
		{"past the last page", "?size=2&page=4", 200, "", map[string]any{"pagination.total": 5.0, "pagination.next": ""}},
		// Filters: query/keyword (title, target, code), tags (any of
		// them), created_before/after (Unix seconds), hostname_path_query.
		{"query", "?query=beta", 200, newest(1), nil},
		{"keyword", "?keyword=list-2", 200, newest(2), nil},
		{"query and keyword differ", "?query=a&keyword=b", 400, "", map[string]any{"message": "INVALID_ARG_KEYWORD"}},
		{"one tag", "?tags=a", 200, newest(2, 0), nil},
		{"tags, any of them", "?tags=b&tags=c", 200, newest(2, 1), nil},
		{"tags[]", "?tags[]=c", 200, newest(2), nil},
		{"tags with paging", "?tags=a&tags=b&size=1&page=2", 200, newest(1), nil},
		{"created before", "?created_before=1000", 200, "", map[string]any{"pagination.total": 0.0}},
		{"created after", "?created_after=1000", 200, newest(4, 3, 2, 1, 0), nil},
		{"host and path", "?hostname_path_query=EXAMPLE.org/list", 200, newest(3), nil},
		// No linkraft link is archived, expired, or has deep links.
		{"archived on", "?archived=on", 200, "", map[string]any{"pagination.total": 0.0}},
		{"archived both", "?archived=both", 200, newest(4, 3, 2, 1, 0), nil},
		{"deeplinks on", "?deeplinks=on", 200, "", nil},
		{"expired", "?is_expired=on", 200, "", nil},
		{"without expiry", "?has_expiration=off&size=1", 200, newest(4), nil},
		// Refused: bad values, and what linkraft does not keep.
		{"archived maybe", "?archived=maybe", 400, "", map[string]any{"message": "INVALID_ARG_ARCHIVED"}},
		{"size 0", "?size=0", 400, "", map[string]any{"message": "INVALID_ARG_SIZE"}},
		{"bad search_after", "?search_after=x", 400, "", map[string]any{"message": "INVALID_ARG_SEARCH_AFTER"}},
		{"campaign", "?campaign_guid=Ca1", 400, "", map[string]any{"message": "INVALID_ARG_CAMPAIGN_GUID"}},
		{"modified after", "?modified_after=1", 400, "", map[string]any{"message": "INVALID_ARG_MODIFIED_AFTER"}},
		{"unknown parameter", "?colour=red", 400, "", map[string]any{"message": "INVALID_ARG_COLOUR"}},
	}
	for _, c := range cases {
		status, got, raw := bitly(list + c.query)
		if status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, status, raw, c.status)
			continue
		}
		if status == 200 {
			var shown []string
			for _, l := range got["links"].([]any) {
				shown = append(shown, l.(map[string]any)["id"].(string))
			}
			if strings.Join(shown, ",") != c.ids {
				t.Errorf("%s: links %v, want %s", c.name, shown, c.ids)
			}
		}
		for path, want := range c.want {
			if v := field(got, path); v != want {
				t.Errorf("%s: %s = %#v, want %#v (%s)", c.name, path, v, want, raw)
			}
		}
	}
	// The next links lead through every page, each once.
	var seen []string
	uri := list + "?size=2&tags=a&tags=b&tags=c&size=2"
	for page := 1; uri != ""; page++ {
		status, got, raw := bitly(uri)
		if status != 200 || field(got, "pagination.page") != float64(page) {
			t.Fatalf("page %d (%s): %d %s", page, uri, status, raw)
		}
		for _, l := range got["links"].([]any) {
			seen = append(seen, l.(map[string]any)["id"].(string))
		}
		next, _ := field(got, "pagination.next").(string)
		uri = strings.TrimPrefix(next, "http://sho.rt")
		if prev, _ := field(got, "pagination.prev").(string); page > 1 && !strings.Contains(prev, "page="+strconv.Itoa(page-1)) {
			t.Errorf("page %d: prev %q", page, prev)
		}
	}
	if strings.Join(seen, ",") != newest(2, 1, 0) {
		t.Errorf("paged through %v, want %s", seen, newest(2, 1, 0))
	}
	// What the list answers is what linkraft's importer reads from Bitly
	// (linkraft import --from bitly: the JSON of this very request).
	ctx := do(s, "GET", list, "", "", "Authorization", key)
	imported, problems, err := migrate.Parse("bitly", ctx.Response.Body())
	if err != nil || len(problems) > 0 || len(imported) != len(ids) {
		t.Fatalf("import of the list: %d links, %v, %v", len(imported), problems, err)
	}
	if l := imported[2]; "sho.rt/"+l.Code != ids[2] || l.URL != "https://example.com/list-2" || strings.Join(l.Tags, ",") != "a,c" || l.CreatedAt == nil {
		t.Errorf("imported %+v, want %s", l, ids[2])
	}
	if status, got, raw := bitly("/v4/groups/other/bitlinks"); status != 404 || got["message"] != "NOT_FOUND" {
		t.Errorf("another group: %d %s", status, raw)
	}
}

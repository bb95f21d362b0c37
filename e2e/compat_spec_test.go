package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestKuttBitlyYOURLSSpecsAcrossNodes runs the documented calls of Kutt
// (docs/api/api.js and its validators), Bitly (the v4 OpenAPI) and YOURLS
// (functions-api.php) that change or read a link against three linkraft
// processes, each request through the next node: a write through one
// node is read through another at once. Each case names the part of the
// spec it follows.
func TestKuttBitlyYOURLSSpecsAcrossNodes(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes, key := compatCluster(t)
	rr := &roundRobin{nodes: nodes}
	call := func(method, path, body string, header http.Header) (response, map[string]any) {
		t.Helper()
		r := rr.call(t, method, path, body, header)
		var m map[string]any
		json.Unmarshal(r.body, &m) // not every answer is an object
		return r, m
	}
	kutt := http.Header{"X-Api-Key": {key}}
	bitly := http.Header{"Authorization": {"Bearer " + key}}
	redirects := func(code, target string) {
		t.Helper()
		n := rr.next()
		r := n.request(t, http.MethodGet, "/"+code, noCredential(), nil)
		if target == "" && r.status != http.StatusNotFound && r.status != http.StatusGone ||
			target != "" && (r.status != http.StatusFound || r.header.Get("Location") != target) {
			t.Fatalf("GET /%s on %s: %v, want it to redirect to %q", code, n.id, r, target)
		}
	}

	// Kutt: validators.handler.js createLink (addProtocol), then the
	// list's parseQuery (limit above 50 is 50), editLink (address),
	// visit.queries.js (lastYear) and the delete's message.
	r, m := call("POST", "/api/v2/links", `{"target":"example.com/kutt-spec","customurl":"kutt-spec"}`, kutt)
	if r.status != http.StatusCreated || m["target"] != "http://example.com/kutt-spec" {
		t.Fatalf("Kutt create: %v", r)
	}
	id, _ := m["id"].(string)
	if r, m = call("GET", "/api/v2/links?limit=100", "", kutt); r.status != http.StatusOK || m["limit"] != 50.0 || m["total"] != 1.0 {
		t.Fatalf("Kutt list: %v", r)
	}
	if r, m = call("PATCH", "/api/v2/links/"+id, `{"address":"kutt-renamed"}`, kutt); r.status != http.StatusOK || m["address"] != "kutt-renamed" {
		t.Fatalf("Kutt edit of the address: %v", r)
	}
	redirects("kutt-renamed", "http://example.com/kutt-spec")
	redirects("kutt-spec", "")
	if r, m = call("GET", "/api/v2/links/"+id+"/stats", "", kutt); r.status != http.StatusOK || m["lastYear"] == nil {
		t.Fatalf("Kutt stats: %v", r)
	}
	if r, m = call("DELETE", "/api/v2/links/"+id, "", kutt); r.status != http.StatusOK || m["message"] != "Link has been deleted successfully." {
		t.Fatalf("Kutt delete: %v", r)
	}
	redirects("kutt-renamed", "")

	// Bitly v4: POST /shorten, GET /groups/{guid}/bitlinks (size, page),
	// DELETE /bitlinks/{bitlink}.
	r, m = call("POST", "/v4/shorten", `{"long_url":"https://example.com/bitly-spec"}`, bitly)
	if r.status != http.StatusCreated || m["long_url"] != "https://example.com/bitly-spec" {
		t.Fatalf("Bitly shorten: %v", r)
	}
	bitlink, _ := m["id"].(string) // host/code, the host the node's (no --base-url here)
	code := bitlink[strings.LastIndex(bitlink, "/")+1:]
	if r, m = call("POST", "/v4/shorten", `{"long_url":"https://example.com/bitly-spec"}`, bitly); r.status != http.StatusOK ||
		!strings.HasSuffix(m["id"].(string), "/"+code) {
		t.Fatalf("Bitly shorten of the same URL: %v, want 200 and the code %s", r, code)
	}
	_, groups := call("GET", "/v4/groups", "", bitly)
	list, _ := groups["groups"].([]any)
	if len(list) == 0 {
		t.Fatalf("Bitly groups: %v", groups)
	}
	guid, _ := list[0].(map[string]any)["guid"].(string)
	r, m = call("GET", "/v4/groups/"+url.PathEscape(guid)+"/bitlinks?size=1", "", bitly)
	if links, _ := m["links"].([]any); r.status != http.StatusOK || len(links) != 1 || m["pagination"] == nil {
		t.Fatalf("Bitly group bitlinks: %v", r)
	}
	if r, m = call("DELETE", "/v4/bitlinks/"+bitlink, "", bitly); r.status != http.StatusOK || m["links_deleted"] == nil {
		t.Fatalf("Bitly delete: %v", r)
	}
	redirects(code, "")

	// YOURLS: shorturl (format=simple is the short URL), url-stats.
	q := url.Values{"signature": {key}, "action": {"shorturl"}, "url": {"https://example.com/yourls-spec"}, "keyword": {"yourls-spec"}, "format": {"simple"}}
	r, _ = call("GET", "/yourls-api.php?"+q.Encode(), "", nil)
	if r.status != http.StatusOK || !strings.HasSuffix(strings.TrimSpace(string(r.body)), "/yourls-spec") {
		t.Fatalf("YOURLS shorturl, format=simple: %v", r)
	}
	q = url.Values{"signature": {key}, "action": {"url-stats"}, "shorturl": {"yourls-spec"}, "format": {"json"}}
	if r, m = call("GET", "/yourls-api.php?"+q.Encode(), "", nil); r.status != http.StatusOK || m["link"] == nil {
		t.Fatalf("YOURLS url-stats: %v", r)
	}
	redirects("yourls-spec", "https://example.com/yourls-spec")
}

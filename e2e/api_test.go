package e2e

import (
	"bytes"
	"encoding/json"
	"image/png"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServiceEndpoints covers /health, /, /metrics, /ui/ and `linkraft
// version` on a fresh single node (the service endpoints of docs/API.md).
func TestServiceEndpoints(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{ID: "service-node"})

	h := n.health(t)
	if h.Status != "healthy" || h.NodeID != "service-node" || h.Role != "leader" {
		t.Errorf("/health = %+v, want status healthy, node_id service-node, role leader", h)
	}
	if h.Leader == "" || h.Version == "" {
		t.Errorf("/health = %+v, want a non-empty leader and version", h)
	}
	if h.Links != 0 {
		t.Errorf("fresh node reports %d links, want 0", h.Links)
	}

	// The link count and applied index must follow writes, or operators
	// watching /health see a frozen node.
	n.createURL(t, "https://example.com/health-check")
	after := n.health(t)
	if after.Links != 1 {
		t.Errorf("after one create /health links = %d, want 1", after.Links)
	}
	if after.AppliedIndex <= h.AppliedIndex {
		t.Errorf("applied_index did not advance after a write: %d then %d", h.AppliedIndex, after.AppliedIndex)
	}

	root := n.get(t, "/")
	var service struct {
		Service string `json:"service"`
		Version string `json:"version"`
	}
	if root.status != http.StatusOK {
		t.Fatalf("GET /: want 200, got %v", root)
	}
	decodeObject(t, root, []string{"service", "version"}, &service)
	if service.Service != "linkraft" || service.Version != h.Version {
		t.Errorf("GET / = %+v, want service linkraft, version %q", service, h.Version)
	}

	metrics := n.get(t, "/metrics")
	if metrics.status != http.StatusOK || !strings.HasPrefix(metrics.header.Get("Content-Type"), "text/plain") {
		t.Errorf("GET /metrics: want 200 text/plain, got %v", metrics)
	}
	if !strings.Contains(string(metrics.body), "linkraft_") {
		t.Errorf("GET /metrics has no linkraft_ metric: %v", metrics)
	}

	ui := n.get(t, "/ui/")
	if ui.status != http.StatusOK || !strings.HasPrefix(ui.header.Get("Content-Type"), "text/html") || len(ui.body) == 0 {
		t.Errorf("GET /ui/: want 200 text/html with a page, got %v", ui)
	}

	out, err := runCommand(t, 10*time.Second, nil, "version")
	if err != nil {
		t.Fatalf("linkraft version: %v\n%s", err, out)
	}
	if !strings.Contains(out, h.Version) {
		t.Errorf("linkraft version printed %q, want it to contain the served version %q", out, h.Version)
	}
}

// TestCreateLink covers every way to create a link: the API with
// original_url or url, /shorten, the workspace path and form posts.
func TestCreateLink(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})

	form := func(values url.Values) []byte { return []byte(values.Encode()) }
	tests := []struct {
		name          string
		path          string
		contentType   string
		body          []byte
		wantOriginal  string
		wantWorkspace string
	}{
		{
			name: "api original_url, trimmed", path: "/api/v1/urls", contentType: "application/json",
			body:         []byte(`{"original_url": "  https://example.com/a?b=1 \n"}`),
			wantOriginal: "https://example.com/a?b=1", wantWorkspace: "default",
		},
		{
			name: "api url alias", path: "/api/v1/urls", contentType: "application/json",
			body:         []byte(`{"url": "https://example.com/alias"}`),
			wantOriginal: "https://example.com/alias", wantWorkspace: "default",
		},
		{
			name: "json with charset", path: "/api/v1/urls", contentType: "application/json; charset=utf-8",
			body:         []byte(`{"original_url": "http://example.com/charset"}`),
			wantOriginal: "http://example.com/charset", wantWorkspace: "default",
		},
		{
			name: "explicit workspace", path: "/api/v1/urls", contentType: "application/json",
			body:         []byte(`{"original_url": "https://example.com/ws", "workspace": "team-A_1"}`),
			wantOriginal: "https://example.com/ws", wantWorkspace: "team-A_1",
		},
		{
			name: "shorten short form", path: "/shorten", contentType: "application/json",
			body:         []byte(`{"url": "https://example.com/shorten"}`),
			wantOriginal: "https://example.com/shorten", wantWorkspace: "default",
		},
		{
			name: "workspace in path", path: "/api/v1/workspaces/marketing/links", contentType: "application/json",
			body:         []byte(`{"url": "https://example.com/marketing"}`),
			wantOriginal: "https://example.com/marketing", wantWorkspace: "marketing",
		},
		{
			name: "form post as curl -d sends it", path: "/api/v1/urls", contentType: "application/x-www-form-urlencoded",
			body:         form(url.Values{"url": {"https://example.com/form?x=1&y=2"}}),
			wantOriginal: "https://example.com/form?x=1&y=2", wantWorkspace: "default",
		},
		{
			name: "form post to shorten", path: "/shorten", contentType: "application/x-www-form-urlencoded",
			body:         form(url.Values{"url": {"https://example.com/form-shorten"}}),
			wantOriginal: "https://example.com/form-shorten", wantWorkspace: "default",
		},
	}

	seenCodes := map[string]string{}
	seenIDs := map[int64]string{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now().UTC().Add(-2 * time.Second)
			r := n.request(t, http.MethodPost, tc.path, http.Header{
				"Content-Type": {tc.contentType},
				"Accept":       {"*/*"},
			}, tc.body)
			if r.status != http.StatusCreated {
				t.Fatalf("want 201, got %v", r)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			var l link
			decodeObject(t, r, createFields, &l)
			checkLinkFields(t, l)
			if !counterCodePattern.MatchString(l.ShortCode) {
				t.Errorf("short_code %q is not 7 characters of [0-9A-Za-z]", l.ShortCode)
			}
			if want := "http://" + n.httpAddr + "/" + l.ShortCode; l.ShortURL != want {
				t.Errorf("short_url = %q, want %q (default base URL is the request Host)", l.ShortURL, want)
			}
			if l.OriginalURL != tc.wantOriginal || l.Workspace != tc.wantWorkspace {
				t.Errorf("original_url, workspace = %q, %q; want %q, %q", l.OriginalURL, l.Workspace, tc.wantOriginal, tc.wantWorkspace)
			}
			if l.ExpiresAt != nil {
				t.Errorf("expires_at = %q, want null for a link without expiry", *l.ExpiresAt)
			}
			if l.Existing {
				t.Errorf("a fresh link says existing: true")
			}
			if created := checkTimestamp(t, "created_at", l.CreatedAt); created.Before(before) || created.After(time.Now().Add(2*time.Second)) {
				t.Errorf("created_at = %s, not the time of the request", l.CreatedAt)
			}
			if other, dup := seenCodes[l.ShortCode]; dup {
				t.Errorf("code %s handed out twice (also to %q)", l.ShortCode, other)
			}
			if other, dup := seenIDs[l.ID]; dup {
				t.Errorf("id %d handed out twice (also to %q)", l.ID, other)
			}
			seenCodes[l.ShortCode], seenIDs[l.ID] = tc.name, tc.name
			n.requireRedirect(t, l.ShortCode, tc.wantOriginal)
		})
	}
}

// TestRedirect covers GET and HEAD /{code}: Location byte for byte, the
// cache header, and that only GET counts a click, as both stats endpoints
// show.
func TestRedirect(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})

	// Query string, percent escapes, '+', a raw unicode path, ';' and a
	// fragment: everything a normalising redirect would be tempted to touch.
	const target = "https://example.com/caf%C3%A9/ünïcode/a+b/%2F?q=a+b&x=%2F%7E&empty=&y=1;z#frag-ment/x?y"
	l := n.createLink(t, map[string]any{"original_url": " \t" + target + " \n"})
	if l.OriginalURL != target {
		t.Errorf("original_url = %q, want the submitted URL trimmed: %q", l.OriginalURL, target)
	}

	const wantCacheControl = "private, no-cache, no-store, must-revalidate"
	for range 2 {
		head := n.request(t, http.MethodHead, "/"+l.ShortCode, nil, nil)
		if head.status != http.StatusFound || head.header.Get("Location") != target {
			t.Errorf("HEAD: want 302 to %q, got %d Location %q", target, head.status, head.header.Get("Location"))
		}
		if cc := head.header.Get("Cache-Control"); cc != wantCacheControl {
			t.Errorf("HEAD Cache-Control = %q, want %q", cc, wantCacheControl)
		}
	}
	// Give HEADs a chance to be (wrongly) counted before reading stats.
	time.Sleep(3 * fastFlush)
	if got := n.clicks(t, l.ShortCode); got != 0 {
		t.Errorf("after two HEADs clicks = %d, want 0 (HEAD counts no click)", got)
	}

	r := n.get(t, "/"+l.ShortCode)
	if r.status != http.StatusFound {
		t.Fatalf("GET /%s: want 302, got %v", l.ShortCode, r)
	}
	if loc := r.header.Get("Location"); loc != target {
		t.Errorf("Location = %q\nwant       %q (byte for byte)", loc, target)
	}
	if cc := r.header.Get("Cache-Control"); cc != wantCacheControl {
		t.Errorf("Cache-Control = %q, want %q", cc, wantCacheControl)
	}

	if got := n.waitClicks(t, l.ShortCode, 1); got != 1 {
		t.Fatalf("after one GET clicks = %d within %v, want 1", got, clickWaitTimeout)
	}
	// A second look after more flushes: the click must be counted once.
	time.Sleep(3 * fastFlush)

	var read link
	rr := n.get(t, "/api/v1/urls/"+l.ShortCode)
	if rr.status != http.StatusOK {
		t.Fatalf("read: want 200, got %v", rr)
	}
	decodeObject(t, rr, readFields, &read)
	checkLinkFields(t, read)
	if read.ClickCount != 1 || read.LastAccessedAt == nil {
		t.Errorf("read after one click: click_count %d, last_accessed_at %v; want 1 and a time", read.ClickCount, read.LastAccessedAt)
	}

	var apiStats struct {
		ShortCode      string  `json:"short_code"`
		OriginalURL    string  `json:"original_url"`
		Clicks         int64   `json:"clicks"`
		CreatedAt      string  `json:"created_at"`
		LastAccessedAt *string `json:"last_accessed_at"`
	}
	sr := n.get(t, "/api/v1/urls/"+l.ShortCode+"/stats")
	if sr.status != http.StatusOK {
		t.Fatalf("api stats: want 200, got %v", sr)
	}
	decodeObject(t, sr, []string{"short_code", "original_url", "clicks", "created_at", "last_accessed_at"}, &apiStats)
	if apiStats.ShortCode != l.ShortCode || apiStats.OriginalURL != target || apiStats.Clicks != 1 || apiStats.LastAccessedAt == nil || apiStats.CreatedAt != l.CreatedAt {
		t.Errorf("api stats = %+v, want code %s, url %q, 1 click, created_at %s, a last access", apiStats, l.ShortCode, target, l.CreatedAt)
	}

	var shortStats struct {
		ShortCode      string  `json:"short_code"`
		OriginalURL    string  `json:"original_url"`
		ClickCount     int64   `json:"click_count"`
		CreatedAt      string  `json:"created_at"`
		LastAccessedAt *string `json:"last_accessed_at"`
	}
	ss := n.get(t, "/stats/"+l.ShortCode)
	if ss.status != http.StatusOK {
		t.Fatalf("/stats: want 200, got %v", ss)
	}
	decodeObject(t, ss, []string{"short_code", "original_url", "click_count", "created_at", "last_accessed_at"}, &shortStats)
	if shortStats.ShortCode != l.ShortCode || shortStats.ClickCount != 1 || shortStats.LastAccessedAt == nil {
		t.Errorf("/stats = %+v, want code %s with 1 click and a last access", shortStats, l.ShortCode)
	}
}

// TestRedirectStatusOption covers --redirect-status 301/307/308.
func TestRedirectStatusOption(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	for _, status := range []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			n := startNode(t, nodeOptions{Settings: map[string]string{"redirect-status": strconv.Itoa(status)}})
			const target = "https://example.com/status?x=1"
			l := n.createURL(t, target)
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				r := n.request(t, method, "/"+l.ShortCode, nil, nil)
				if r.status != status || r.header.Get("Location") != target {
					t.Errorf("%s: want %d to %q, got %d Location %q", method, status, target, r.status, r.header.Get("Location"))
				}
			}
		})
	}
}

// browserAccept is what a browser sends when following a link.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

// TestErrorPages covers 404/410/400 answers of the redirect path: problem+json
// for API clients and an escaped HTML page for browsers.
func TestErrorPages(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})

	// The URL carries characters that must be escaped if a page echoes it.
	expiring := n.createLink(t, map[string]any{
		"original_url":       "https://example.com/?a=1&b='x'",
		"expires_in_seconds": 1,
	})
	if expiring.ExpiresAt == nil {
		t.Fatalf("expires_at is null for a link with expires_in_seconds")
	}
	time.Sleep(time.Until(checkTimestamp(t, "expires_at", *expiring.ExpiresAt)) + 500*time.Millisecond)

	tests := []struct {
		name string
		path string
		want []int
	}{
		{"unknown code", "/Zz9unknown", []int{http.StatusNotFound}},
		{"expired link", "/" + expiring.ShortCode, []int{http.StatusGone}},
		{"markup in the path", "/%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E", []int{http.StatusBadRequest, http.StatusNotFound}},
		{"quotes in the path", "/a%22b%27c%3Cscript%3E", []int{http.StatusBadRequest, http.StatusNotFound}},
		{"too short to be a code", "/ab", []int{http.StatusBadRequest, http.StatusNotFound}},
		{"dot in the path", "/has.dot", []int{http.StatusBadRequest, http.StatusNotFound}},
		{"longer than any code", "/" + strings.Repeat("x", 65), []int{http.StatusBadRequest, http.StatusNotFound}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := n.request(t, http.MethodGet, tc.path, http.Header{"Accept": {"application/json"}}, nil)
			if !containsInt(tc.want, api.status) {
				t.Errorf("API client: status %d, want one of %v; %v", api.status, tc.want, api)
			} else {
				checkProblemBody(t, api)
			}

			page := n.request(t, http.MethodGet, tc.path, http.Header{"Accept": {browserAccept}}, nil)
			if !containsInt(tc.want, page.status) {
				t.Errorf("browser: status %d, want one of %v; %v", page.status, tc.want, page)
			}
			if ct := page.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Errorf("browser: Content-Type = %q, want text/html; %v", ct, page)
			}
			body := strings.ToLower(string(page.body))
			for _, raw := range []string{"<img", "<script", "&b='x'", `a"b'c`} {
				if strings.Contains(body, raw) {
					t.Errorf("browser page echoes %q unescaped: %s", raw, page.body)
				}
			}
		})
	}
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// TestReadStatsAndDelete covers GET /api/v1/urls/{code}, both stats
// endpoints and DELETE, including their 404s.
func TestReadStatsAndDelete(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})

	const target = "https://example.com/read-me"
	created := n.createURL(t, target)
	bystander := n.createURL(t, "https://example.com/bystander")

	r := n.get(t, "/api/v1/urls/"+created.ShortCode)
	if r.status != http.StatusOK {
		t.Fatalf("read: want 200, got %v", r)
	}
	var read link
	decodeObject(t, r, readFields, &read)
	checkLinkFields(t, read)
	if read.ID != created.ID || read.ShortCode != created.ShortCode || read.ShortURL != created.ShortURL ||
		read.OriginalURL != target || read.Workspace != "default" || read.CreatedAt != created.CreatedAt {
		t.Errorf("read = %+v, want the created link %+v", read, created)
	}
	if read.ClickCount != 0 || read.LastAccessedAt != nil || read.ExpiresAt != nil {
		t.Errorf("unclicked link: click_count %d, last_accessed_at %v, expires_at %v; want 0, null, null", read.ClickCount, read.LastAccessedAt, read.ExpiresAt)
	}

	for _, path := range []string{"/api/v1/urls/Zz9unknown", "/api/v1/urls/Zz9unknown/stats", "/stats/Zz9unknown"} {
		requireProblem(t, n.get(t, path), http.StatusNotFound)
	}
	requireProblem(t, n.request(t, http.MethodDelete, "/api/v1/urls/Zz9unknown", nil, nil), http.StatusNotFound)

	del := n.request(t, http.MethodDelete, "/api/v1/urls/"+created.ShortCode, nil, nil)
	if del.status != http.StatusNoContent || len(del.body) != 0 {
		t.Fatalf("DELETE: want 204 with no body, got %v", del)
	}
	requireProblem(t, n.request(t, http.MethodGet, "/"+created.ShortCode, http.Header{"Accept": {"application/json"}}, nil), http.StatusNotFound)
	requireProblem(t, n.get(t, "/api/v1/urls/"+created.ShortCode), http.StatusNotFound)
	requireProblem(t, n.get(t, "/api/v1/urls/"+created.ShortCode+"/stats"), http.StatusNotFound)
	requireProblem(t, n.get(t, "/stats/"+created.ShortCode), http.StatusNotFound)
	requireProblem(t, n.request(t, http.MethodDelete, "/api/v1/urls/"+created.ShortCode, nil, nil), http.StatusNotFound)

	// Deleting one link must leave the others alone.
	n.requireRedirect(t, bystander.ShortCode, "https://example.com/bystander")
}

// TestExpiry covers the three expiry fields and 410 for expired links.
func TestExpiry(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})

	t.Run("expires_in_seconds", func(t *testing.T) {
		const target = "https://example.com/short-lived"
		l := n.createLink(t, map[string]any{"original_url": target, "expires_in_seconds": 2})
		if l.ExpiresAt == nil {
			t.Fatalf("expires_at is null for a link with expires_in_seconds")
		}
		created := checkTimestamp(t, "created_at", l.CreatedAt)
		expires := checkTimestamp(t, "expires_at", *l.ExpiresAt)
		if d := expires.Sub(created); d < time.Second || d > 3*time.Second {
			t.Errorf("expires_at - created_at = %v, want about 2 s", d)
		}
		n.requireRedirect(t, l.ShortCode, target)

		time.Sleep(time.Until(expires) + 500*time.Millisecond)
		requireProblem(t, n.request(t, http.MethodGet, "/"+l.ShortCode, http.Header{"Accept": {"application/json"}}, nil), http.StatusGone)
		requireProblem(t, n.get(t, "/api/v1/urls/"+l.ShortCode), http.StatusGone)
	})

	t.Run("expires_in_hours", func(t *testing.T) {
		l := n.createLink(t, map[string]any{"original_url": "https://example.com/hours", "expires_in_hours": 2})
		if l.ExpiresAt == nil {
			t.Fatalf("expires_at is null for a link with expires_in_hours")
		}
		expires := checkTimestamp(t, "expires_at", *l.ExpiresAt)
		if d := time.Until(expires); d < 2*time.Hour-time.Minute || d > 2*time.Hour+time.Minute {
			t.Errorf("expires_at is %v from now, want about 2 h", d)
		}
		n.requireRedirect(t, l.ShortCode, "https://example.com/hours")
	})

	t.Run("expires_at", func(t *testing.T) {
		want := time.Now().UTC().Add(48 * time.Hour).Truncate(time.Second)
		l := n.createLink(t, map[string]any{"original_url": "https://example.com/at", "expires_at": want.Format(time.RFC3339)})
		if l.ExpiresAt == nil {
			t.Fatalf("expires_at is null for a link created with expires_at")
		}
		if got := checkTimestamp(t, "expires_at", *l.ExpiresAt); !got.Equal(want) {
			t.Errorf("expires_at = %s, want %s", *l.ExpiresAt, want.Format(time.RFC3339))
		}
		n.requireRedirect(t, l.ShortCode, "https://example.com/at")
	})

	// The limits themselves are allowed (100 years); one past them is not,
	// see TestBadInputIsRejected.
	t.Run("upper limits accepted", func(t *testing.T) {
		n.createLink(t, map[string]any{"original_url": "https://example.com/century-s", "expires_in_seconds": 3153600000})
		n.createLink(t, map[string]any{"original_url": "https://example.com/century-h", "expires_in_hours": 876000})
	})
}

// TestListLinks covers GET /api/v1/urls: workspace filter, newest first,
// cursor paging and limit validation.
func TestListLinks(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})

	const workspace = "list-ws"
	var created []string // in creation order
	for i := range 25 {
		l := n.createLink(t, map[string]any{"original_url": "https://example.com/list/" + itoa(i), "workspace": workspace})
		created = append(created, l.ShortCode)
	}
	for i := range 2 {
		n.createLink(t, map[string]any{"original_url": "https://example.com/other/" + itoa(i), "workspace": "other-ws"})
	}
	newestFirst := make([]string, len(created))
	for i, c := range created {
		newestFirst[len(created)-1-i] = c
	}

	type page struct {
		Links      []json.RawMessage `json:"links"`
		NextCursor *string           `json:"next_cursor"`
	}
	list := func(t *testing.T, query url.Values) ([]string, *string) {
		t.Helper()
		r := n.get(t, "/api/v1/urls?"+query.Encode())
		if r.status != http.StatusOK {
			t.Fatalf("list %v: want 200, got %v", query, r)
		}
		var p page
		decodeObject(t, r, []string{"links", "next_cursor"}, &p)
		var codes []string
		for _, raw := range p.Links {
			var l link
			decodeObject(t, response{status: r.status, header: r.header, body: raw}, readFields, &l)
			checkLinkFields(t, l)
			if l.Workspace != workspace {
				t.Errorf("list of %s returned a link of workspace %q", workspace, l.Workspace)
			}
			codes = append(codes, l.ShortCode)
		}
		return codes, p.NextCursor
	}

	t.Run("pages of 10", func(t *testing.T) {
		var all []string
		var sizes []int
		cursor := ""
		for range 10 { // 25 links need 3 pages; 10 bounds a cursor that never ends
			q := url.Values{"workspace": {workspace}, "limit": {"10"}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			codes, next := list(t, q)
			all = append(all, codes...)
			sizes = append(sizes, len(codes))
			if next == nil {
				break
			}
			if *next == "" || *next == cursor {
				t.Fatalf("next_cursor %q does not advance", *next)
			}
			cursor = *next
		}
		if strings.Join(all, ",") != strings.Join(newestFirst, ",") {
			t.Errorf("paged list = %v\nwant newest first %v", all, newestFirst)
		}
		if len(sizes) != 3 || sizes[0] != 10 || sizes[1] != 10 || sizes[2] != 5 {
			t.Errorf("page sizes = %v, want [10 10 5]", sizes)
		}
	})

	t.Run("default and max limit", func(t *testing.T) {
		for _, q := range []url.Values{{"workspace": {workspace}}, {"workspace": {workspace}, "limit": {"1000"}}} {
			codes, next := list(t, q)
			if strings.Join(codes, ",") != strings.Join(newestFirst, ",") || next != nil {
				t.Errorf("list %v = %v (next %v), want all 25 newest first and next_cursor null", q, codes, next)
			}
		}
	})

	t.Run("bad limit", func(t *testing.T) {
		for _, limit := range []string{"0", "1001", "abc", "-1"} {
			requireProblem(t, n.get(t, "/api/v1/urls?workspace="+workspace+"&limit="+limit), http.StatusBadRequest)
		}
	})
}

// TestQRCode covers GET /api/v1/urls/{code}/qr.
func TestQRCode(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})
	l := n.createURL(t, "https://example.com/qr")

	r := n.get(t, "/api/v1/urls/"+l.ShortCode+"/qr?size=256")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "image/png" {
		t.Fatalf("qr: want 200 image/png, got %d %q", r.status, r.header.Get("Content-Type"))
	}
	img, err := png.Decode(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("qr body is not a PNG: %v", err)
	}
	// QR libraries round the size to whole modules, hence the range.
	if b := img.Bounds(); b.Dx() < 200 || b.Dx() > 300 || b.Dy() < 200 || b.Dy() > 300 {
		t.Errorf("qr?size=256 is %dx%d, want about 256x256", b.Dx(), b.Dy())
	}

	requireProblem(t, n.get(t, "/api/v1/urls/Zz9unknown/qr"), http.StatusNotFound)
}

// TestRateLimit covers the per-client create rate limit, Retry-After and
// X-Forwarded-For, believed only from a --trusted-proxy.
func TestRateLimit(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	limited := map[string]string{"create-rate": "1", "create-burst": "2"}

	// exhaust creates until the node answers 429 (bounded) and returns it.
	exhaust := func(t *testing.T, n *node, header http.Header) response {
		t.Helper()
		header.Set("Content-Type", "application/json")
		for i := range 20 {
			r := n.request(t, http.MethodPost, "/api/v1/urls", header, []byte(`{"url":"https://example.com/rate/`+itoa(i)+`"}`))
			switch r.status {
			case http.StatusCreated:
			case http.StatusTooManyRequests:
				return r
			default:
				t.Fatalf("create %d: want 201 or 429, got %v", i, r)
			}
		}
		t.Fatalf("20 quick creates with --create-rate 1 --create-burst 2 were never limited")
		return response{}
	}

	t.Run("per client", func(t *testing.T) {
		t.Parallel()
		n := startNode(t, nodeOptions{Settings: limited})
		first := n.createURL(t, "https://example.com/rate/first")
		r := exhaust(t, n, http.Header{})
		requireProblem(t, r, http.StatusTooManyRequests)
		retry, err := strconv.Atoi(r.header.Get("Retry-After"))
		if err != nil || retry < 1 || retry > 60 {
			t.Fatalf("Retry-After = %q, want a number of seconds", r.header.Get("Retry-After"))
		}

		// The limit is for creates only: redirects keep working.
		n.requireRedirect(t, first.ShortCode, "https://example.com/rate/first")

		// A client that is not a trusted proxy cannot pick its own bucket
		// with X-Forwarded-For. Each spoofed address would get a fresh
		// burst if the header were believed; the real bucket refills at
		// most one token in the meantime, so at least one must be refused.
		refused := 0
		for i := range 5 {
			spoofed := n.request(t, http.MethodPost, "/api/v1/urls", http.Header{
				"Content-Type":    {"application/json"},
				"X-Forwarded-For": {"203.0.113." + itoa(i+1)},
			}, []byte(`{"url":"https://example.com/rate/spoofed/`+itoa(i)+`"}`))
			if spoofed.status == http.StatusTooManyRequests {
				refused++
			}
		}
		if refused == 0 {
			t.Errorf("X-Forwarded-For from an untrusted client was believed: 5 creates with spoofed addresses all passed the exhausted limit")
		}

		time.Sleep(time.Duration(retry)*time.Second + 200*time.Millisecond)
		n.createURL(t, "https://example.com/rate/after-wait")
	})

	t.Run("behind a trusted proxy", func(t *testing.T) {
		t.Parallel()
		settings := map[string]string{"trusted-proxy": "127.0.0.1"}
		for k, v := range limited {
			settings[k] = v
		}
		n := startNode(t, nodeOptions{Settings: settings})
		r := exhaust(t, n, http.Header{"X-Forwarded-For": {"198.51.100.1"}})
		requireProblem(t, r, http.StatusTooManyRequests)

		other := n.request(t, http.MethodPost, "/api/v1/urls", http.Header{
			"Content-Type":    {"application/json"},
			"X-Forwarded-For": {"198.51.100.2"},
		}, []byte(`{"url":"https://example.com/rate/other-client"}`))
		if other.status != http.StatusCreated {
			t.Errorf("another client behind the trusted proxy: want 201, got %v", other)
		}
	})
}

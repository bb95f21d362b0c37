package httpd

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// The compatible APIs through a real node: each case is one request a
// client of that API sends, with the status and the fields it reads.

func decodeBody(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("answer is not a JSON object: %v: %s", err, body)
	}
	return m
}

// field reads a dotted path of a decoded answer.
func field(m map[string]any, path string) any {
	var v any = m
	for _, k := range strings.Split(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = obj[k]
	}
	return v
}

func TestShlinkAPI(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	key := func(t *testing.T) string {
		_, k := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
		return k
	}(t)
	shlink := func(method, uri, body string) (int, map[string]any, string) {
		ctx := do(s, method, uri, "application/json", body, "X-Api-Key", key, "Origin", "https://app.shlink.io")
		var m map[string]any
		if len(ctx.Response.Body()) > 0 && string(ctx.Response.Header.ContentType()) != "text/plain; charset=utf-8" {
			m = decodeBody(t, ctx.Response.Body())
		}
		if got := string(ctx.Response.Header.Peek("Access-Control-Allow-Origin")); got != "*" {
			t.Errorf("%s %s: Access-Control-Allow-Origin %q, want *", method, uri, got)
		}
		return ctx.Response.StatusCode(), m, string(ctx.Response.Body())
	}
	until := time.Now().Add(48 * time.Hour).UTC().Format("2006-01-02T15:04:05+00:00")
	status, created, raw := shlink("POST", "/rest/v3/short-urls",
		`{"longUrl":"https://example.com/shlink","customSlug":"shl-1","tags":["a","b"],"title":"T","maxVisits":5}`)
	if status != 200 {
		t.Fatalf("create: %d %s", status, raw)
	}
	for path, want := range map[string]any{
		"shortCode": "shl-1", "shortUrl": "http://sho.rt/shl-1", "longUrl": "https://example.com/shlink", "title": "T",
		"forwardQuery": true, "crawlable": false, "hasRedirectRules": false, "domain": nil,
		"meta.maxVisits": 5.0, "meta.validUntil": nil, "meta.validSince": nil,
		"visitsSummary.total": 0.0, "visitsSummary.nonBots": 0.0, "visitsSummary.bots": 0.0,
	} {
		if got := field(created, path); got != want {
			t.Errorf("create: %s = %#v, want %#v", path, got, want)
		}
	}
	if _, err := time.Parse(time.RFC3339, field(created, "dateCreated").(string)); err != nil {
		t.Errorf("dateCreated: %v", err)
	}
	// The link is linkraft's own: its native read shows the same.
	if ctx := do(s, "GET", "/api/v1/urls/shl-1", "", ""); !strings.Contains(string(ctx.Response.Body()), `"forward_query":true`) {
		t.Errorf("native read of a Shlink create: %s", ctx.Response.Body())
	}
	mustCreate(t, s, `{"url":"https://example.com/other","workspace":"team","tags":["b"]}`)
	mustCreate(t, s, `{"url":"https://example.com/elsewhere","workspace":"other","tags":["a"]}`)

	cases := []struct {
		name, method, uri, body string
		status                  int
		want                    map[string]any
	}{
		{"health", "GET", "/rest/v3/health", "", 200, map[string]any{"status": "pass", "version": "4.3.0"}},
		{"get", "GET", "/rest/v3/short-urls/shl-1", "", 200, map[string]any{"shortCode": "shl-1", "title": "T"}},
		{"get on v2", "GET", "/rest/v2/short-urls/shl-1", "", 200, map[string]any{"shortCode": "shl-1"}},
		{"get missing", "GET", "/rest/v3/short-urls/nope-1", "", 404,
			map[string]any{"type": "https://shlink.io/api/error/short-url-not-found", "status": 404.0, "shortCode": "nope-1"}},
		{"taken slug", "POST", "/rest/v3/short-urls", `{"longUrl":"https://example.com/x","customSlug":"shl-1"}`, 400,
			map[string]any{"type": "https://shlink.io/api/error/non-unique-slug", "customSlug": "shl-1"}},
		{"bad url", "POST", "/rest/v3/short-urls", `{"longUrl":"ftp://example.com/x"}`, 400,
			map[string]any{"type": "https://shlink.io/api/error/invalid-data", "title": "Invalid data"}},
		{"list the key's links", "GET", "/rest/v3/short-urls?itemsPerPage=1", "", 200,
			map[string]any{"shortUrls.pagination.totalItems": 2.0, "shortUrls.pagination.pagesCount": 2.0, "shortUrls.pagination.itemsInCurrentPage": 1.0}},
		{"list tags all", "GET", "/rest/v3/short-urls?tags[]=a&tags[]=b&tagsMode=all", "", 200,
			map[string]any{"shortUrls.pagination.totalItems": 1.0}},
		{"list tags any", "GET", "/rest/v3/short-urls?tags[]=a&tags[]=b", "", 200,
			map[string]any{"shortUrls.pagination.totalItems": 2.0}},
		{"list search", "GET", "/rest/v3/short-urls?searchTerm=other", "", 200,
			map[string]any{"shortUrls.pagination.totalItems": 1.0}},
		{"list bad order", "GET", "/rest/v3/short-urls?orderBy=nope-ASC", "", 400,
			map[string]any{"type": "https://shlink.io/api/error/invalid-data"}},
		{"crawlable", "POST", "/rest/v3/short-urls", `{"longUrl":"https://example.com/c","customSlug":"crawl-me","crawlable":true}`, 200,
			map[string]any{"crawlable": true}},
		{"crawlable read", "GET", "/rest/v3/short-urls/crawl-me", "", 200, map[string]any{"crawlable": true}},
		{"crawlable off", "PATCH", "/rest/v3/short-urls/crawl-me", `{"crawlable":false}`, 200, map[string]any{"crawlable": false}},
		{"edit sets", "PATCH", "/rest/v3/short-urls/shl-1", `{"validUntil":"` + until + `"}`, 200,
			map[string]any{"meta.validUntil": until, "title": "T"}},
		{"edit clears", "PATCH", "/rest/v3/short-urls/shl-1", `{"title":null,"maxVisits":null,"validUntil":null,"longUrl":"https://example.com/moved"}`, 200,
			map[string]any{"title": nil, "meta.maxVisits": nil, "meta.validUntil": nil, "longUrl": "https://example.com/moved"}},
		{"tags", "GET", "/rest/v3/tags", "", 200, map[string]any{}},
		{"tags stats", "GET", "/rest/v3/tags/stats", "", 200, map[string]any{}},
		{"domains", "GET", "/rest/v3/domains", "", 200, map[string]any{}},
		{"mercure", "GET", "/rest/v3/mercure-info", "", 501, map[string]any{"type": "https://shlink.io/api/error/mercure-not-configured"}},
		{"visits", "GET", "/rest/v3/short-urls/shl-1/visits", "", 200, map[string]any{"visits.pagination.totalItems": 0.0, "visits.pagination.currentPage": 1.0}},
		{"visits, bad excludeBots", "GET", "/rest/v3/short-urls/shl-1/visits?excludeBots=maybe", "", 400, map[string]any{"type": "https://shlink.io/api/error/invalid-data"}},
		{"visits, bad page", "GET", "/rest/v3/short-urls/shl-1/visits?page=0", "", 400, map[string]any{"type": "https://shlink.io/api/error/invalid-data"}},
		{"delete", "DELETE", "/rest/v3/short-urls/shl-1", "", 204, nil},
		{"deleted", "GET", "/rest/v3/short-urls/shl-1", "", 404, map[string]any{"type": "https://shlink.io/api/error/short-url-not-found"}},
	}
	for _, c := range cases {
		status, got, raw := shlink(c.method, c.uri, c.body)
		if status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, status, c.status, raw)
			continue
		}
		for path, want := range c.want {
			if v := field(got, path); v != want {
				t.Errorf("%s: %s = %#v, want %#v (%s)", c.name, path, v, want, raw)
			}
		}
	}

	// One-call create with the key in the query; txt answers the URL.
	q := url.Values{"apiKey": {key}, "longUrl": {"https://example.com/one-call"}, "format": {"txt"}}
	ctx := do(s, "GET", "/rest/v3/short-urls/shorten?"+q.Encode(), "", "", "Authorization", "")
	if ctx.Response.StatusCode() != 200 || !strings.HasPrefix(string(ctx.Response.Body()), "http://sho.rt/") {
		t.Errorf("shorten: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	// Credentials: none, and a wrong one.
	for _, c := range []struct{ header, value, typ string }{
		{"Authorization", "", "https://shlink.io/api/error/missing-authentication"},
		{"X-Api-Key", "lk_wrong", "https://shlink.io/api/error/invalid-api-key"},
	} {
		ctx := do(s, "GET", "/rest/v3/short-urls", "", "", c.header, c.value)
		if ctx.Response.StatusCode() != 401 || field(decodeBody(t, ctx.Response.Body()), "type") != c.typ {
			t.Errorf("%s %q: %d %s", c.header, c.value, ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
	// A browser's preflight: the headers it asks for are allowed, as Shlink echoes them.
	ctx = do(s, "OPTIONS", "/rest/v3/short-urls", "", "", "Origin", "https://app.shlink.io", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "X-Api-Key, Content-Type")
	if ctx.Response.StatusCode() != 204 || !strings.Contains(string(ctx.Response.Header.Peek("Access-Control-Allow-Headers")), "X-Api-Key") ||
		!strings.Contains(string(ctx.Response.Header.Peek("Access-Control-Allow-Methods")), "POST") {
		t.Errorf("preflight: %d %s", ctx.Response.StatusCode(), ctx.Response.Header.String())
	}
}

// TestShlinkListFiltersTags: a Shlink client's list by tags keeps exactly
// the links it asks for, with one tag (which linkraft's own list filters)
// as with several (which the adapter filters), in either spelling of the
// array and either mode. Every case expects other links than the whole
// list does, so a filter that is skipped cannot pass for one that works.
func TestShlinkListFiltersTags(t *testing.T) {
	s := newTestServer(t, nil)
	_, key := addKey(t, s, fsm.ScopeLinksRead, 0, "tagged")
	for code, tags := range map[string]string{
		"tag-a": `["a"]`, "tag-b": `["b"]`, "tag-ab": `["a","b"]`, "tag-c": `["c"]`, "tag-none": `[]`,
	} {
		mustCreate(t, s, `{"url":"https://example.com/`+code+`","custom_code":"`+code+`","workspace":"tagged","tags":`+tags+`}`)
	}
	// A link the key may not see, with a tag it asks for.
	mustCreate(t, s, `{"url":"https://example.com/unseen","custom_code":"tag-unseen","workspace":"other","tags":["a"]}`)
	// list is the sorted codes of one page holding every match.
	list := func(t *testing.T, query string) []string {
		t.Helper()
		ctx := do(s, "GET", "/rest/v3/short-urls?itemsPerPage=-1&"+query, "", "", "X-Api-Key", key)
		var answer struct {
			ShortURLs struct {
				Data []struct {
					ShortCode string `json:"shortCode"`
				} `json:"data"`
			} `json:"shortUrls"`
		}
		if status(ctx) != 200 || json.Unmarshal(ctx.Response.Body(), &answer) != nil {
			t.Fatalf("list %s: %d %s", query, status(ctx), ctx.Response.Body())
		}
		codes := []string{}
		for _, d := range answer.ShortURLs.Data {
			codes = append(codes, d.ShortCode)
		}
		slices.Sort(codes)
		return codes
	}
	unfiltered := list(t, "")
	if want := []string{"tag-a", "tag-ab", "tag-b", "tag-c", "tag-none"}; !slices.Equal(unfiltered, want) {
		t.Fatalf("the whole list: %v, want %v", unfiltered, want)
	}
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"one tag", "tags[]=a", []string{"tag-a", "tag-ab"}},
		{"one tag, without brackets", "tags=a", []string{"tag-a", "tag-ab"}},
		{"one tag, in other case", "tags[]=A", []string{"tag-a", "tag-ab"}},
		{"one tag, all", "tags[]=c&tagsMode=all", []string{"tag-c"}},
		{"one tag, any", "tags[]=b&tagsMode=any", []string{"tag-ab", "tag-b"}},
		{"one tag no link has", "tags[]=nope", []string{}},
		{"two tags, any by default", "tags[]=a&tags[]=b", []string{"tag-a", "tag-ab", "tag-b"}},
		{"two tags, any", "tags[]=a&tags[]=c&tagsMode=any", []string{"tag-a", "tag-ab", "tag-c"}},
		{"two tags, all", "tags[]=a&tags[]=b&tagsMode=all", []string{"tag-ab"}},
		{"two tags, both spellings", "tags[]=b&tags=c", []string{"tag-ab", "tag-b", "tag-c"}},
		{"three tags, all", "tags[]=a&tags[]=b&tags[]=c&tagsMode=all", []string{}},
		{"excluding one tag", "excludeTags[]=a", []string{"tag-b", "tag-c", "tag-none"}},
		{"excluding two tags, all", "excludeTags[]=a&excludeTags[]=b&excludeTagsMode=all", []string{"tag-a", "tag-b", "tag-c", "tag-none"}},
		{"one tag, excluding another", "tags[]=a&excludeTags[]=b", []string{"tag-a"}},
		// PHP's http_build_query and Guzzle index arrays.
		{"two tags, indexed", "tags%5B0%5D=a&tags%5B1%5D=c", []string{"tag-a", "tag-ab", "tag-c"}},
		{"two tags, indexed, all", "tags[0]=a&tags[1]=b&tagsMode=all", []string{"tag-ab"}},
		{"excluding one tag, indexed", "excludeTags[0]=a", []string{"tag-b", "tag-c", "tag-none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if slices.Equal(tc.want, unfiltered) {
				t.Fatalf("the case expects the whole list, so it cannot tell a filter from none")
			}
			if got := list(t, tc.query); !slices.Equal(got, tc.want) {
				t.Errorf("list %s: %v, want %v", tc.query, got, tc.want)
			}
		})
	}
}

// compatMatrixRows are the authorization matrix's rows for the compatible
// APIs (TestAuthorizationMatrix's credentials, in its order), on the
// team link code. Each API answers refusals in its own shape: Shlink and
// Kutt 401 and 403, YOURLS 403 for every failed login.
func compatMatrixRows(code string) []struct {
	method, path, body string
	write              bool
	want               []int
} {
	type row = struct {
		method, path, body string
		write              bool
		want               []int
	}
	const creds = 11
	refused := func(status int) []int { return []int{status, status, status, status, status} }
	with := func(first []int, rest ...int) []int { return append(append([]int{}, first...), rest...) }
	all := func(status int) []int {
		out := make([]int, creds)
		for i := range out {
			out[i] = status
		}
		return out
	}
	r401 := refused(401)
	rows := []row{{"GET", "/rest/health", "", false, all(200)}}
	for _, v := range []string{"v1", "v2", "v3"} {
		p := "/rest/" + v
		rows = append(rows,
			row{"GET", p + "/health", "", false, all(200)},
			row{"GET", p + "/short-urls", "", false, with(r401, 200, 200, 200, 200, 200, 200)},
			row{"POST", p + "/short-urls", `{"longUrl":"https://example.com/shlink-` + v + `"}`, true, with(r401, 403, 200, 200, 200, 200, 200)},
			row{"GET", p + "/short-urls/shorten?longUrl=https://example.com/one-" + v, "", true, with(r401, 403, 200, 200, 200, 200, 200)},
			row{"GET", p + "/short-urls/" + code, "", false, with(r401, 200, 404, 200, 200, 200, 200)},
			row{"PATCH", p + "/short-urls/" + code, `{"title":"shlink"}`, true, with(r401, 403, 404, 200, 200, 200, 200)},
			row{"DELETE", p + "/short-urls/" + code, "", true, with(r401, 403, 404)},
			row{"GET", p + "/tags", "", false, with(r401, 200, 200, 200, 200, 200, 200)},
			row{"GET", p + "/tags/stats", "", false, with(r401, 200, 200, 200, 200, 200, 200)},
			row{"GET", p + "/domains", "", false, with(r401, 200, 200, 200, 200, 200, 200)},
			// No link of the matrix has a tag: renaming one is Shlink's
			// tag-not-found to those who may change links.
			row{"PUT", p + "/tags", `{"oldName":"nosuchtag","newName":"b"}`, true, with(r401, 403, 404, 404, 404, 404, 404)},
			row{"DELETE", p + "/tags?tags[]=nosuchtag", "", true, with(r401, 403, 204, 204, 204, 204, 204)},
			row{"GET", p + "/short-urls/" + code + "/redirect-rules", "", false, with(r401, 200, 404, 200, 200, 200, 200)},
			row{"POST", p + "/short-urls/" + code + "/redirect-rules", `{"redirectRules":[]}`, true, with(r401, 403, 404, 200, 200, 200, 200)},
			row{"PATCH", p + "/domains/redirects", `{"domain":"sho.rt"}`, true, with(r401, 403, 403, 403, 403, 200, 200)},
			// What linkraft does not have answers the same to everyone.
			row{"GET", p + "/mercure-info", "", false, all(501)},
			row{"GET", p + "/visits", "", false, with(r401, 403, 200, 403, 200, 200, 200)},
			row{"GET", p + "/tags/no-such-tag/visits", "", false, with(r401, 404, 404, 404, 404, 404, 404)},
			// A key that reads visits, not an admin's, sees and deletes no orphan visits.
			row{"GET", p + "/visits/orphan", "", false, with(r401, 403, 200, 403, 200, 200, 200)},
			row{"DELETE", p + "/visits/orphan", "", true, with(r401, 403, 200, 403, 200, 200, 200)},
			row{"GET", p + "/visits/non-orphan", "", false, with(r401, 403, 200, 403, 200, 200, 200)},
			row{"GET", p + "/short-urls/" + code + "/visits", "", false, with(r401, 403, 404, 403, 200, 200, 200)},
			row{"DELETE", p + "/short-urls/" + code + "/visits", "", true, with(r401, 403, 404, 200, 200, 200, 200)},
			row{"GET", p + "/domains/sho.rt/visits", "", false, with(r401, 403, 200, 403, 200, 200, 200)},
		)
	}
	for _, p := range []string{"/api/v2", "/api"} {
		rows = append(rows,
			row{"GET", p + "/health", "", false, all(200)},
			row{"GET", p + "/links", "", false, with(r401, 200, 200, 200, 200, 200, 200)},
			row{"POST", p + "/links", `{"target":"https://example.com/kutt` + strings.ReplaceAll(p, "/", "-") + `"}`, true, with(r401, 403, 201, 201, 201, 201, 201)},
			row{"PATCH", p + "/links/" + code, `{"description":"kutt"}`, true, with(r401, 403, 404, 200, 200, 200, 200)},
			row{"DELETE", p + "/links/" + code, "", true, with(r401, 403, 404)},
			row{"GET", p + "/links/" + code + "/stats", "", false, with(r401, 403, 404, 403, 200, 200, 200)},
			row{"DELETE", p + "/links/" + code + "/stats", "", false, with(r401, 403, 404, 403, 200, 200, 200)},
			row{"GET", p + "/users", "", false, with(r401, 200, 200, 200, 200, 200, 200)},
			row{"POST", p + "/domains", `{"address":"m.example"}`, true, all(501)},
			row{"DELETE", p + "/domains/m.example", "", true, all(501)},
		)
	}
	r403 := refused(403)
	rows = append(rows,
		row{"GET", "/yourls-api.php?action=expand&format=json&shorturl=" + code, "", false, with(r403, 200, 404, 200, 200, 200, 200)},
		// A URL already shortened in the key's workspace is YOURLS'
		// error:url, a 400 since YOURLS 1.9.2.
		row{"POST", "/yourls-api.php?action=shorturl&format=json&url=https://example.com/yourls", "", true, with(r403, 403, 200, 200, 400, 200, 400)},
	)
	return append(rows, bitlyMatrixRows(code)...)
}

// TestYOURLSAPI sends the requests of the yourls Python client (1.2.3:
// GET, format=json, signature= or username/password=) and reads what it
// reads: url, title, ip and a "Y-m-d H:i:s" date on every link, YOURLS'
// status and code on a failure.
func TestYOURLSAPI(t *testing.T) {
	s := newTestServer(t, nil)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	yourls := func(q url.Values) (int, map[string]any, string) {
		ctx := do(s, "GET", "/yourls-api.php?"+q.Encode(), "", "", "Authorization", "")
		body := string(ctx.Response.Body())
		if q.Get("format") != "json" {
			return ctx.Response.StatusCode(), nil, body
		}
		return ctx.Response.StatusCode(), decodeBody(t, ctx.Response.Body()), body
	}
	strictDate := func(t *testing.T, v any) {
		t.Helper()
		s, _ := v.(string)
		if _, err := time.Parse("2006-01-02 15:04:05", s); err != nil {
			t.Errorf("date %q is not Y-m-d H:i:s: %v", s, err)
		}
	}
	sig := func(kv ...string) url.Values {
		q := url.Values{"signature": {key}, "format": {"json"}}
		for i := 0; i+1 < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		return q
	}
	status, m, raw := yourls(sig("action", "shorturl", "url", "https://example.com/y", "keyword", "ykw", "title", "Y"))
	if status != 200 || m["status"] != "success" || m["shorturl"] != "http://sho.rt/ykw" {
		t.Fatalf("shorturl: %d %s", status, raw)
	}
	for _, f := range []string{"keyword", "url", "title", "date", "ip"} {
		if _, ok := field(m, "url").(map[string]any)[f]; !ok {
			t.Errorf("shorturl: url.%s missing: %s", f, raw)
		}
	}
	strictDate(t, field(m, "url.date"))

	cases := []struct {
		name   string
		q      url.Values
		status int
		want   map[string]any
	}{
		{"taken keyword", sig("action", "shorturl", "url", "https://example.com/other", "keyword", "ykw"), 400,
			map[string]any{"status": "fail", "code": "error:keyword", "statusCode": "400", "errorCode": "400"}},
		{"url exists", sig("action", "shorturl", "url", "https://example.com/y"), 400,
			map[string]any{"status": "fail", "code": "error:url", "url.keyword": "ykw", "url.clicks": "0", "shorturl": "http://sho.rt/ykw",
				"statusCode": "400", "message": "https://example.com/y already exists in database (short URL: sho.rt/ykw)"}},
		{"no url", sig("action", "shorturl"), 400, map[string]any{"code": "error:nourl"}},
		{"a short URL", sig("action", "shorturl", "url", "http://sho.rt/ykw"), 400,
			map[string]any{"status": "fail", "code": "error:noloop", "message": "URL is a short URL", "statusCode": "400"}},
		{"expand keyword", sig("action", "expand", "shorturl", "ykw"), 200, map[string]any{"longurl": "https://example.com/y", "keyword": "ykw"}},
		{"expand short URL", sig("action", "expand", "shorturl", "http://sho.rt/ykw"), 200, map[string]any{"longurl": "https://example.com/y"}},
		{"expand unknown", sig("action", "expand", "shorturl", "nope-1"), 404,
			map[string]any{"message": "Error: short URL not found", "keyword": "nope-1", "errorCode": "404"}},
		{"url-stats unknown", sig("action", "url-stats", "shorturl", "nope-1"), 404,
			map[string]any{"message": "Error: short URL not found", "statusCode": float64(404)}},
		{"url-stats", sig("action", "url-stats", "shorturl", "ykw"), 200, map[string]any{"link.clicks": "0", "link.ip": "0.0.0.0", "link.title": "Y"}},
		{"stats", sig("action", "stats", "filter", "top", "limit", "1"), 200,
			map[string]any{"stats.total_links": "1", "links.link_1.shorturl": "http://sho.rt/ykw"}},
		{"stats without limit: totals only", sig("action", "stats"), 200, map[string]any{"links": nil, "stats.total_links": "1"}},
		{"stats limit not a number", sig("action", "stats", "limit", "ten"), 200, map[string]any{"links": nil, "stats.total_links": "1"}},
		{"stats unknown filter is top", sig("action", "stats", "filter", "newest", "limit", "1"), 200,
			map[string]any{"links.link_1.shorturl": "http://sho.rt/ykw"}},
		{"db-stats", sig("action", "db-stats"), 200, map[string]any{"db-stats.total_links": "1", "db-stats.total_clicks": "0"}},
		{"username and password", url.Values{"username": {"me"}, "password": {key}, "format": {"json"}, "action": {"db-stats"}}, 200,
			map[string]any{"db-stats.total_links": "1"}},
		{"no credential", url.Values{"format": {"json"}, "action": {"db-stats"}}, 403, map[string]any{"message": "Please log in", "errorCode": "403"}},
		{"wrong key", url.Values{"signature": {"lk_wrong"}, "format": {"json"}, "action": {"db-stats"}}, 403, map[string]any{"errorCode": "403"}},
		{"unknown action", sig("action", "nope"), 400, map[string]any{"errorCode": "400", "message": `Unknown or missing "action" parameter`}},
		{"no action", sig(), 400, map[string]any{"errorCode": "400", "message": `Unknown or missing "action" parameter`}},
		{"version", sig("action", "version"), 200, map[string]any{"version": "1.9.2", "db_version": nil}},
		{"version db=1", sig("action", "version", "db", "1"), 200, map[string]any{"version": "1.9.2", "db_version": "1"}},
		// With a timestamp the signature is a hash of it and the key's
		// signature token (compat_signature_test.go), never the key.
		{"the key as a time-limited signature", sig("action", "db-stats", "timestamp", strconv.FormatInt(time.Now().Unix(), 10)), 403, map[string]any{"errorCode": "403"}},
		{"the key as a time-limited sha256 signature", sig("action", "db-stats", "timestamp", "1700000000", "hash", "sha256"), 403, map[string]any{"errorCode": "403"}},
	}
	for _, c := range cases {
		status, m, raw := yourls(c.q)
		if status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, status, c.status, raw)
			continue
		}
		for path, want := range c.want {
			if v := field(m, path); v != want {
				t.Errorf("%s: %s = %#v, want %#v (%s)", c.name, path, v, want, raw)
			}
		}
	}
	strictDate(t, field(decodeBody(t, []byte(func() string { _, _, r := yourls(sig("action", "url-stats", "shorturl", "ykw")); return r }())), "link.timestamp"))

	// XML is the default format; simple is the bare value.
	q := sig("action", "expand", "shorturl", "ykw")
	q.Del("format")
	if _, _, body := yourls(q); !strings.Contains(body, "<longurl>https://example.com/y</longurl>") || !strings.HasPrefix(body, "<?xml") {
		t.Errorf("xml: %s", body)
	}
	q.Set("format", "simple")
	if _, _, body := yourls(q); body != "https://example.com/y" {
		t.Errorf("simple: %q", body)
	}
	q.Set("format", "jsonp")
	q.Set("callback", "cb")
	if _, _, body := yourls(q); !strings.HasPrefix(body, "cb({") {
		t.Errorf("jsonp: %q", body)
	}
}

// TestYOURLSFormats: the answer in each format as yourls_api_output
// writes it (YOURLS 1.9.2+): simple is each action's own value, an
// unknown format is simple, xml's root is <root>, jsonp takes callback or
// jsonp and refuses a callback that is not a JavaScript name, json is
// never wrapped; the simple key is never in the other formats, and
// callback is there only when one was sent.
func TestYOURLSFormats(t *testing.T) {
	s := newTestServer(t, nil)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	get := func(kv ...string) (int, string, string) {
		q := url.Values{"signature": {key}}
		for i := 0; i+1 < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		ctx := do(s, "GET", "/yourls-api.php?"+q.Encode(), "", "", "Authorization", "")
		return ctx.Response.StatusCode(), string(ctx.Response.Header.ContentType()), string(ctx.Response.Body())
	}
	if status, _, body := get("action", "shorturl", "url", "https://example.com/f", "keyword", "fkw", "format", "simple"); status != 200 || body != "http://sho.rt/fkw" {
		t.Fatalf("shorturl simple: %d %q", status, body)
	}
	const xmlHead = `<?xml version="1.0" encoding="UTF-8"?>` + "\n<root>"
	cases := []struct {
		name   string
		kv     []string
		status int
		ctype  string // its prefix
		body   string // the whole body, or with a * its prefix
		not    string // must not be in the body
	}{
		{"shorturl simple: the short URL", []string{"action", "shorturl", "url", "https://example.com/f2", "format", "simple"}, 200, "text/plain", "http://sho.rt/*", "added"},
		{"shorturl existing simple: its short URL", []string{"action", "shorturl", "url", "https://example.com/f", "format", "simple"}, 400, "text/plain", "http://sho.rt/fkw", ""},
		{"shorturl taken keyword simple: nothing", []string{"action", "shorturl", "url", "https://example.com/f3", "keyword", "fkw", "format", "simple"}, 400, "text/plain", "", ""},
		{"expand simple: the long URL", []string{"action", "expand", "shorturl", "fkw", "format", "simple"}, 200, "text/plain", "https://example.com/f", ""},
		{"expand unknown simple", []string{"action", "expand", "shorturl", "nope-2", "format", "simple"}, 404, "text/plain", "not found", ""},
		{"url-stats simple", []string{"action", "url-stats", "shorturl", "fkw", "format", "simple"}, 200, "text/plain", "Need either XML or JSON format for stats", ""},
		{"stats simple", []string{"action", "stats", "limit", "1", "format", "simple"}, 200, "text/plain", "Need either XML or JSON format for stats", ""},
		{"db-stats simple", []string{"action", "db-stats", "format", "simple"}, 200, "text/plain", "Need either XML or JSON format for stats", ""},
		{"version simple", []string{"action", "version", "format", "simple"}, 200, "text/plain", "1.9.2", ""},
		{"unknown action simple", []string{"action", "nope", "format", "simple"}, 400, "text/plain", `Unknown or missing "action" parameter`, ""},
		{"unknown format is simple", []string{"action", "expand", "shorturl", "fkw", "format", "txt"}, 200, "text/plain", "https://example.com/f", ""},
		{"empty format is simple", []string{"action", "expand", "shorturl", "fkw", "format", ""}, 200, "text/plain", "https://example.com/f", ""},
		{"xml root", []string{"action", "expand", "shorturl", "fkw"}, 200, "application/xml",
			xmlHead + "<keyword>fkw</keyword><shorturl>http://sho.rt/fkw</shorturl><longurl>https://example.com/f</longurl><title/><message>success</message><statusCode>200</statusCode></root>\n", ""},
		{"xml error", []string{"action", "expand", "shorturl", "nope-2", "format", "xml"}, 404, "application/xml",
			xmlHead + "<keyword>nope-2</keyword><message>Error: short URL not found</message><errorCode>404</errorCode></root>\n", ""},
		{"jsonp callback", []string{"action", "version", "format", "jsonp", "callback", "cb"}, 200, "application/javascript", `cb({"version":"1.9.2","callback":"cb"})`, ""},
		{"jsonp alias", []string{"action", "version", "format", "jsonp", "jsonp", "cb2"}, 200, "application/javascript", `cb2({"version":"1.9.2","callback":"cb2"})`, ""},
		{"jsonp bad callback", []string{"action", "version", "format", "jsonp", "callback", "alert(1)//"}, 400, "application/json", `{"errorCode":"400","error":"Invalid callback parameter"}`, ""},
		{"jsonp no callback", []string{"action", "version", "format", "jsonp"}, 400, "application/json", `{"errorCode":"400","error":"Invalid callback parameter"}`, ""},
		{"json with callback is json", []string{"action", "version", "format", "json", "callback", "cb"}, 200, "application/json", `{"version":"1.9.2","callback":"cb"}`, ""},
		{"json: no simple, no callback", []string{"action", "version", "format", "json"}, 200, "application/json", `{"version":"1.9.2"}`, ""},
		{"json shorturl: no simple", []string{"action", "shorturl", "url", "https://example.com/f", "format", "json"}, 400, "application/json", `{"status":"fail"*`, `"simple"`},
	}
	for _, c := range cases {
		status, ctype, body := get(c.kv...)
		ok := body == c.body
		if prefix, found := strings.CutSuffix(c.body, "*"); found {
			ok = strings.HasPrefix(body, prefix)
		}
		if status != c.status || !strings.HasPrefix(ctype, c.ctype) || !ok || c.not != "" && strings.Contains(body, c.not) {
			t.Errorf("%s: %d %s %q, want %d %s %q", c.name, status, ctype, body, c.status, c.ctype, c.body)
		}
	}
}

// TestKuttAPI sends the requests of the kutt npm client (3.0.2) and
// reads its fields.
func TestKuttAPI(t *testing.T) {
	s := newTestServer(t, nil)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	kutt := func(method, uri, body string) (int, map[string]any, string) {
		ctx := do(s, method, uri, "application/json", body, "X-API-Key", key)
		raw := string(ctx.Response.Body())
		if !strings.HasPrefix(string(ctx.Response.Header.ContentType()), "application/json") {
			return ctx.Response.StatusCode(), nil, raw
		}
		return ctx.Response.StatusCode(), decodeBody(t, ctx.Response.Body()), raw
	}
	status, link, raw := kutt("POST", "/api/v2/links",
		`{"target":"https://example.com/k","customurl":"kutt-1","description":"D","password":"correct horse","reuse":false}`)
	if status != 201 {
		t.Fatalf("create: %d %s", status, raw)
	}
	id, _ := link["id"].(string)
	for path, want := range map[string]any{
		"address": "kutt-1", "target": "https://example.com/k", "description": "D", "password": true, "banned": false,
		"visit_count": 0.0, "link": "http://sho.rt/kutt-1",
	} {
		if got := field(link, path); got != want {
			t.Errorf("create: %s = %#v, want %#v", path, got, want)
		}
	}
	// (A test request's arrival time is zero, so expiries are set by an
	// update here, which counts from now.)
	cases := []struct {
		name, method, uri, body string
		status                  int
		want                    map[string]any
	}{
		{"reuse", "POST", "/api/v2/links", `{"target":"https://example.com/k2","reuse":true}`, 201, map[string]any{"target": "https://example.com/k2"}},
		{"reuse finds", "POST", "/api/v2/links", `{"target":"https://example.com/k2","reuse":true}`, 200, map[string]any{"target": "https://example.com/k2"}},
		// Kutt links.handler.js create: "Custom URL is already in use."
		{"taken", "POST", "/api/v2/links", `{"target":"https://example.com/k3","customurl":"kutt-1"}`, 400, map[string]any{"error": "Custom URL is already in use."}},
		// Kutt validators.handler.js createLink customurl: preservedURLs.
		{"reserved", "POST", "/api/v2/links", `{"target":"https://example.com/k3","customurl":"admin"}`, 400, map[string]any{"error": "You can't use this custom URL."}},
		{"bad expire_in", "POST", "/api/v2/links", `{"target":"https://example.com/k3","expire_in":"soon"}`, 400, map[string]any{}},
		// Kutt validators.handler.js createLink target: "Target is missing."
		{"no target", "POST", "/api/v2/links", `{"target":" "}`, 400, map[string]any{"error": "Target is missing."}},
		// Kutt validators.handler.js createLink description: at most 2040.
		{"description over 2040", "POST", "/api/v2/links", `{"target":"https://example.com/k3","description":"` + strings.Repeat("d", 2041) + `"}`, 400,
			map[string]any{"error": "Description length must be between 1 and 2040."}},
		// Within Kutt's 2040 but past linkraft's titles (docs/COMPATIBILITY.md).
		{"description over 512", "POST", "/api/v2/links", `{"target":"https://example.com/k3","description":"` + strings.Repeat("d", 513) + `"}`, 400,
			map[string]any{"error": "linkraft keeps a description of up to 512 characters"}},
		{"description over 1024 bytes", "POST", "/api/v2/links", `{"target":"https://example.com/k3","description":"` + strings.Repeat("€", 400) + `"}`, 400,
			map[string]any{"error": "linkraft keeps a description of up to 1024 bytes in UTF-8"}},
		// Kutt validators.handler.js createLink customurl: 1 to 64 long;
		// linkraft's codes are 3 to 64 (docs/COMPATIBILITY.md).
		{"customurl over 64", "POST", "/api/v2/links", `{"target":"https://example.com/k3","customurl":"` + strings.Repeat("c", 65) + `"}`, 400,
			map[string]any{"error": "Custom URL length must be between 1 and 64."}},
		{"customurl of 2", "POST", "/api/v2/links", `{"target":"https://example.com/k3","customurl":"ab"}`, 400,
			map[string]any{"error": "linkraft's custom URLs are 3 to 64 characters long"}},
		{"list", "GET", "/api/v2/links?skip=0&limit=1&all=false", "", 200, map[string]any{"total": 2.0, "limit": 1.0, "skip": 0.0}},
		// Kutt validators.handler.js createLink target: addProtocol.
		{"target without a scheme", "POST", "/api/v2/links", `{"target":"example.com/k5"}`, 201, map[string]any{"target": "http://example.com/k5"}},
		{"update by id", "PATCH", "/api/v2/links/" + id, `{"target":"https://example.com/moved","description":"E","expire_in":"2 hours"}`, 200,
			map[string]any{"target": "https://example.com/moved", "description": "E", "id": id}},
		{"update, same address", "PATCH", "/api/v2/links/" + id, `{"address":"kutt-1"}`, 400, map[string]any{"error": "Should at least update one field."}},
		// Kutt visit.queries.js find: lastDay, lastWeek, lastMonth, lastYear.
		{"stats by GET", "GET", "/api/v2/links/" + id + "/stats", "", 200, map[string]any{"address": "kutt-1", "lastDay.total": 0.0, "lastYear.total": 0.0}},
		{"stats by DELETE", "DELETE", "/api/v2/links/" + id + "/stats", "", 200, map[string]any{"address": "kutt-1"}},
		{"health", "GET", "/api/v2/health", "", 200, nil},
		{"users", "GET", "/api/v2/users", "", 200, map[string]any{}},
		{"unknown id", "DELETE", "/api/v2/links/6c6b7266-0000-8000-8000-000000ffffff", "", 404, map[string]any{"error": "Could not find the link."}},
		{"delete", "DELETE", "/api/v2/links/" + id, "", 200, map[string]any{"message": "Link has been deleted successfully."}},
		{"deleted", "GET", "/api/v2/links/" + id + "/stats", "", 404, map[string]any{}},
	}
	for _, c := range cases {
		status, m, raw := kutt(c.method, c.uri, c.body)
		if status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, status, c.status, raw)
			continue
		}
		if status >= 400 && m["error"] == nil {
			t.Errorf("%s: no error field: %s", c.name, raw)
		}
		for path, want := range c.want {
			if v := field(m, path); v != want {
				t.Errorf("%s: %s = %#v, want %#v (%s)", c.name, path, v, want, raw)
			}
		}
	}
	_, made, _ := kutt("POST", "/api/v2/links", `{"target":"https://example.com/k-edit"}`)
	madeID, _ := made["id"].(string)
	// Kutt link.queries.js update sets updated_at with every edit (a
	// millisecond later at least, as Kutt's times show them).
	time.Sleep(2 * time.Millisecond)
	status, edited, raw := kutt("PATCH", "/api/v2/links/"+madeID, `{"description":"edited"}`)
	if status != 200 || edited["updated_at"] == made["updated_at"] {
		t.Errorf("edit: %d, updated_at %v, before %v: %s", status, edited["updated_at"], made["updated_at"], raw)
	}
	// Kutt visit.queries.js find: views of 24 hours, 7 and 30 days and 12
	// months; every browser and system of utils.getInitStats, zeros too.
	_, stats, raw := kutt("GET", "/api/v2/links/"+madeID+"/stats", "")
	for period, points := range map[string]int{"lastDay": 24, "lastWeek": 7, "lastMonth": 30, "lastYear": 12} {
		p, _ := stats[period].(map[string]any)
		if views, _ := p["views"].([]any); len(views) != points {
			t.Errorf("%s: %d views, want %d: %s", period, len(views), points, raw)
		}
	}
	for dim, want := range map[string]string{"browser": "chrome,edge,firefox,ie,opera,other,safari", "os": "android,ios,linux,macos,other,windows"} {
		items, _ := field(stats, "lastYear.stats."+dim).([]any)
		var names []string
		for _, it := range items {
			names = append(names, it.(map[string]any)["name"].(string))
		}
		if strings.Join(names, ",") != want {
			t.Errorf("lastYear %s: %v, want %s", dim, names, want)
		}
	}
	if ctx := do(s, "GET", "/api/v2/links", "", "", "X-API-Key", "lk_wrong"); ctx.Response.StatusCode() != 401 ||
		field(decodeBody(t, ctx.Response.Body()), "error") == nil {
		t.Errorf("wrong key: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
}

package httpd

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/input"
)

// body decodes a JSON answer.
func body(tb testing.TB, ctx *fasthttp.RequestCtx) map[string]any {
	tb.Helper()
	var v map[string]any
	if err := json.Unmarshal(ctx.Response.Body(), &v); err != nil {
		tb.Fatalf("answer %d is not JSON: %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	return v
}

func status(ctx *fasthttp.RequestCtx) int { return ctx.Response.StatusCode() }

func location(ctx *fasthttp.RequestCtx) string { return string(ctx.Response.Header.Peek("Location")) }

func TestUnknownFieldsAreRefused(t *testing.T) {
	s := newTestServer(t, nil)
	for _, tc := range []struct{ name, contentType, body, field string }{
		{"json create", "application/json", `{"url":"https://example.com/","pasword":"secret123"}`, "pasword"},
		{"json create, rule condition", "application/json", `{"url":"https://example.com/","rules":[{"when":{"os":"ios"},"url":"https://example.com/i"}]}`, "os"},
		{"form create", "application/x-www-form-urlencoded", `url=https%3A%2F%2Fexample.com%2F&maxvisits=3`, "maxvisits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := do(s, "POST", "/api/v1/urls", tc.contentType, tc.body)
			if status(ctx) != 400 || !strings.Contains(string(ctx.Response.Body()), tc.field) {
				t.Fatalf("%d %s, want 400 naming %q", status(ctx), ctx.Response.Body(), tc.field)
			}
		})
	}
	if links := body(t, do(s, "GET", "/api/v1/urls", "", "")); len(links["links"].([]any)) != 0 {
		t.Fatalf("a refused create stored a link: %v", links)
	}
	code := mustCreate(t, s, `{"url":"https://example.com/"}`)
	if ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"target":"https://example.com/2"}`); status(ctx) != 400 || !strings.Contains(string(ctx.Response.Body()), "target") {
		t.Fatalf("edit with an unknown field: %d %s", status(ctx), ctx.Response.Body())
	}
}

func TestEditAndHistory(t *testing.T) {
	s := newTestServer(t, nil)
	code := mustCreate(t, s, `{"url":"https://example.com/typo","title":"Launch","tags":["News","go"]}`)
	ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"original_url":"https://example.com/fixed","tags":["go"],"expires_at":"2099-01-01T00:00:00Z"}`)
	if status(ctx) != 200 {
		t.Fatalf("edit: %d %s", status(ctx), ctx.Response.Body())
	}
	v := body(t, ctx)
	if v["original_url"] != "https://example.com/fixed" || v["title"] != "Launch" || len(v["tags"].([]any)) != 1 || v["expires_at"] == nil {
		t.Fatalf("edited link: %v", v)
	}
	if got := location(do(s, "GET", "/"+code, "", "")); got != "https://example.com/fixed" {
		t.Fatalf("redirect after the edit goes to %q", got)
	}
	if v := body(t, do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"expires_at":null}`)); v["expires_at"] != nil {
		t.Fatalf("null did not clear the expiry: %v", v)
	}
	h := body(t, do(s, "GET", "/api/v1/urls/"+code+"/history", "", ""))
	versions := h["versions"].([]any)
	if len(versions) != 2 || versions[0].(map[string]any)["original_url"] != "https://example.com/typo" ||
		versions[1].(map[string]any)["original_url"] != "https://example.com/fixed" || versions[1].(map[string]any)["key_id"] != "admin-token" {
		t.Fatalf("history: %v", h)
	}
	for _, tc := range []struct{ name, body string }{
		{"nothing to change", `{}`},
		{"javascript target", `{"original_url":"javascript:alert(1)"}`},
		{"eleven tags", `{"tags":["a","b","c","d","e","f","g","h","i","j","k"]}`},
		{"bad tag", `{"tags":["has space"]}`},
		{"short password", `{"password":"short"}`},
		{"country rule, not a code", `{"rules":[{"when":{"country":"Germany"},"url":"https://example.de/"}]}`},
		{"country rule, not letters", `{"rules":[{"when":{"country":"D1"},"url":"https://example.de/"}]}`},
		{"rule without a condition", `{"rules":[{"when":{},"url":"https://example.com/x"}]}`},
	} {
		if ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", tc.body); status(ctx) != 400 {
			t.Errorf("%s: %d %s, want 400", tc.name, status(ctx), ctx.Response.Body())
		}
	}
	if ctx := do(s, "PATCH", "/api/v1/urls/nosuchcode", "application/json", `{"title":"x"}`); status(ctx) != 404 {
		t.Errorf("edit of a missing link: %d", status(ctx))
	}
}

func TestDeletedCodeSaysSo(t *testing.T) {
	s := newTestServer(t, nil)
	mustCreate(t, s, `{"url":"https://example.com/","custom_code":"gone-soon"}`)
	if ctx := do(s, "DELETE", "/api/v1/urls/gone-soon", "", ""); status(ctx) != 204 {
		t.Fatalf("delete: %d", status(ctx))
	}
	ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/","custom_code":"gone-soon"}`)
	if status(ctx) != 409 || !strings.Contains(string(ctx.Response.Body()), "deleted") {
		t.Fatalf("re-create of a deleted code: %d %s", status(ctx), ctx.Response.Body())
	}
}

func TestVisitLimitAndValidSince(t *testing.T) {
	s := newTestServer(t, nil)
	limited := mustCreate(t, s, `{"url":"https://example.com/","max_visits":2}`)
	for i, want := range []int{302, 302, 410, 410} {
		if got := status(do(s, "GET", "/"+limited, "", "")); got != want {
			t.Fatalf("visit %d: %d, want %d", i+1, got, want)
		}
	}
	if v := body(t, do(s, "GET", "/api/v1/urls/"+limited, "", "")); v["click_count"] != 2.0 {
		t.Fatalf("a limited link counts exactly its allowed visits: %v", v["click_count"])
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	later := mustCreate(t, s, `{"url":"https://example.com/","valid_since":"`+future+`"}`)
	if got := status(do(s, "GET", "/"+later, "", "")); got != 404 {
		t.Fatalf("before valid_since: %d, want 404", got)
	}
	do(s, "PATCH", "/api/v1/urls/"+later, "application/json", `{"valid_since":null}`)
	if got := status(do(s, "GET", "/"+later, "", "")); got != 302 {
		t.Fatalf("valid_since cleared: %d, want 302", got)
	}
}

func TestPasswordProtectedLink(t *testing.T) {
	s := newTestServer(t, nil)
	code := mustCreate(t, s, `{"url":"https://example.com/secret","password":"correct horse"}`)
	read := body(t, do(s, "GET", "/api/v1/urls/"+code, "", ""))
	if read["password_protected"] != true || strings.Contains(string(do(s, "GET", "/api/v1/urls/"+code, "", "").Response.Body()), "$2") {
		t.Fatalf("a read shows the password or its hash: %v", read)
	}
	ctx := do(s, "GET", "/"+code, "", "", "Accept", "text/html")
	if status(ctx) != 401 || location(ctx) != "" || strings.Contains(string(ctx.Response.Body()), "example.com/secret") ||
		!strings.Contains(string(ctx.Response.Body()), `type="password"`) {
		t.Fatalf("a browser without the password: %d %q %s", status(ctx), location(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "GET", "/"+code, "", "", "X-Link-Password", "wrong guess"); status(ctx) != 401 || location(ctx) != "" {
		t.Fatalf("wrong password: %d %q", status(ctx), location(ctx))
	}
	if ctx := do(s, "GET", "/"+code, "", "", "X-Link-Password", "correct horse"); status(ctx) != 302 || location(ctx) != "https://example.com/secret" {
		t.Fatalf("right password in the header: %d %q", status(ctx), location(ctx))
	}
	if ctx := do(s, "POST", "/"+code, "application/x-www-form-urlencoded", "password=correct+horse"); status(ctx) != 302 || location(ctx) != "https://example.com/secret" {
		t.Fatalf("right password from the form: %d %q", status(ctx), location(ctx))
	}
	// Guesses from one client run out, the right password included; another
	// client still gets in.
	attacker := net.IPv4(192, 0, 2, 7)
	limited := false
	for i := 0; i < 20 && !limited; i++ {
		limited = status(doFrom(s, attacker, "GET", "/"+code, "", "", "X-Link-Password", "guess number "+string(rune('a'+i)))) == 429
	}
	if !limited {
		t.Fatal("20 wrong guesses from one client were never limited")
	}
	if ctx := doFrom(s, attacker, "GET", "/"+code, "", "", "X-Link-Password", "correct horse"); status(ctx) != 429 || location(ctx) != "" {
		t.Fatalf("a limited client with the right password: %d %q", status(ctx), location(ctx))
	}
	if ctx := doFrom(s, net.IPv4(198, 51, 100, 9), "GET", "/"+code, "", "", "X-Link-Password", "correct horse"); status(ctx) != 302 {
		t.Fatalf("another client: %d", status(ctx))
	}
	if ctx := do(s, "GET", "/api/v1/urls/"+code+"/stats", "", "", "Authorization", ""); status(ctx) != 401 {
		t.Fatalf("anonymous stats of a protected link: %d", status(ctx))
	}
}

func TestRulesAndQueryForwarding(t *testing.T) {
	s := newTestServer(t, nil)
	code := mustCreate(t, s, `{"url":"https://example.com/web?src=qr","forward_query":true,"rules":[
		{"when":{"device":"ios"},"url":"https://apps.example/ios"},
		{"when":{"language":"de"},"url":"https://example.de/"},
		{"when":{"query":{"ref":"mail"}},"url":"https://example.com/mail"}]}`)
	iphone := "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148"
	for _, tc := range []struct{ name, uri, ua, lang, want string }{
		{"ios", "/" + code, iphone, "", "https://apps.example/ios"},
		{"german", "/" + code, "", "de-DE,en;q=0.5", "https://example.de/"},
		{"query rule, forwarded", "/" + code + "?ref=mail", "", "", "https://example.com/mail?ref=mail"},
		{"no rule holds, query forwarded", "/" + code + "?utm=x", "", "en", "https://example.com/web?src=qr&utm=x"},
	} {
		ctx := do(s, "GET", tc.uri, "", "", "User-Agent", tc.ua, "Accept-Language", tc.lang)
		if got := location(ctx); got != tc.want {
			t.Errorf("%s: Location %q, want %q", tc.name, got, tc.want)
		}
	}
	if ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"rules":null,"forward_query":false}`); status(ctx) != 200 {
		t.Fatalf("rules null: %d %s", status(ctx), ctx.Response.Body())
	}
	if got := location(do(s, "GET", "/"+code+"?ref=mail", "", "", "User-Agent", iphone)); got != "https://example.com/web?src=qr" {
		t.Fatalf("after rules were removed: Location %q", got)
	}
}

func TestListFiltersAndTags(t *testing.T) {
	s := newTestServer(t, nil)
	mustCreate(t, s, `{"url":"https://example.com/a","title":"Quarterly report","tags":["Finance"]}`)
	b := mustCreate(t, s, `{"url":"https://example.com/b","tags":["finance","2026"]}`)
	mustCreate(t, s, `{"url":"https://other.example/c"}`)
	for range 3 {
		do(s, "GET", "/"+b, "", "")
	}
	realNode(s).Clicks().Flush(context.Background())
	count := func(uri string) int { return len(body(t, do(s, "GET", uri, "", ""))["links"].([]any)) }
	if n := count("/api/v1/urls?tag=FINANCE"); n != 2 {
		t.Errorf("tag filter: %d links, want 2", n)
	}
	if n := count("/api/v1/urls?q=quarterly"); n != 1 {
		t.Errorf("title search: %d links, want 1", n)
	}
	if n := count("/api/v1/urls?q=other.example"); n != 1 {
		t.Errorf("URL search: %d links, want 1", n)
	}
	top := body(t, do(s, "GET", "/api/v1/urls?sort=clicks&limit=1", "", ""))
	if first := top["links"].([]any)[0].(map[string]any); first["short_code"] != b || top["next_cursor"] == nil {
		t.Errorf("most clicked first: %v", top)
	}
	tags := body(t, do(s, "GET", "/api/v1/tags", "", ""))["tags"].([]any)
	if len(tags) != 2 || tags[1].(map[string]any)["tag"] != "finance" || tags[1].(map[string]any)["links"] != 2.0 || tags[1].(map[string]any)["clicks"] != 3.0 {
		t.Errorf("tags: %v", tags)
	}
	if ctx := do(s, "GET", "/api/v1/urls?sort=random", "", ""); status(ctx) != 400 {
		t.Errorf("unknown sort: %d", status(ctx))
	}
}

func TestBulkCreate(t *testing.T) {
	s := newTestServer(t, nil)
	mustCreate(t, s, `{"url":"https://example.com/","custom_code":"taken1"}`)
	ctx := do(s, "POST", "/api/v1/urls/bulk", "application/json", `{"links":[
		{"url":"https://example.com/1"},
		{"url":"javascript:alert(1)"},
		{"url":"https://example.com/2","custom_code":"taken1"},
		{"url":"https://example.com/3","custom_code":"fresh1","tags":["bulk"]},
		{"url":"https://example.com/4","nope":1}]}`)
	if status(ctx) != 200 {
		t.Fatalf("bulk: %d %s", status(ctx), ctx.Response.Body())
	}
	results := body(t, ctx)["results"].([]any)
	want := []float64{201, 400, 409, 201, 400}
	for i, r := range results {
		if got := r.(map[string]any)["status"]; got != want[i] {
			t.Errorf("item %d: %v, want %v", i, r, want[i])
		}
	}
	if got := location(do(s, "GET", "/fresh1", "", "")); got != "https://example.com/3" {
		t.Fatalf("a bulk-created link redirects to %q", got)
	}
	if ctx := do(s, "POST", "/api/v1/urls/bulk", "application/json", `{"links":[]}`); status(ctx) != 400 {
		t.Fatalf("empty bulk: %d", status(ctx))
	}
}

func TestDomainsServeTheirOwnCodes(t *testing.T) {
	s := newTestServer(t, nil)
	if ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/","domain":"go.example"}`); status(ctx) != 400 {
		t.Fatalf("create in an unregistered domain: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "POST", "/admin/domains", "application/json", `{"domain":"Go.Example","root_redirect":"https://example.com/home","not_found_redirect":"https://example.com/404"}`); status(ctx) != 200 {
		t.Fatalf("register: %d %s", status(ctx), ctx.Response.Body())
	}
	mustCreate(t, s, `{"url":"https://example.com/default","custom_code":"same"}`)
	v := body(t, do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/go","custom_code":"same","domain":"go.example"}`))
	if v["short_url"] != "https://go.example/same" || v["domain"] != "go.example" {
		t.Fatalf("link in a domain: %v", v)
	}
	host := func(h, uri string) *fasthttp.RequestCtx { return do(s, "GET", uri, "", "", "Host", h) }
	for _, tc := range []struct{ host, uri, want string }{
		{"go.example", "/same", "https://example.com/go"},
		{"sho.rt", "/same", "https://example.com/default"},
		{"go.example", "/", "https://example.com/home"},
		{"go.example", "/missing", "https://example.com/404"},
	} {
		if got := location(host(tc.host, tc.uri)); got != tc.want {
			t.Errorf("%s%s: Location %q, want %q", tc.host, tc.uri, got, tc.want)
		}
	}
	if v := body(t, do(s, "GET", "/api/v1/urls/same?domain=go.example", "", "")); v["original_url"] != "https://example.com/go" {
		t.Fatalf("read with ?domain: %v", v)
	}
	if n := len(body(t, do(s, "GET", "/api/v1/urls?domain=go.example", "", ""))["links"].([]any)); n != 1 {
		t.Fatalf("list of one domain: %d links", n)
	}
	if ctx := do(s, "DELETE", "/admin/domains/go.example", "", ""); status(ctx) != 409 {
		t.Fatalf("removing a domain with links: %d", status(ctx))
	}
}

// BenchmarkRedirectWithRules follows a link with three rules (the third
// holds) and query forwarding: the path links with options take.
func BenchmarkRedirectWithRules(b *testing.B) {
	benchmarkRedirectOf(b, nil, `{"url":"https://example.com/web","forward_query":true,"rules":[
		{"when":{"device":"ios"},"url":"https://apps.example/ios"},
		{"when":{"language":"de"},"url":"https://example.de/"},
		{"when":{"query":{"ref":"mail"}},"url":"https://example.com/mail"}]}`, "?ref=mail",
		"User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120.0 Safari/537.36",
		"Accept-Language", "en-GB,en;q=0.9")
}

// TestImportKeepsOptionsAndNeverOpensAProtectedLink: an exported line
// brings its title, tags, limits and clicks along; one marked password_protected
// without its password (exports never hold it) is refused, not imported
// open.
func TestImportKeepsOptionsAndNeverOpensAProtectedLink(t *testing.T) {
	s := newTestServer(t, nil)
	mustCreate(t, s, `{"url":"https://example.com/"}`) // the node leads
	lines := `{"short_code":"imp-opts","original_url":"https://example.com/o","title":"T","tags":["x"],"max_visits":3,"click_count":2}
{"short_code":"imp-pw","original_url":"https://example.com/p","password_protected":true}
`
	ctx := do(s, "POST", "/admin/import", "application/x-ndjson", lines)
	report := body(t, ctx)
	failed, _ := report["failed"].([]any)
	if report["created"] != 1.0 || len(failed) != 1 || !strings.Contains(failed[0].(map[string]any)["error"].(string), "password") {
		t.Fatalf("import report: %d %v", status(ctx), report)
	}
	v := body(t, do(s, "GET", "/api/v1/urls/imp-opts", "", ""))
	if v["title"] != "T" || v["max_visits"] != 3.0 || v["click_count"] != 2.0 {
		t.Fatalf("imported link: %v", v)
	}
	// Its imported clicks count towards its limit: one visit is left.
	if got := status(do(s, "GET", "/imp-opts", "", "")); got != 302 {
		t.Fatalf("the last visit the limit allows: %d", got)
	}
	if got := status(do(s, "GET", "/imp-opts", "", "")); got != 410 {
		t.Fatalf("a visit past the limit: %d", got)
	}
	if got := status(do(s, "GET", "/imp-pw", "", "")); got != 404 {
		t.Fatalf("the protected line was imported: GET answers %d", got)
	}
}

// TestKeyLimitedToADomain: a key made for one domain creates, reads,
// lists and edits links there only; links elsewhere look absent to it.
func TestKeyLimitedToADomain(t *testing.T) {
	s := newTestServer(t, nil)
	do(s, "POST", "/admin/domains", "application/json", `{"domain":"go.example"}`)
	mustCreate(t, s, `{"url":"https://example.com/default","custom_code":"outside"}`)
	ctx := do(s, "POST", "/admin/keys", "application/json", `{"name":"go only","scopes":["links:read","links:write"],"workspaces":["*"],"domains":["Go.Example"]}`)
	k := body(t, ctx)
	if status(ctx) != 201 || k["domains"].([]any)[0] != "go.example" {
		t.Fatalf("create a key limited to a domain: %d %v", status(ctx), k)
	}
	auth := "Bearer " + k["key"].(string)
	if ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/x"}`, "Authorization", auth); status(ctx) != 403 {
		t.Fatalf("create in the default domain: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/x","custom_code":"inside","domain":"go.example"}`, "Authorization", auth); status(ctx) != 201 {
		t.Fatalf("create in its domain: %d %s", status(ctx), ctx.Response.Body())
	}
	for _, tc := range []struct{ method, uri, body string }{
		{"GET", "/api/v1/urls/outside", ""},
		{"PATCH", "/api/v1/urls/outside", `{"title":"mine now"}`},
		{"DELETE", "/api/v1/urls/outside", ""},
	} {
		if ctx := do(s, tc.method, tc.uri, "application/json", tc.body, "Authorization", auth); status(ctx) != 404 {
			t.Errorf("%s %s with a key of another domain: %d, want 404", tc.method, tc.uri, status(ctx))
		}
	}
	links := body(t, do(s, "GET", "/api/v1/urls", "", "", "Authorization", auth))["links"].([]any)
	if len(links) != 1 || links[0].(map[string]any)["short_code"] != "inside" {
		t.Fatalf("the key lists %v, want its domain's link only", links)
	}
	if ctx := do(s, "POST", "/admin/keys", "application/json", `{"name":"x","scopes":["admin"],"workspaces":["*"],"domains":["go.example"]}`); status(ctx) != 400 {
		t.Fatalf("an admin key limited to a domain: %d", status(ctx))
	}
}

// FuzzLinkBody feeds arbitrary bodies to the edit parser (the create shares
// its option fields): it never panics, and whatever it prepares passes the
// check the leader runs on what a follower relays. It hashes no password:
// hashing waits until the request may no longer be refused.
func FuzzLinkBody(f *testing.F) {
	for _, seed := range []string{
		`{"original_url":"https://example.com/","title":"t","tags":["a","B"],"max_visits":3,"expires_at":null}`,
		`{"valid_since":"2030-01-02T15:04:05Z","forward_query":true,"public_stats":false}`,
		`{"rules":[{"when":{"device":"ios","language":"pt-BR","query":{"a":"b"},"after":"2026-01-01T00:00:00Z"},"url":"https://example.com/i"}]}`,
		`{"tags":["x","X"],"max_visits":null,"valid_since":null}`,
		`{"password":"correct horse","public_stats":true}`,
	} {
		f.Add([]byte(seed))
	}
	var in linkInput
	f.Fuzz(func(t *testing.T, data []byte) {
		var fields editFields
		if decodeStrict(data, &fields) != nil {
			return
		}
		c, _, err := in.editOf(&fields, fsm.Link{}, time.Unix(1_800_000_000, 0))
		if err != nil {
			return
		}
		if err := input.Options(optionsOf(c), false); err != nil {
			t.Fatalf("prepared options the leader refuses: %v (%+v)", err, c)
		}
	})
}

// TestMaxVisitsBounded: each visit to a link with max_visits is a write
// through the leader's log, so the limit bounds the writes anonymous
// visitors can cause through one link: at most a million.
func TestMaxVisitsBounded(t *testing.T) {
	s := newTestServer(t, nil)
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"url":"https://example.com/m1","max_visits":1000000}`, 201},
		{`{"url":"https://example.com/m2","max_visits":1000001}`, 400},
		{`{"url":"https://example.com/m3","max_visits":1000000000000}`, 400},
	} {
		if got := status(do(s, "POST", "/api/v1/urls", "application/json", tc.body)); got != tc.want {
			t.Errorf("create %s: %d, want %d", tc.body, got, tc.want)
		}
	}
	code := mustCreate(t, s, `{"url":"https://example.com/m4"}`)
	if got := status(do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"max_visits":2000000}`)); got != 400 {
		t.Errorf("edit to max_visits 2000000: %d, want 400", got)
	}
}

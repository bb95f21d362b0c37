package httpd

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
)

// waitRaised waits, a bounded time, for the test server's cluster to be
// raised to LevelVisitRows, which its leader does as it starts.
func waitRaised(tb testing.TB, s *Server) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.fsm.Raised() < fsm.LevelVisitRows; {
		if time.Now().After(deadline) {
			tb.Fatalf("the cluster is still at level %d", s.fsm.Raised())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const (
	uaFirefox = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0"
	uaChrome  = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"
)

func TestRulesOnBrowserAndAddress(t *testing.T) {
	proxy := netip.MustParsePrefix("10.0.0.0/8")
	s := newTestServer(t, func(c *Config) { c.TrustedProxies = []netip.Prefix{proxy} })
	waitRaised(t, s)
	code := mustCreate(t, s, `{"url":"https://example.com/default","workspace":"w","rules":[
		{"when":{"browser":"firefox"},"url":"https://example.com/firefox"},
		{"when":{"ip":["203.0.113.0/24","198.51.100.7"]},"url":"https://example.com/office"},
		{"when":{"ip":["192.168.*.9"],"device":"desktop"},"url":"https://example.com/lan"}]}`)
	cases := []struct {
		name    string
		from    string
		headers []string
		want    string
	}{
		{"firefox", "127.0.0.1", []string{"User-Agent", uaFirefox}, "https://example.com/firefox"},
		{"chrome", "127.0.0.1", []string{"User-Agent", uaChrome}, "https://example.com/default"},
		{"no user agent", "127.0.0.1", nil, "https://example.com/default"},
		{"address in the block", "203.0.113.200", []string{"User-Agent", uaChrome}, "https://example.com/office"},
		{"the single address", "198.51.100.7", nil, "https://example.com/office"},
		{"next to it", "198.51.100.8", nil, "https://example.com/default"},
		{"wildcard and desktop", "192.168.44.9", []string{"User-Agent", uaChrome}, "https://example.com/lan"},
		{"wildcard without a device", "192.168.44.9", nil, "https://example.com/default"},
		{"mapped IPv4", "::ffff:203.0.113.1", nil, "https://example.com/office"},
		// The header of a client that is not a trusted proxy says nothing.
		{"untrusted forwarded-for", "127.0.0.1", []string{"X-Forwarded-For", "203.0.113.5"}, "https://example.com/default"},
		{"trusted proxy", "10.1.2.3", []string{"X-Forwarded-For", "203.0.113.5"}, "https://example.com/office"},
		{"trusted proxy, spoofed left", "10.1.2.3", []string{"X-Forwarded-For", "203.0.113.5, 8.8.8.8"}, "https://example.com/default"},
		{"trusted proxy, the proxy itself", "10.1.2.3", nil, "https://example.com/default"},
	}
	for _, c := range cases {
		ctx := doFrom(s, net.ParseIP(c.from), "GET", "/"+code, "", "", c.headers...)
		if got := string(ctx.Response.Header.Peek("Location")); ctx.Response.StatusCode() != 302 || got != c.want {
			t.Errorf("%s: %d to %q, want %q", c.name, ctx.Response.StatusCode(), got, c.want)
		}
	}
	read := do(s, "GET", "/api/v1/urls/"+code, "", "")
	for _, want := range []string{`"browser":"firefox"`, `"ip":["203.0.113.0/24","198.51.100.7"]`, `"ip":["192.168.*.9"]`} {
		if !strings.Contains(string(read.Response.Body()), want) {
			t.Errorf("read lacks %s: %s", want, read.Response.Body())
		}
	}
}

func TestRuleConditionsRefused(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	for _, when := range []string{
		`{"browser":"netscape"}`, `{"browser":"other"}`, `{"ip":[]}`, `{"ip":["300.1.1.1"]}`, `{"ip":["10.0.0.0/33"]}`,
		`{"ip":["1.2.*"]}`, `{"ip":["fe80::1%eth0"]}`, `{"ip":["::ffff:10.0.0.0/104"]}`,
		`{"ip":["1.1.1.1","1.1.1.2","1.1.1.3","1.1.1.4","1.1.1.5","1.1.1.6","1.1.1.7","1.1.1.8","1.1.1.9"]}`,
	} {
		ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/x","workspace":"w","rules":[{"when":`+when+`,"url":"https://example.com/y"}]}`)
		if ctx.Response.StatusCode() != 400 {
			t.Errorf("when %s: %d %s, want 400", when, ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
	if n := s.fsm.Len(); n != 0 {
		t.Errorf("refused creates left %d links", n)
	}
}

func TestRobotsTxt(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	if ctx := do(s, "POST", "/admin/domains", "application/json", `{"domain":"brand.example"}`); ctx.Response.StatusCode() != 200 {
		t.Fatalf("domain: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	mustCreate(t, s, `{"url":"https://example.com/a","workspace":"w","custom_code":"crawl-b","crawlable":true}`)
	mustCreate(t, s, `{"url":"https://example.com/a","workspace":"w","custom_code":"crawl-a","crawlable":true}`)
	mustCreate(t, s, `{"url":"https://example.com/a","workspace":"w","custom_code":"hidden"}`)
	mustCreate(t, s, `{"url":"https://example.com/a","workspace":"w","custom_code":"branded","crawlable":true,"domain":"brand.example"}`)
	mustCreate(t, s, `{"url":"https://example.com/a","workspace":"w","custom_code":"was-crawl","crawlable":true}`)
	if ctx := do(s, "PATCH", "/api/v1/urls/was-crawl", "application/json", `{"crawlable":false}`); ctx.Response.StatusCode() != 200 ||
		!strings.Contains(string(ctx.Response.Body()), `"crawlable":false`) {
		t.Fatalf("edit: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	const head = "# For more information about the robots.txt standard, see:\n# https://www.robotstxt.org/orig.html\n\nUser-agent: *\n"
	for host, want := range map[string]string{
		"sho.rt":            head + "Allow: /crawl-a\nAllow: /crawl-b\nDisallow: /\n",
		"BRAND.example:443": head + "Allow: /branded\nDisallow: /\n",
	} {
		ctx := do(s, "GET", "/robots.txt", "", "", "Host", host)
		if got := string(ctx.Response.Body()); ctx.Response.StatusCode() != 200 || got != want {
			t.Errorf("robots.txt of %s: %d\n%s\nwant\n%s", host, ctx.Response.StatusCode(), got, want)
		}
		if ct := string(ctx.Response.Header.ContentType()); !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("robots.txt of %s: content type %s", host, ct)
		}
	}
	if ctx := do(s, "GET", "/api/v1/urls/crawl-a", "", ""); !strings.Contains(string(ctx.Response.Body()), `"crawlable":true`) {
		t.Errorf("read: %s", ctx.Response.Body())
	}
}

func TestInvalidLinkRedirect(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	setDomain := func(body string) {
		t.Helper()
		if ctx := do(s, "POST", "/admin/domains", "application/json", body); ctx.Response.StatusCode() != 200 {
			t.Fatalf("set %s: %d %s", body, ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
	setDomain(`{"domain":"brand.example","invalid_redirect":"https://brand.example/gone","not_found_redirect":"https://brand.example/404"}`)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	mustCreate(t, s, `{"url":"https://example.com/a","workspace":"w","custom_code":"once","max_visits":1,"domain":"brand.example"}`)
	mustCreate(t, s, `{"url":"https://example.com/a","workspace":"w","custom_code":"later","valid_since":"`+future+`","domain":"brand.example"}`)
	mustCreate(t, s, `{"url":"https://example.com/a","workspace":"w","custom_code":"old","domain":"brand.example"}`)
	mustCreate(t, s, `{"url":"https://example.com/a","workspace":"w","custom_code":"old-default"}`)
	for _, code := range []string{"brand.example/old", "old-default"} {
		past := fsm.EditCommand{Code: code, Now: time.Now().UnixMilli(), KeyID: fsm.RootKeyID, Fields: fsm.EditExpiresAt, ExpiresAt: time.Now().Add(-time.Minute).UnixMilli()}
		if _, err := s.node.Writes.Propose(context.Background(), past, cluster.ProposeOptions{}); err != nil {
			t.Fatalf("expire %s: %v", code, err)
		}
	}
	visit := func(host, code string) (int, string) {
		ctx := do(s, "GET", "/"+code, "", "", "Host", host)
		return ctx.Response.StatusCode(), string(ctx.Response.Header.Peek("Location"))
	}
	if status, to := visit("brand.example", "once"); status != 302 || to != "https://example.com/a" {
		t.Fatalf("first visit: %d %s", status, to)
	}
	check := func(name, host, code string, status int, to string) {
		t.Helper()
		if gotStatus, got := visit(host, code); gotStatus != status || got != to {
			t.Errorf("%s: %d to %q, want %d to %q", name, gotStatus, got, status, to)
		}
	}
	check("out of visits", "brand.example", "once", 302, "https://brand.example/gone")
	check("not yet valid", "brand.example", "later", 302, "https://brand.example/gone")
	check("expired", "brand.example", "old", 302, "https://brand.example/gone")
	check("unknown code", "brand.example", "nope", 302, "https://brand.example/404")
	// The default domain has no redirects yet: linkraft's own answers.
	check("expired, default domain", "sho.rt", "old-default", 410, "")
	setDomain(`{"default":true,"invalid_redirect":"https://sho.rt/invalid","root_redirect":"https://sho.rt/home"}`)
	check("expired, default domain with a redirect", "sho.rt", "old-default", 302, "https://sho.rt/invalid")
	check("root, default domain", "sho.rt", "", 302, "https://sho.rt/home")
	check("unknown code, default domain", "sho.rt", "nope", 404, "")
	list := do(s, "GET", "/admin/domains", "", "")
	var body struct {
		Domains []domainJSON `json:"domains"`
		Default domainJSON   `json:"default"`
	}
	if err := json.Unmarshal(list.Response.Body(), &body); err != nil || len(body.Domains) != 1 ||
		body.Domains[0].InvalidRedirect != "https://brand.example/gone" || body.Default.InvalidRedirect != "https://sho.rt/invalid" || !body.Default.Default {
		t.Errorf("list: %v %s", err, list.Response.Body())
	}
	for _, bad := range []string{`{"default":true,"domain":"brand.example"}`, `{"domain":"brand.example","invalid_redirect":"javascript:alert(1)"}`} {
		if ctx := do(s, "POST", "/admin/domains", "application/json", bad); ctx.Response.StatusCode() != 400 {
			t.Errorf("%s: %d, want 400", bad, ctx.Response.StatusCode())
		}
	}
	setDomain(`{"default":true}`)
	check("default redirects cleared", "sho.rt", "old-default", 410, "")
}

func TestTagRenameAndDelete(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, team := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite, 0, "team")
	_, reader := addKey(t, s, fsm.ScopeLinksRead, 0, "team")
	a := mustCreate(t, s, `{"url":"https://example.com/1","workspace":"team","tags":["News","keep"]}`)
	b := mustCreate(t, s, `{"url":"https://example.com/2","workspace":"team","tags":["news"]}`)
	other := mustCreate(t, s, `{"url":"https://example.com/3","workspace":"other","tags":["news","fresh"]}`)
	tagsOf := func(code string) string {
		ctx := do(s, "GET", "/api/v1/urls/"+code, "", "")
		var l struct {
			Tags []string `json:"tags"`
		}
		_ = json.Unmarshal(ctx.Response.Body(), &l)
		return strings.Join(l.Tags, ",")
	}
	call := func(method, path, body, key string) (int, string) {
		ctx := do(s, method, path, "application/json", body, "Authorization", "Bearer "+key)
		return ctx.Response.StatusCode(), string(ctx.Response.Body())
	}
	steps := []struct {
		name, method, path, body, key string
		status                        int
		answer                        string
	}{
		{"reader may not", "PUT", "/api/v1/tags/news", `{"name":"fresh"}`, reader, 403, ""},
		{"bad new name", "PUT", "/api/v1/tags/news", `{"name":"no spaces"}`, team, 400, ""},
		{"no such tag", "PUT", "/api/v1/tags/sports", `{"name":"games"}`, team, 404, ""},
		{"another workspace's tag is unseen", "PUT", "/api/v1/tags/fresh", `{"name":"stale"}`, team, 404, ""},
		{"onto a tag of the same links", "PUT", "/api/v1/tags/news", `{"name":"KEEP"}`, team, 409, ""},
		// "fresh" exists only in the workspace the key cannot see.
		{"rename", "PUT", "/api/v1/tags/news", `{"name":"fresh"}`, team, 200, `"links":2`},
		{"delete", "DELETE", "/api/v1/tags/keep", "", team, 200, `"links":1`},
		{"delete again", "DELETE", "/api/v1/tags/keep", "", team, 404, ""},
	}
	for _, st := range steps {
		status, body := call(st.method, st.path, st.body, st.key)
		if status != st.status || !strings.Contains(body, st.answer) {
			t.Errorf("%s: %d %s, want %d with %s", st.name, status, body, st.status, st.answer)
		}
	}
	for code, want := range map[string]string{a: "fresh", b: "fresh", other: "news,fresh"} {
		if got := tagsOf(code); got != want {
			t.Errorf("tags of %s: %q, want %q", code, got, want)
		}
	}
	// The admin token sees every workspace: a case change renames all.
	if status, body := call("PUT", "/api/v1/tags/FRESH", `{"name":"Fresh"}`, testToken); status != 200 || !strings.Contains(body, `"links":3`) {
		t.Errorf("case change: %d %s", status, body)
	}
	if got := tagsOf(other); got != "news,Fresh" {
		t.Errorf("after the case change: %q", got)
	}
	if audit := s.fsm.Audit(fsm.AuditQuery{Limit: 1}); len(audit) != 1 || audit[0].Subject != "tag FRESH renamed to Fresh" {
		t.Errorf("audit: %+v", audit)
	}
}

// TestPickTargetClientRulesAllocateNothing: rules on browser and address
// cost the redirect no allocation, whichever rule holds.
func TestPickTargetClientRulesAllocateNothing(t *testing.T) {
	opts := &fsm.Options{Rules: []fsm.Rule{
		{Browser: fsm.Safari, URL: "https://example.com/safari"},
		{Country: "GB", URL: "https://example.com/gb"},
		{Addresses: []string{"2001:db8::/32", "192.168.*.*", "0.0.0.0/0"}, URL: "https://example.com/any"},
	}}
	s := newTestServer(t, withCountries(t))
	req := visitCtx("/c", uaChrome, "")
	req.Request.Header.Set("X-Forwarded-For", "8.8.8.8") // through a trusted proxy: a US visitor
	var ctx fasthttp.RequestCtx
	ctx.Init(&req.Request, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, nil)
	if v := s.redirects.ruleVisit(&ctx, time.Now()); v.holdsClient(&fsm.Rule{Country: "US"}) != true {
		t.Fatalf("the visit's country is %q, want US", v.country)
	}
	now := time.Now()
	if got := pickTarget("https://example.com/", opts, s.redirects.ruleVisit(&ctx, now)); got != "https://example.com/any" {
		t.Fatalf("picked %s", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = pickTarget("https://example.com/", opts, s.redirects.ruleVisit(&ctx, now)) }); n != 0 {
		t.Errorf("%v allocations per pick", n)
	}
}

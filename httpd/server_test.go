package httpd

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/cluster/secure"
	"github.com/linkraft/linkraft/fsm"
)

// newTestServer starts a real single-node cluster in a temporary directory
// and the HTTP layer on top of it, without a listener: tests call Handler.
func newTestServer(tb testing.TB, mutate func(*Config)) *Server {
	tb.Helper()
	return newTestServerOn(tb, mutate, nil)
}

// newTestServerOn is newTestServer whose node parts parts may replace
// (with fakes that wrap them) before the server is built on them.
func newTestServerOn(tb testing.TB, mutate func(*Config), parts func(*Node)) *Server {
	tb.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	node, err := cluster.Open(cluster.Config{
		ID:       "test",
		DataDir:  tb.TempDir(),
		RaftAddr: freeAddr(tb),
		Key:      newClusterKey(tb),
		Logger:   log,
		Raft:     cluster.RaftConfig{LogLevel: "off"},
		Writes:   cluster.WriteConfig{ClickFlushInterval: time.Hour},
	}, fsm.New())
	if err != nil {
		tb.Fatalf("open node: %v", err)
	}
	tb.Cleanup(func() { node.Close() })
	cfg := Config{RedirectStatus: 302, CodeLength: 7, Version: "test", Logger: log, AdminToken: testToken}
	if mutate != nil {
		mutate(&cfg)
	}
	on := Of(node)
	if parts != nil {
		parts(&on)
	}
	s := New(cfg, on)
	tb.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

// realNode is the single node under a test server.
func realNode(s *Server) *cluster.Node { return s.node.Self.(*cluster.Node) }

// newClusterKey is a fresh cluster key for a test's node: it is alone in
// its cluster.
func newClusterKey(tb testing.TB) *secure.Key {
	tb.Helper()
	key, err := secure.ParseKey(secure.GenerateKey())
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// testToken is the admin token test servers start with; requests made
// with do carry it unless they name a credential of their own.
const testToken = "test-admin-token"

// do runs one request from a loopback client through the server's root
// handler.
func do(s *Server, method, uri, contentType, body string, headers ...string) *fasthttp.RequestCtx {
	return doFrom(s, net.IPv4(127, 0, 0, 1), method, uri, contentType, body, headers...)
}

// doFrom runs one request through the server's root handler as if it came
// from remote. Headers are name, value pairs; without an Authorization or
// X-Api-Key among them the request carries the test admin token, and with
// an empty one it carries no credential.
func doFrom(s *Server, remote net.IP, method, uri, contentType, body string, headers ...string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: remote, Port: 5555}, nil)
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetHost("sho.rt")
	if contentType != "" {
		ctx.Request.Header.SetContentType(contentType)
	}
	credential := false
	for i := 0; i+1 < len(headers); i += 2 {
		switch strings.ToLower(headers[i]) {
		case "authorization", "x-api-key":
			credential = true
		}
		if headers[i+1] != "" {
			ctx.Request.Header.Set(headers[i], headers[i+1])
		}
	}
	if !credential {
		ctx.Request.Header.Set("Authorization", "Bearer "+testToken)
	}
	ctx.Request.SetBodyString(body)
	s.Handler(&ctx)
	return &ctx
}

func mustCreate(tb testing.TB, s *Server, body string) string {
	tb.Helper()
	ctx := do(s, "POST", "/api/v1/urls", "application/json", body)
	if ctx.Response.StatusCode() != 201 {
		tb.Fatalf("create: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	code := string(ctx.Response.Body())
	const key = `"short_code":"`
	i := len(key) + indexOf(code, key)
	return code[i : i+indexOf(code[i:], `"`)]
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestRedirectPath(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.RedirectStatus = 308 })
	target := "https://example.com/a%20b?q=1&r=a+b#frag"
	code := mustCreate(t, s, `{"url":"`+target+`"}`)
	expiring := mustCreate(t, s, `{"url":"https://example.com/e","expires_in_seconds":1}`)
	waitRaised(t, s) // misses count as orphan visits from LevelVisitRows on

	tests := []struct {
		name, method, path, accept string
		status                     int
		location, contentType      string
	}{
		{"redirect", "GET", "/" + code, "", 308, target, ""},
		{"head redirects too", "HEAD", "/" + code, "", 308, target, ""},
		{"unknown code", "GET", "/zzzzzzz", "", 404, "", "application/problem+json"},
		{"unknown code, browser", "GET", "/zzzzzzz", "text/html", 404, "", "text/html; charset=utf-8"},
		{"not a code", "GET", "/a.b/c", "", 404, "", "application/problem+json"},
		{"reserved word is a route", "GET", "/health", "", 200, "", "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := do(s, tt.method, tt.path, "", "", "Accept", tt.accept)
			r := &ctx.Response
			if r.StatusCode() != tt.status || string(r.Header.Peek("Location")) != tt.location {
				t.Fatalf("got %d Location %q, want %d %q", r.StatusCode(), r.Header.Peek("Location"), tt.status, tt.location)
			}
			if tt.contentType != "" && string(r.Header.ContentType()) != tt.contentType {
				t.Fatalf("content type %q, want %q", r.Header.ContentType(), tt.contentType)
			}
		})
	}
	// The redirect's GET counts, its HEAD does not; the three misses
	// count as orphan visits (two unknown codes, one other path).
	if got := s.node.Clicks.Pending(); got != 4 {
		t.Fatalf("pending clicks = %d, want 4", got)
	}
	time.Sleep(1100 * time.Millisecond)
	if ctx := do(s, "GET", "/"+expiring, "", ""); ctx.Response.StatusCode() != 410 {
		t.Fatalf("expired link: %d", ctx.Response.StatusCode())
	}
}

func TestHTMLErrorPageEscapes(t *testing.T) {
	s := newTestServer(t, nil)
	ctx := do(s, "GET", "/<script>alert(1)</script>", "", "", "Accept", "text/html")
	if body := string(ctx.Response.Body()); indexOf(body, "<script>") >= 0 {
		t.Fatalf("unescaped user input in page: %s", body)
	}
}

// BenchmarkRedirect measures the redirect hot path through the root handler
// (routing, lookup, headers, click count, metrics) on a real node.
func BenchmarkRedirect(b *testing.B) { benchmarkRedirect(b, nil) }

// benchmarkRedirect follows one link over and over on a server configured
// by configure.
func benchmarkRedirect(b *testing.B, configure func(*Config)) {
	benchmarkRedirectOf(b, configure, `{"url":"https://example.com/some/long/path?with=query"}`, "")
}

// benchmarkRedirectOf follows the link created with body, asked for with
// query and the header name, value pairs.
func benchmarkRedirectOf(b *testing.B, configure func(*Config), body, query string, headers ...string) {
	s := newTestServer(b, configure)
	code := mustCreate(b, s, body)
	var ctx fasthttp.RequestCtx
	ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5555}, nil)
	ctx.Request.Header.SetMethod("GET")
	ctx.Request.SetRequestURI("/" + code + query)
	for i := 0; i+1 < len(headers); i += 2 {
		ctx.Request.Header.Set(headers[i], headers[i+1])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ctx.Response.Reset()
		s.Handler(&ctx)
		if ctx.Response.StatusCode() != 302 {
			b.Fatalf("status %d", ctx.Response.StatusCode())
		}
	}
}

// TestRelayInjectionDoesNotRedirect: a request that claims to come from a
// peer cannot store a target a client could not, and so no short link
// answers with it.
func TestRelayInjectionDoesNotRedirect(t *testing.T) {
	s := newTestServer(t, nil)
	mustCreate(t, s, `{"url":"https://example.com/"}`) // the node leads
	body := `{"v":1,"items":[{"url":"javascript:alert(document.domain)","workspace":"default","custom_code":"jsx","code_length":7}]}`
	do(s, "POST", "/internal/v1/creates", "application/json", body, "X-Linkraft-Forwarded", "rogue")
	if ctx := do(s, "GET", "/jsx", "", ""); ctx.Response.StatusCode() != fasthttp.StatusNotFound {
		t.Fatalf("GET /jsx: %d Location %q, want 404", ctx.Response.StatusCode(), ctx.Response.Header.Peek("Location"))
	}
}

// TestPublicPortServesNoInternalPaths: the node-to-node protocol lives on
// the cluster's port; the public one answers 404 for its paths, whatever a
// request claims about its sender.
func TestPublicPortServesNoInternalPaths(t *testing.T) {
	s := newTestServer(t, nil)
	for _, tt := range []struct{ method, path string }{
		{"GET", "/internal/v1/node"}, {"GET", "/internal/v1/read-index"}, {"GET", "/internal/v1/applied?index=0"},
		{"POST", "/internal/v1/creates"}, {"POST", "/internal/v1/clicks"}, {"POST", "/internal/v1/leave"},
	} {
		ctx := do(s, tt.method, tt.path, "application/json", `{"v":1}`, "X-Linkraft-Forwarded", "n2")
		if got := ctx.Response.StatusCode(); got != fasthttp.StatusNotFound {
			t.Errorf("%s %s: %d, want 404", tt.method, tt.path, got)
		}
	}
}

// BenchmarkRedirectWithUserAgent follows a link as a client connecting
// directly does: with a browser's User-Agent only, which the click
// classifies, and its address looked up in the country table.
func BenchmarkRedirectWithUserAgent(b *testing.B) {
	benchmarkRedirectOf(b, func(c *Config) { withCountries(b)(c); c.TrustedProxies = nil },
		`{"url":"https://example.com/some/long/path?with=query"}`, "", "User-Agent", chromeWindows)
}

// BenchmarkRedirectFromBrowser follows a link as a browser behind a proxy
// does: with a User-Agent, a referrer and a forwarded public address, all
// of which the click records.
func BenchmarkRedirectFromBrowser(b *testing.B) {
	benchmarkRedirectOf(b, withCountries(b), `{"url":"https://example.com/some/long/path?with=query"}`, "",
		"User-Agent", chromeWindows, "Referer", "https://news.example.com/story?id=1", "X-Forwarded-For", "81.2.69.142")
}

// requestWatch is a node's reads that note whether a handler handed them
// its fasthttp RequestCtx as the context to wait with.
type requestWatch struct {
	Reads
	givenRequest *bool
}

func (r requestWatch) note(ctx context.Context) {
	if _, ok := ctx.(*fasthttp.RequestCtx); ok {
		*r.givenRequest = true
	}
}

func (r requestWatch) CatchUp(ctx context.Context) error {
	r.note(ctx)
	return r.Reads.CatchUp(ctx)
}

func (r requestWatch) Lookup(ctx context.Context, code string) (fsm.Link, error) {
	r.note(ctx)
	return r.Reads.Lookup(ctx, code)
}

// TestHandlersWaitWithoutTheRequest: no handler waits on the node with its
// request as the context. A context derived from a RequestCtx watches the
// request from a goroutine of its own, which may outlive the request
// (fasthttp reuses it) and races with the server's Shutdown.
func TestHandlersWaitWithoutTheRequest(t *testing.T) {
	var givenRequest bool
	s := newTestServerOn(t, nil, func(n *Node) { n.Reads = requestWatch{n.Reads, &givenRequest} })
	code := mustCreate(t, s, `{"url":"https://example.com/w","tags":["news"]}`)
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/api/v1/urls", ""},
		{"GET", "/api/v1/urls/" + code, ""},
		{"GET", "/" + code, ""},
		{"GET", "/nope123", ""},
		{"PUT", "/api/v1/tags/news", `{"name":"headlines"}`},
	} {
		givenRequest = false
		if ctx := do(s, r.method, r.path, "application/json", r.body); givenRequest {
			t.Errorf("%s %s (%d) waited with its request as the context", r.method, r.path, status(ctx))
		}
	}
}

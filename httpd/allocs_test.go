package httpd

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestRedirectAllocatesNothing: following a link without options, through
// the root handler as BenchmarkRedirect and its variants do, allocates
// nothing, whatever the click records of the visitor. The benchmarks show
// it; this keeps it. The first visit may fill the caches of User-Agents
// and referrers, so it comes before the counting; an allocation that comes
// only now and then (a map or a pool filled again after a collection)
// averages out below one.
func TestRedirectAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	// The visits BenchmarkRedirect, BenchmarkRedirectWithUserAgent and
	// BenchmarkRedirectFromBrowser time: header name, value pairs.
	for _, tt := range []struct {
		name      string
		configure func(*Config)
		headers   []string
	}{
		{"Plain", nil, nil},
		{"WithUserAgent", func(c *Config) { withCountries(t)(c); c.TrustedProxies = nil }, []string{"User-Agent", chromeWindows}},
		{"FromBrowser", withCountries(t), []string{"User-Agent", chromeWindows,
			"Referer", "https://news.example.com/story?id=1", "X-Forwarded-For", "81.2.69.142"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t, tt.configure)
			code := mustCreate(t, s, `{"url":"https://example.com/some/long/path?with=query"}`)
			// The request as benchmarkRedirectOf builds it.
			var ctx fasthttp.RequestCtx
			ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5555}, nil)
			ctx.Request.Header.SetMethod("GET")
			ctx.Request.SetRequestURI("/" + code)
			for i := 0; i+1 < len(tt.headers); i += 2 {
				ctx.Request.Header.Set(tt.headers[i], tt.headers[i+1])
			}
			follow := func() {
				ctx.Response.Reset()
				s.Handler(&ctx)
			}
			follow()
			if got := ctx.Response.StatusCode(); got != fasthttp.StatusFound {
				t.Fatalf("status %d, want 302", got)
			}
			if n := testing.AllocsPerRun(1000, follow); n != 0 {
				t.Errorf("a redirect allocates %v times", n)
			}
			if got := ctx.Response.StatusCode(); got != fasthttp.StatusFound {
				t.Fatalf("status %d after counting, want 302", got)
			}
		})
	}
}

// TestServedRedirectAllocatesNothing: the redirect as the node's fasthttp
// server reads, handles and answers it on a connection, as
// BenchmarkServedRedirect times it, allocates nothing per request either.
// A connection costs a few allocations of its own (the test's connection,
// its timeouts' clock, the server's state for it), so the count is over one connection that
// carries many requests: those round down to nothing per request, while
// one allocation in every request does not.
func TestServedRedirectAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const requests = 1000
	// The requests BenchmarkServedRedirect sends, all to a node with the
	// country table that trusts the loopback proxy.
	for _, tt := range []struct {
		name    string
		headers []string
	}{
		{"Plain", nil},
		{"Browser", []string{"User-Agent: " + chromeWindows, "Accept: text/html", "Accept-Language: en-GB,en;q=0.9"}},
		{"BrowserThroughProxy", []string{"User-Agent: " + chromeWindows, "Accept: text/html", "Accept-Language: en-GB,en;q=0.9",
			"Referer: https://news.example.com/story?id=1", "X-Forwarded-For: 81.2.69.142"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t, withCountries(t))
			code := mustCreate(t, s, `{"url":"https://example.com/some/long/path?with=query"}`)
			request := rawGet("/"+code, tt.headers...)
			var warm bytes.Buffer
			if err := s.srv.ServeConn(timedReplayConn(t, s, newReplayConn(request, requests, &warm))); err != nil {
				t.Fatalf("serve: %v", err)
			}
			if got := strings.Count(warm.String(), "HTTP/1.1 302 "); got != requests {
				t.Fatalf("%d of %d requests answered 302:\n%.500s", got, requests, warm.String())
			}
			n := testing.AllocsPerRun(10, func() {
				if err := s.srv.ServeConn(timedReplayConn(t, s, newReplayConn(request, requests, nil))); err != nil {
					t.Fatalf("serve: %v", err)
				}
			})
			if perRequest := int(n) / requests; perRequest != 0 {
				t.Errorf("a served redirect allocates %d times (%v allocations for %d requests on a connection)", perRequest, n, requests)
			}
		})
	}
}

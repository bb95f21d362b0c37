package httpd

import (
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// doFrom runs one request through the server's root handler as if it came
// from remote.
func doFrom(s *Server, remote net.IP, method, uri string, headers ...string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: remote, Port: 5555}, nil)
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetHost("sho.rt")
	for i := 0; i+1 < len(headers); i += 2 {
		ctx.Request.Header.Set(headers[i], headers[i+1])
	}
	s.Handler(&ctx)
	return &ctx
}

func TestPprofIsGuardedLikeAdmin(t *testing.T) {
	open := newTestServer(t, nil)
	guarded := newTestServer(t, func(c *Config) { c.AdminToken = "s3cret" })
	loopback, remote := net.IPv4(127, 0, 0, 1), net.IPv4(192, 0, 2, 7)
	tests := []struct {
		name   string
		s      *Server
		remote net.IP
		uri    string
		auth   string
		status int
		body   string // a fragment of the answer
	}{
		{"index, loopback, no token set", open, loopback, "/debug/pprof/", "", 200, "goroutine"},
		{"named profile", open, loopback, "/debug/pprof/goroutine?debug=1", "", 200, "goroutine profile"},
		{"heap profile", open, loopback, "/debug/pprof/heap?debug=1", "", 200, "heap profile"},
		{"command line", open, loopback, "/debug/pprof/cmdline", "", 200, ""},
		{"unknown profile", open, loopback, "/debug/pprof/nothing", "", 404, "Unknown profile"},
		{"without the slash", open, loopback, "/debug/pprof", "", 301, ""},
		{"remote client, no token set", open, remote, "/debug/pprof/", "", 403, "only local clients"},
		{"token set, none sent", guarded, loopback, "/debug/pprof/heap", "", 401, "Bearer"},
		{"token set, wrong one", guarded, remote, "/debug/pprof/heap", "Bearer nope", 401, ""},
		{"token set and sent", guarded, remote, "/debug/pprof/goroutine?debug=1", "Bearer s3cret", 200, "goroutine profile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var headers []string
			if tt.auth != "" {
				headers = []string{"Authorization", tt.auth}
			}
			ctx := doFrom(tt.s, tt.remote, "GET", tt.uri, headers...)
			if got := ctx.Response.StatusCode(); got != tt.status || !strings.Contains(string(ctx.Response.Body()), tt.body) {
				t.Fatalf("GET %s: %d %.200s, want %d with %q", tt.uri, got, ctx.Response.Body(), tt.status, tt.body)
			}
		})
	}
}

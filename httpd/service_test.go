package httpd

import (
	"errors"
	"net"
	"regexp"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestEveryAnswerIsNosniff: no answer may be sniffed into another type (a
// JSON error holding user input rendered as HTML, a text body run as a
// script), whichever handler wrote it. A redirect, which has no body,
// goes without the header: it is the hot path.
func TestEveryAnswerIsNosniff(t *testing.T) {
	s := newTestServer(t, nil)
	code := mustCreate(t, s, `{"url":"https://example.com/nosniff"}`)
	tests := []struct {
		name, method, uri, body string
		status                  int
	}{
		{"redirect", "GET", "/" + code, "", 302},
		{"redirect miss", "GET", "/zzzzzzz", "", 404},
		{"unknown path", "GET", "/a/b/c", "", 404},
		{"wrong method", "PUT", "/health", "", 405},
		{"health", "GET", "/health", "", 200},
		{"root", "GET", "/", "", 200},
		{"ui", "GET", "/ui/", "", 200},
		{"ui script", "GET", "/ui/app.js", "", 200},
		{"ui style", "GET", "/ui/app.css", "", 200},
		{"read", "GET", "/api/v1/urls/" + code, "", 200},
		{"qr", "GET", "/api/v1/urls/" + code + "/qr", "", 200},
		{"bad create", "POST", "/api/v1/urls", "{", 400},
		{"metrics", "GET", "/metrics", "", 200},
		{"pprof index", "GET", "/debug/pprof/", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := do(s, tt.method, tt.uri, "application/json", tt.body)
			if got := ctx.Response.StatusCode(); got != tt.status {
				t.Fatalf("status %d, want %d: %s", got, tt.status, ctx.Response.Body())
			}
			want := "nosniff"
			if tt.status == 302 {
				want = ""
				if len(ctx.Response.Body()) != 0 {
					t.Fatalf("a redirect with a body: %q", ctx.Response.Body())
				}
			}
			if got := string(ctx.Response.Header.Peek("X-Content-Type-Options")); got != want {
				t.Errorf("X-Content-Type-Options = %q, want %q", got, want)
			}
		})
	}
	t.Run("transport error", func(t *testing.T) {
		var ctx fasthttp.RequestCtx
		ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, nil)
		s.handleTransportError(&ctx, errors.New("malformed"))
		if got := string(ctx.Response.Header.Peek("X-Content-Type-Options")); ctx.Response.StatusCode() != 400 || got != "nosniff" {
			t.Errorf("%d with X-Content-Type-Options %q, want 400 with nosniff", ctx.Response.StatusCode(), got)
		}
	})
}

// TestUIContentSecurityPolicy: the web UI runs only its own script and
// style files, so an injected inline script or style does nothing.
func TestUIContentSecurityPolicy(t *testing.T) {
	s := newTestServer(t, nil)
	page := do(s, "GET", "/ui/", "", "")
	csp := string(page.Response.Header.Peek("Content-Security-Policy"))
	for _, want := range []string{"script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-") {
		t.Errorf("CSP %q allows something unsafe", csp)
	}
	body := string(page.Response.Body())
	// What this policy would block: inline scripts and styles, and event
	// handler or style attributes.
	inline := regexp.MustCompile(`(?i)<script(\s[^>]*)?>\s*[^<\s]|<style|\sstyle=|\son[a-z]+=`)
	if m := inline.FindString(body); m != "" {
		t.Errorf("the page has inline code the policy blocks: %q", m)
	}
	for _, asset := range []struct{ path, contentType, inPage string }{
		{"/ui/app.js", "text/javascript; charset=utf-8", `<script src="/ui/app.js">`},
		{"/ui/app.css", "text/css; charset=utf-8", `<link rel="stylesheet" href="/ui/app.css">`},
	} {
		if !strings.Contains(body, asset.inPage) {
			t.Errorf("the page does not load %s", asset.path)
		}
		r := do(s, "GET", asset.path, "", "")
		if r.Response.StatusCode() != 200 || string(r.Response.Header.ContentType()) != asset.contentType || len(r.Response.Body()) == 0 {
			t.Errorf("GET %s: %d %q, %d bytes; want 200 %q with a body", asset.path,
				r.Response.StatusCode(), r.Response.Header.ContentType(), len(r.Response.Body()), asset.contentType)
		}
	}
}

package httpd

import (
	"net"
	"strings"
	"testing"
)

// TestPprofIsGuardedLikeAdmin: profiles need an admin credential from
// every client, loopback ones included (a reverse proxy on the same host
// makes every client look local).
func TestPprofIsGuardedLikeAdmin(t *testing.T) {
	s := newTestServer(t, nil)
	loopback, remote := net.IPv4(127, 0, 0, 1), net.IPv4(192, 0, 2, 7)
	tests := []struct {
		name    string
		remote  net.IP
		uri     string
		headers []string
		status  int
		body    string // a fragment of the answer
	}{
		{"index", loopback, "/debug/pprof/", nil, 200, "goroutine"},
		{"named profile", remote, "/debug/pprof/goroutine?debug=1", nil, 200, "goroutine profile"},
		{"heap profile", loopback, "/debug/pprof/heap?debug=1", nil, 200, "heap profile"},
		{"command line", loopback, "/debug/pprof/cmdline", nil, 200, ""},
		{"unknown profile", loopback, "/debug/pprof/nothing", nil, 404, "Unknown profile"},
		{"without the slash", loopback, "/debug/pprof", nil, 301, ""},
		{"loopback without a credential", loopback, "/debug/pprof/cmdline", []string{"Authorization", ""}, 401, "API key"},
		{"behind a same-host proxy", loopback, "/debug/pprof/cmdline",
			[]string{"Authorization", "", "X-Forwarded-For", "203.0.113.9"}, 401, "API key"},
		{"wrong token", remote, "/debug/pprof/heap", []string{"Authorization", "Bearer nope"}, 401, "unknown"},
		{"token as X-Api-Key", remote, "/debug/pprof/goroutine?debug=1", []string{"X-Api-Key", testToken}, 200, "goroutine profile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := doFrom(s, tt.remote, "GET", tt.uri, "", "", tt.headers...)
			if got := ctx.Response.StatusCode(); got != tt.status || !strings.Contains(string(ctx.Response.Body()), tt.body) {
				t.Fatalf("GET %s: %d %.200s, want %d with %q", tt.uri, got, ctx.Response.Body(), tt.status, tt.body)
			}
		})
	}
}

// TestCmdlineHidesSecrets: the command line a profile shows never holds the
// cluster key or the admin token, whichever way the flag was written, so an
// admin key cannot be turned into either.
func TestCmdlineHidesSecrets(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"linkraft", "serve", "--cluster-key", "K", "--id", "n1"}, []string{"linkraft", "serve", "--cluster-key", "REDACTED", "--id", "n1"}},
		{[]string{"linkraft", "serve", "--admin-token=T", "-cluster-key=K"}, []string{"linkraft", "serve", "--admin-token=REDACTED", "-cluster-key=REDACTED"}},
		{[]string{"linkraft", "serve", "-admin-token", "T"}, []string{"linkraft", "serve", "-admin-token", "REDACTED"}},
		{[]string{"linkraft", "serve", "--id", "admin-token"}, []string{"linkraft", "serve", "--id", "admin-token"}},
	} {
		if got := redactArgs(tc.in); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("redactArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

package httpd

import (
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
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

// TestRestoreAPI: ?foreign takes true or false; a restore is recorded in
// the audit log with the key that made it and what vouched for the
// backup; a backup this node cannot authenticate is 400 with a message
// naming --foreign; and ?foreign=true keeps the large body limit.
func TestRestoreAPI(t *testing.T) {
	s := newTestServer(t, nil)
	mustCreate(t, s, `{"url":"https://example.com/backed-up"}`)
	var backup bytes.Buffer
	if err := realNode(s).Backup(&backup); err != nil {
		t.Fatal(err)
	}
	id, key := addKey(t, s, fsm.ScopeAdmin, 0, fsm.AllWorkspaces)

	ctx := do(s, "POST", "/admin/restore?foreign=maybe", "application/octet-stream", backup.String(), "Authorization", "Bearer "+key)
	if ctx.Response.StatusCode() != 400 || !strings.Contains(string(ctx.Response.Body()), "foreign must be true or false") {
		t.Fatalf("?foreign=maybe: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	var bare bytes.Buffer
	if err := s.fsm.WriteBackup(&bare); err != nil {
		t.Fatal(err)
	}
	ctx = do(s, "POST", "/admin/restore", "application/octet-stream", bare.String(), "Authorization", "Bearer "+key)
	if ctx.Response.StatusCode() != 400 || !strings.Contains(string(ctx.Response.Body()), "backup authentication failed") ||
		!strings.Contains(string(ctx.Response.Body()), "--foreign") {
		t.Fatalf("a bare snapshot: %d %s; want 400 saying authentication failed, naming --foreign", ctx.Response.StatusCode(), ctx.Response.Body())
	}

	for _, uri := range []string{"/admin/restore", "/admin/restore?foreign=false"} {
		ctx = do(s, "POST", uri, "application/octet-stream", backup.String(), "Authorization", "Bearer "+key)
		if ctx.Response.StatusCode() != 200 {
			t.Fatalf("POST %s: %d %s", uri, ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
	ctx = do(s, "GET", "/admin/audit?limit=1", "", "")
	var audit struct {
		Entries []map[string]string `json:"entries"`
	}
	if err := json.Unmarshal(ctx.Response.Body(), &audit); err != nil || len(audit.Entries) != 1 {
		t.Fatalf("audit: %v %s", err, ctx.Response.Body())
	}
	if e := audit.Entries[0]; e["action"] != "backup.restore" || e["key_id"] != id || !strings.Contains(e["detail"], "authenticated by the cluster key") {
		t.Fatalf("newest audit entry %v; want the restore by %s, with what vouched for the backup", e, id)
	}

	var h fasthttp.RequestHeader
	h.SetMethod("POST")
	h.SetRequestURI("/admin/restore?foreign=true")
	h.Set("Authorization", "Bearer "+key)
	if got := s.bodyLimit(&h); got != maxRestoreBytes {
		t.Fatalf("body limit of a foreign restore: %d, want %d", got, maxRestoreBytes)
	}
}

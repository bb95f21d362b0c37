package httpd

import (
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// waitRenames waits, a bounded time, for the test server's cluster to be
// raised to LevelRename, which its leader does as it starts.
func waitRenames(tb testing.TB, s *Server) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.fsm.Raised() < fsm.LevelRename; {
		if time.Now().After(deadline) {
			tb.Fatalf("the cluster is still at level %d", s.fsm.Raised())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEditRenamesTheCode: short_code in an edit gives the link a new
// code; the answer is the link under it, its clicks and options kept, and
// the old code is gone at once: no redirect, no link, never reissued.
func TestEditRenamesTheCode(t *testing.T) {
	s := newTestServer(t, nil)
	waitRenames(t, s)
	mustCreate(t, s, `{"url":"https://example.com/a","custom_code":"before","title":"A"}`)
	mustCreate(t, s, `{"url":"https://example.com/b","custom_code":"taken"}`)
	mustCreate(t, s, `{"url":"https://example.com/c","custom_code":"deleted"}`)
	do(s, "DELETE", "/api/v1/urls/deleted", "", "")
	do(s, "GET", "/before", "", "")

	ctx := do(s, "PATCH", "/api/v1/urls/before", "application/json", `{"short_code":"after","tags":["moved"]}`)
	if status(ctx) != 200 {
		t.Fatalf("rename: %d %s", status(ctx), ctx.Response.Body())
	}
	if v := body(t, ctx); v["short_code"] != "after" || v["title"] != "A" || v["original_url"] != "https://example.com/a" ||
		len(v["tags"].([]any)) != 1 || !strings.HasSuffix(v["short_url"].(string), "/after") {
		t.Fatalf("renamed link: %v", v)
	}
	if got := location(do(s, "GET", "/after", "", "")); got != "https://example.com/a" {
		t.Fatalf("the new code redirects to %q", got)
	}
	for _, uri := range []string{"/before", "/api/v1/urls/before"} {
		if got := status(do(s, "GET", uri, "", "")); got != 404 {
			t.Errorf("GET %s after the rename: %d, want 404", uri, got)
		}
	}
	ctx = do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/","custom_code":"before"}`)
	if status(ctx) != 409 || !strings.Contains(string(ctx.Response.Body()), "deleted") {
		t.Fatalf("create with the retired code: %d %s", status(ctx), ctx.Response.Body())
	}
	if audit := s.fsm.Audit(fsm.AuditQuery{Limit: 1}); len(audit) != 1 || audit[0].Action != fsm.AuditLinkEdit || audit[0].Subject != "after" {
		t.Fatalf("audit: %+v", audit)
	}

	for _, tc := range []struct {
		name, body string
		status     int
		says       string
	}{
		{"to a live code", `{"short_code":"taken"}`, 409, "already taken"},
		{"to a deleted code", `{"short_code":"deleted"}`, 409, "never reused"},
		{"to its old code", `{"short_code":"before"}`, 409, "never reused"},
		{"to a reserved word", `{"short_code":"api"}`, 409, "reserved"},
		{"to a code with a dot", `{"short_code":"a.b"}`, 400, "short_code"},
		{"to a short code", `{"short_code":"ab"}`, 400, "short_code"},
		{"to a number", `{"short_code":7}`, 400, "short_code"},
		{"to its own code, nothing else", `{"short_code":"after"}`, 400, "changes nothing"},
		{"with a bad title", `{"short_code":"free","title":"` + strings.Repeat("t", 5000) + `"}`, 400, "title"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := do(s, "PATCH", "/api/v1/urls/after", "application/json", tc.body)
			if status(ctx) != tc.status || !strings.Contains(string(ctx.Response.Body()), tc.says) {
				t.Fatalf("%d %s, want %d saying %q", status(ctx), ctx.Response.Body(), tc.status, tc.says)
			}
			if _, ok := s.fsm.Get("after"); !ok {
				t.Fatal("a refused rename moved the link")
			}
		})
	}
	if got := status(do(s, "PATCH", "/api/v1/urls/before", "application/json", `{"short_code":"again"}`)); got != 404 {
		t.Fatalf("rename of the retired code: %d, want 404", got)
	}
}

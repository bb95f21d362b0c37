package httpd

import (
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// Tests of the rule that work done for others is bounded and checked first
// (docs/SECURITY.md, "Work done for others is bounded"), and that nothing
// shows what a request may not see.

// TestEmbargoedLinkShowsNoTarget: before its valid_since a link shows
// nothing of its target to anyone without links:read, not in public stats
// nor in a QR code; once it is valid, public stats and QR codes are back.
func TestEmbargoedLinkShowsNoTarget(t *testing.T) {
	s := newTestServer(t, nil)
	const target = "https://example.com/unannounced-launch"
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	code := mustCreate(t, s, `{"url":"`+target+`","workspace":"team","valid_since":"`+future+`","public_stats":true}`)
	_, statsOnly := addKey(t, s, fsm.ScopeStatsRead, 0, "team")
	_, reader := addKey(t, s, fsm.ScopeLinksRead, 0, "team")
	anonymous := []string{"Authorization", ""}

	for _, path := range []string{"/api/v1/urls/" + code + "/stats", "/stats/" + code, "/api/v1/urls/" + code + "/stats?group_by=browser"} {
		if ctx := do(s, "GET", path, "", "", anonymous...); status(ctx) == 200 || strings.Contains(string(ctx.Response.Body()), target) {
			t.Errorf("anonymous GET %s before valid_since: %d %s", path, status(ctx), ctx.Response.Body())
		}
		ctx := do(s, "GET", path, "", "", "Authorization", "Bearer "+statsOnly)
		if status(ctx) != 200 || strings.Contains(string(ctx.Response.Body()), target) {
			t.Errorf("GET %s with stats:read only, before valid_since: %d %s, want 200 without the target", path, status(ctx), ctx.Response.Body())
		}
	}
	if ctx := do(s, "GET", "/api/v1/urls/"+code+"/qr", "", "", anonymous...); status(ctx) != 404 {
		t.Errorf("anonymous QR before valid_since: %d, want 404", status(ctx))
	}
	if ctx := do(s, "GET", "/api/v1/urls/"+code+"/qr", "", "", "Authorization", "Bearer "+statsOnly); status(ctx) != 404 {
		t.Errorf("QR with stats:read only, before valid_since: %d, want 404", status(ctx))
	}
	if ctx := do(s, "GET", "/api/v1/urls/"+code+"/qr", "", "", "Authorization", "Bearer "+reader); status(ctx) != 200 {
		t.Errorf("QR with links:read before valid_since: %d %s, want 200", status(ctx), ctx.Response.Body())
	}

	if ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"valid_since":null}`); status(ctx) != 200 {
		t.Fatalf("clear valid_since: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "GET", "/api/v1/urls/"+code+"/stats", "", "", anonymous...); status(ctx) != 200 || !strings.Contains(string(ctx.Response.Body()), target) {
		t.Errorf("anonymous stats once valid: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "GET", "/api/v1/urls/"+code+"/qr", "", "", anonymous...); status(ctx) != 200 {
		t.Errorf("anonymous QR once valid: %d", status(ctx))
	}
}

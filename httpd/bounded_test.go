package httpd

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

// Tests of the rule that work done for others is bounded and checked first
// (docs/SECURITY.md, "Work done for others is bounded"), and that nothing
// shows what a request may not see.

// bulkStatuses are the statuses of a bulk answer's items, in order.
func bulkStatuses(tb testing.TB, ctx *fasthttp.RequestCtx) []int {
	tb.Helper()
	var answer struct {
		Results []struct {
			Status int    `json:"status"`
			Error  string `json:"error"`
		} `json:"results"`
	}
	if status(ctx) != 200 || json.Unmarshal(ctx.Response.Body(), &answer) != nil {
		tb.Fatalf("bulk: %d %.300s", status(ctx), ctx.Response.Body())
	}
	out := make([]int, len(answer.Results))
	for i, r := range answer.Results {
		out[i] = r.Status
	}
	return out
}

// TestPublicCreateRefusesDomainsAndRules: an anonymous create (with
// --public-create) may not claim a code on a registered domain, set rules
// or make its stats public; nothing is created.
func TestPublicCreateRefusesDomainsAndRules(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.PublicCreate = true })
	if ctx := do(s, "POST", "/admin/domains", "application/json", `{"domain":"brand.example"}`); status(ctx) != 200 {
		t.Fatalf("add domain: %d %s", status(ctx), ctx.Response.Body())
	}
	links := s.fsm.Len()
	for _, tc := range []struct{ name, contentType, body string }{
		{"a registered domain", "application/json", `{"url":"https://phish.example/login","domain":"brand.example","custom_code":"login"}`},
		{"a registered domain, form", "application/x-www-form-urlencoded", `url=https%3A%2F%2Fphish.example%2F&domain=brand.example&custom_code=login`},
		{"rules", "application/json", `{"url":"https://example.com/","rules":[{"when":{"device":"ios"},"url":"https://phish.example/"}]}`},
		{"public stats", "application/json", `{"url":"https://example.com/","public_stats":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := do(s, "POST", "/api/v1/urls", tc.contentType, tc.body, "Authorization", "")
			if status(ctx) != 403 {
				t.Fatalf("anonymous create with %s: %d %s, want 403", tc.name, status(ctx), ctx.Response.Body())
			}
		})
	}
	if n := s.fsm.Len(); n != links {
		t.Fatalf("refused anonymous creates made %d links", n-links)
	}
	if _, ok := s.fsm.Get(fsm.QualifiedCode("brand.example", "login")); ok {
		t.Fatal("brand.example/login was claimed anonymously")
	}
	if ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/plain"}`, "Authorization", ""); status(ctx) != 201 {
		t.Fatalf("a plain anonymous create: %d %s", status(ctx), ctx.Response.Body())
	}
}

// TestPublicStatsNeedsStatsRead: making a link's stats public needs
// stats:read as well as links:write, by create, bulk and edit.
func TestPublicStatsNeedsStatsRead(t *testing.T) {
	s := newTestServer(t, nil)
	const target = "https://example.com/private-stats"
	code := mustCreate(t, s, `{"url":"`+target+`","workspace":"team"}`)
	_, writer := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite, 0, "team")
	_, full := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	asWriter := []string{"Authorization", "Bearer " + writer}
	links := s.fsm.Len()

	if ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"public_stats":true}`, asWriter...); status(ctx) != 403 {
		t.Fatalf("edit to public_stats without stats:read: %d %s, want 403", status(ctx), ctx.Response.Body())
	}
	if l, _ := s.fsm.Get(code); l.Options != nil && l.Options.PublicStats {
		t.Fatal("the refused edit made the stats public")
	}
	if ctx := do(s, "GET", "/api/v1/urls/"+code+"/stats", "", "", "Authorization", ""); status(ctx) != 401 {
		t.Fatalf("anonymous stats: %d, want 401", status(ctx))
	}
	if ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/p","public_stats":true}`, asWriter...); status(ctx) != 403 {
		t.Fatalf("create with public_stats without stats:read: %d %s, want 403", status(ctx), ctx.Response.Body())
	}
	ctx := do(s, "POST", bulkPath, "application/json", `{"links":[{"url":"https://example.com/b","public_stats":true}]}`, asWriter...)
	if got := bulkStatuses(t, ctx); len(got) != 1 || got[0] != 403 {
		t.Fatalf("bulk item with public_stats without stats:read: %v, want [403]", got)
	}
	if n := s.fsm.Len(); n != links {
		t.Fatalf("refused creates made %d links", n-links)
	}
	if ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"public_stats":false}`, asWriter...); status(ctx) != 200 {
		t.Fatalf("keeping the stats private needs no stats:read: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"public_stats":true}`, "Authorization", "Bearer "+full); status(ctx) != 200 {
		t.Fatalf("edit to public_stats with stats:read: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "GET", "/api/v1/urls/"+code+"/stats", "", "", "Authorization", ""); status(ctx) != 200 {
		t.Fatalf("anonymous stats once public: %d %s", status(ctx), ctx.Response.Body())
	}
}

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

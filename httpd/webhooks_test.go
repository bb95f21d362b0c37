package httpd

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/linkraft/linkraft/fsm"
)

const webhookSecret = "a-webhook-secret-of-some-length"

// TestWebhooksAPI: a webhook is answered 201 without its secret, listed
// with its delivery state and never its secret, and removed.
func TestWebhooksAPI(t *testing.T) {
	s := newTestServer(t, nil)
	ctx := do(s, "POST", "/admin/webhooks", "application/json",
		`{"url":"https://hooks.example/in","events":["link.deleted","link.created"],"secret":"`+webhookSecret+`"}`)
	if status(ctx) != 201 || strings.Contains(string(ctx.Response.Body()), webhookSecret) {
		t.Fatalf("create: %d %s", status(ctx), ctx.Response.Body())
	}
	var created struct {
		ID        string   `json:"id"`
		URL       string   `json:"url"`
		Events    []string `json:"events"`
		CreatedAt string   `json:"created_at"`
	}
	if err := json.Unmarshal(ctx.Response.Body(), &created); err != nil {
		t.Fatal(err)
	}
	if !fsm.ValidWebhookID(created.ID) || created.URL != "https://hooks.example/in" || strings.Join(created.Events, ",") != "link.created,link.deleted" || created.CreatedAt == "" {
		t.Fatalf("created: %+v", created)
	}
	list := do(s, "GET", "/admin/webhooks", "", "")
	body := string(list.Response.Body())
	if status(list) != 200 || strings.Contains(body, webhookSecret) || strings.Contains(body, `"secret"`) || !strings.Contains(body, created.ID) {
		t.Fatalf("list: %d %s", status(list), body)
	}
	var page struct {
		Webhooks []map[string]any `json:"webhooks"`
	}
	if err := json.Unmarshal(list.Response.Body(), &page); err != nil || len(page.Webhooks) != 1 {
		t.Fatalf("list: %v %s", err, body)
	}
	for _, field := range []string{"pending_events", "delivered", "dropped", "failed_attempts", "last_delivery_at", "last_error", "last_error_at"} {
		if _, ok := page.Webhooks[0][field]; !ok {
			t.Errorf("list misses %s: %s", field, body)
		}
	}
	if ctx := do(s, "DELETE", "/admin/webhooks/"+created.ID, "", ""); status(ctx) != 204 {
		t.Fatalf("delete: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "DELETE", "/admin/webhooks/"+created.ID, "", ""); status(ctx) != 404 {
		t.Fatalf("delete again: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "GET", "/admin/webhooks", "", ""); strings.TrimSpace(string(ctx.Response.Body())) != `{"webhooks":[]}` {
		t.Fatalf("list after delete: %s", ctx.Response.Body())
	}
}

// TestWebhookValidation: every bad field is a 400 that names it, and
// nothing is stored.
func TestWebhookValidation(t *testing.T) {
	s := newTestServer(t, nil)
	ok := `"url":"https://hooks.example/in","events":["link.created"],"secret":"` + webhookSecret + `"`
	tests := []struct {
		body, field string
	}{
		{`{"events":["link.created"],"secret":"` + webhookSecret + `"}`, "url"},
		{`{"url":"hooks.example/in","events":["link.created"],"secret":"` + webhookSecret + `"}`, "url"},
		{`{"url":"ftp://hooks.example/in","events":["link.created"],"secret":"` + webhookSecret + `"}`, "url"},
		{`{"url":"http://127.0.0.1:9/in","events":["link.created"],"secret":"` + webhookSecret + `"}`, "url"},
		{`{"url":"https://hooks.example/in","secret":"` + webhookSecret + `"}`, "events"},
		{`{"url":"https://hooks.example/in","events":[],"secret":"` + webhookSecret + `"}`, "events"},
		{`{"url":"https://hooks.example/in","events":["link.exploded"],"secret":"` + webhookSecret + `"}`, "events"},
		{`{"url":"https://hooks.example/in","events":["link.created"]}`, "secret"},
		{`{"url":"https://hooks.example/in","events":["link.created"],"secret":"short"}`, "secret"},
		{`{"url":"https://hooks.example/in","events":["link.created"],"secret":"` + strings.Repeat("s", 257) + `"}`, "secret"},
		{`{` + ok + `,"colour":"blue"}`, "colour"},
		{`{"url":7,"events":["link.created"],"secret":"` + webhookSecret + `"}`, "url"},
		{`not json`, "JSON"},
	}
	for _, tc := range tests {
		ctx := do(s, "POST", "/admin/webhooks", "application/json", tc.body)
		if status(ctx) != 400 || !strings.Contains(string(ctx.Response.Body()), tc.field) {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.body, status(ctx), ctx.Response.Body(), tc.field)
		}
		if strings.Contains(string(ctx.Response.Body()), webhookSecret) {
			t.Errorf("%s: the answer shows the secret", tc.body)
		}
	}
	if ctx := do(s, "GET", "/admin/webhooks", "", ""); strings.TrimSpace(string(ctx.Response.Body())) != `{"webhooks":[]}` {
		t.Fatalf("refused webhooks were stored: %s", ctx.Response.Body())
	}
	if ctx := do(s, "DELETE", "/admin/webhooks/NOT-AN-ID", "", ""); status(ctx) != 404 {
		t.Fatalf("delete of a malformed id: %d", status(ctx))
	}
}

// TestWebhooksNeedAdmin: no credential is 401, a key without admin 403,
// and the body is not looked at before.
func TestWebhooksNeedAdmin(t *testing.T) {
	s := newTestServer(t, nil)
	_, writer := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, fsm.AllWorkspaces)
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/admin/webhooks", `not even json`},
		{"GET", "/admin/webhooks", ""},
		{"DELETE", "/admin/webhooks/aaaaaaaaaaaaaaaa", ""},
	} {
		if ctx := do(s, r.method, r.path, "application/json", r.body, "Authorization", ""); status(ctx) != 401 {
			t.Errorf("%s %s without a key: %d", r.method, r.path, status(ctx))
		}
		if ctx := do(s, r.method, r.path, "application/json", r.body, "Authorization", "Bearer "+writer); status(ctx) != 403 {
			t.Errorf("%s %s with a links key: %d", r.method, r.path, status(ctx))
		}
	}
}

package httpd

import (
	"strings"
	"testing"
	"time"
)

// TestIdempotencyKeyLength: a key is remembered in the replicated state for
// ten minutes, so an oversized one is refused before anything is proposed.
func TestIdempotencyKeyLength(t *testing.T) {
	s := newTestServer(t, nil)
	tests := []struct {
		name   string
		key    string
		status int
	}{
		{"no key", "", 201},
		{"a UUID", "5f0c2b1e-8a4d-4c7e-9b1a-2d3e4f5a6b7c", 201},
		{"128 bytes", strings.Repeat("k", maxIdempotencyKeyBytes), 201},
		{"129 bytes", strings.Repeat("k", maxIdempotencyKeyBytes+1), 400},
		{"7.8 KB", strings.Repeat("k", 7800), 400},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.fsm.Len()
			var headers []string
			if tt.key != "" {
				headers = []string{"Idempotency-Key", tt.key}
			}
			ctx := do(s, "POST", "/api/v1/urls", "application/json",
				`{"url":"https://example.com/idem/`+string(rune('a'+i))+`"}`, headers...)
			if got := ctx.Response.StatusCode(); got != tt.status {
				t.Fatalf("status %d, want %d: %s", got, tt.status, ctx.Response.Body())
			}
			if tt.status != 400 {
				return
			}
			if body := string(ctx.Response.Body()); !strings.Contains(body, "Idempotency-Key") || !strings.Contains(body, "128 bytes") {
				t.Errorf("the problem does not say what is wrong: %s", body)
			}
			if s.fsm.Len() != before {
				t.Errorf("a refused create changed the state: %d links, want %d", s.fsm.Len(), before)
			}
		})
	}
}

// TestExpiryCountsFromTheCreate: a relative expiry is stored as the time
// of the create plus the duration asked, by a single create and a bulk
// one alike; the link redirects until then.
func TestExpiryCountsFromTheCreate(t *testing.T) {
	s := newTestServer(t, nil)
	tests := []struct {
		name, path, body, code string
		in                     time.Duration
	}{
		{"seconds", "/api/v1/urls", `{"url":"https://example.com/s","custom_code":"in-secs","expires_in_seconds":90}`, "in-secs", 90 * time.Second},
		{"hours", "/api/v1/urls", `{"url":"https://example.com/h","custom_code":"in-hours","expires_in_hours":2}`, "in-hours", 2 * time.Hour},
		{"bulk, seconds", "/api/v1/urls/bulk", `{"links":[{"url":"https://example.com/b","custom_code":"in-bulk","expires_in_seconds":90}]}`, "in-bulk", 90 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := time.Now()
			if ctx := do(s, "POST", tt.path, "application/json", tt.body); status(ctx) >= 300 {
				t.Fatalf("create: %d %s", status(ctx), ctx.Response.Body())
			}
			after := time.Now()
			l, ok := s.fsm.Get(tt.code)
			if lo, hi := before.Add(tt.in).UnixMilli(), after.Add(tt.in).UnixMilli(); !ok || l.ExpiresAt < lo || l.ExpiresAt > hi {
				t.Fatalf("stored expiry %d (found %v), want between %d and %d", l.ExpiresAt, ok, lo, hi)
			}
			if got := location(do(s, "GET", "/"+tt.code, "", "")); got == "" {
				t.Fatal("the link does not redirect before its expiry")
			}
		})
	}
}

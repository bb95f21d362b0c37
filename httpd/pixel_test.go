package httpd

import (
	"context"
	"testing"
)

// TestTrackingPixel: GET /{code}/track answers a 1×1 GIF whatever the
// code, and counts a visit as the redirect does (Shlink's PixelAction,
// routed at /{shortCode}/track).
func TestTrackingPixel(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s) // from LevelVisitRows on, misses would count as orphan visits
	mustCreate(t, s, `{"url":"https://example.com/mail","custom_code":"mail-1"}`)
	mustCreate(t, s, `{"url":"https://example.com/once","custom_code":"once-1","max_visits":1}`)
	cases := []struct {
		name, path string
	}{
		{"a link", "/mail-1/track"},
		{"a link again", "/mail-1/track"},
		{"a link with max_visits", "/once-1/track"},
		{"the same, out of visits", "/once-1/track"},
		{"no such link", "/nope-42/track"},
		{"not a code", "/a.b/track"},
	}
	for _, c := range cases {
		ctx := do(s, "GET", c.path, "", "")
		if status(ctx) != 200 || string(ctx.Response.Header.ContentType()) != "image/gif" ||
			string(ctx.Response.Body()) != transparentGIF || len(ctx.Response.Header.Peek("Location")) != 0 {
			t.Errorf("%s: %d %q %q", c.name, status(ctx), ctx.Response.Header.ContentType(), ctx.Response.Body())
		}
	}
	if err := realNode(s).Clicks().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for code, want := range map[string]float64{"mail-1": 2, "once-1": 1} {
		if got := body(t, do(s, "GET", "/api/v1/urls/"+code, "", ""))["click_count"]; got != want {
			t.Errorf("%s: %v clicks after its pixels, want %v", code, got, want)
		}
	}
	if got := body(t, do(s, "GET", "/api/v1/visits/orphan", "", ""))["total"]; got != 0.0 {
		t.Errorf("orphan visits %v after pixels of no link, want 0", got)
	}
}

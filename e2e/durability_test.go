package e2e

import (
	"net/http"
	"testing"
)

// TestKill9KeepsAcknowledgedLinks covers durability: every link acknowledged
// with 201 survives kill -9 and restart, and codes handed out after the
// restart never collide with the old ones.
func TestKill9KeepsAcknowledgedLinks(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})

	var acknowledged []link
	for i := range 20 {
		fields := map[string]any{"original_url": "https://example.com/durable/" + itoa(i)}
		switch i % 4 {
		case 1:
			fields["custom_code"] = "durable-" + itoa(i)
		case 2:
			fields["strategy"] = "hash"
		case 3:
			fields["workspace"] = "durable-ws"
			fields["expires_in_hours"] = 24
		}
		acknowledged = append(acknowledged, n.createLink(t, fields))
	}

	// A delete is an acknowledged write too: it must survive the crash, and
	// the code must stay retired.
	deleted := n.createLink(t, map[string]any{"original_url": "https://example.com/durable/deleted", "custom_code": "durable-deleted"})
	if r := n.request(t, http.MethodDelete, "/api/v1/urls/"+deleted.ShortCode, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: want 204, got %v", r)
	}

	n.kill9()
	n.restart()

	// The node says it is a healthy leader: it must have its whole state by
	// then, or a load balancer sends users to 404s for acknowledged links.
	if h := n.health(t); h.Links != int64(len(acknowledged)) {
		t.Errorf("right after restart /health says %s with %d links, want all %d", h.Role, h.Links, len(acknowledged))
	}

	codes := map[string]bool{}
	for _, want := range acknowledged {
		codes[want.ShortCode] = true
		n.requireRedirect(t, want.ShortCode, want.OriginalURL)
		r := n.get(t, "/api/v1/urls/"+want.ShortCode)
		if r.status != http.StatusOK {
			t.Errorf("read %s after restart: want 200, got %v", want.ShortCode, r)
			continue
		}
		var got link
		decodeObject(t, r, readFields, &got)
		if got.ID != want.ID || got.CreatedAt != want.CreatedAt || got.Workspace != want.Workspace || !equalTimePtr(got.ExpiresAt, want.ExpiresAt) {
			t.Errorf("link %s after restart = %+v, want %+v", want.ShortCode, got, want)
		}
	}
	if h := n.health(t); h.Links != int64(len(acknowledged)) {
		t.Errorf("after restart /health links = %d, want %d", h.Links, len(acknowledged))
	}
	requireProblem(t, n.request(t, http.MethodGet, "/"+deleted.ShortCode, http.Header{"Accept": {"application/json"}}, nil), http.StatusNotFound)
	requireProblem(t, n.postJSON(t, "/api/v1/urls", map[string]any{"original_url": "https://example.com/squatter", "custom_code": deleted.ShortCode}), http.StatusConflict)

	for i := range 20 {
		l := n.createURL(t, "https://example.com/after-restart/"+itoa(i))
		if codes[l.ShortCode] {
			t.Errorf("code %s handed out again after the restart", l.ShortCode)
		}
		codes[l.ShortCode] = true
	}
}

func equalTimePtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// TestKill9KeepsFlushedClicks covers durability of clicks: clicks that
// stats already showed survive kill -9 and restart.
func TestKill9KeepsFlushedClicks(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})
	l := n.createURL(t, "https://example.com/clicked")

	for range 3 {
		if r := n.get(t, "/"+l.ShortCode); r.status != http.StatusFound {
			t.Fatalf("GET /%s: want 302, got %v", l.ShortCode, r)
		}
	}
	if got := n.waitClicks(t, l.ShortCode, 3); got != 3 {
		t.Fatalf("before the crash stats show %d clicks, want 3", got)
	}

	// A delete is an acknowledged write too: it must survive the crash, and
	// the code must stay retired.
	deleted := n.createLink(t, map[string]any{"original_url": "https://example.com/durable/deleted", "custom_code": "durable-deleted"})
	if r := n.request(t, http.MethodDelete, "/api/v1/urls/"+deleted.ShortCode, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: want 204, got %v", r)
	}

	n.kill9()
	n.restart()
	if got := n.waitClicks(t, l.ShortCode, 3); got != 3 {
		t.Errorf("after kill -9 and restart stats show %d clicks, want the 3 flushed ones", got)
	}
}

// TestSIGTERMFlushesPendingClicks covers graceful shutdown: SIGTERM flushes
// click counts that the (hour-long) flush interval has not written yet.
func TestSIGTERMFlushesPendingClicks(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{Settings: map[string]string{"click-flush-interval": "1h"}})
	l := n.createURL(t, "https://example.com/pending")

	for range 3 {
		if r := n.get(t, "/"+l.ShortCode); r.status != http.StatusFound {
			t.Fatalf("GET /%s: want 302, got %v", l.ShortCode, r)
		}
	}
	if err := n.stop(); err != nil {
		t.Errorf("graceful shutdown on SIGTERM exited with %v, want status 0", err)
	}
	n.restart()
	if got := n.waitClicks(t, l.ShortCode, 3); got != 3 {
		t.Errorf("after SIGTERM and restart stats show %d clicks, want 3", got)
	}
	n.requireRedirect(t, l.ShortCode, "https://example.com/pending")
}

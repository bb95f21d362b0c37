package e2e

import (
	"net/http"
	"testing"
)

// restoreBackup posts a backup to /admin/restore.
func (n *node) restoreBackup(t *testing.T, backup []byte) response {
	t.Helper()
	return n.request(t, http.MethodPost, "/admin/restore", http.Header{"Content-Type": {"application/octet-stream"}}, backup)
}

// backup takes a backup of n's state.
func (n *node) backup(t *testing.T) []byte {
	t.Helper()
	r := n.get(t, "/admin/backup")
	if r.status != http.StatusOK || len(r.body) == 0 {
		t.Fatalf("GET /admin/backup: want 200 with a body, got %v", r)
	}
	return r.body
}

// TestRestoreIntoFreshNode is disaster recovery as an operator runs it:
// start a brand-new node, and as soon as /health answers, restore the
// backup into it. The node is not ready for a restore yet (its Raft has
// not committed its first configuration); the restore waits for it
// instead of failing.
func TestRestoreIntoFreshNode(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	src := startNode(t, nodeOptions{})
	a := src.createURL(t, "https://example.com/disaster/a")
	b := src.createURL(t, "https://example.com/disaster/b")
	backup := src.backup(t)

	fresh := newNode(t, "fresh")
	answers := func(health) bool { return true }
	if err := fresh.launchUntil(t, nodeOptions{ID: "fresh"}, nil, func() error { return fresh.waitReady(answers) }); err != nil {
		t.Fatalf("fresh node does not answer /health: %v", err)
	}
	if r := fresh.restoreBackup(t, backup); r.status != http.StatusOK {
		t.Fatalf("restore into a node that just answered /health: want 200, got %v", r)
	}
	fresh.requireRedirect(t, a.ShortCode, a.OriginalURL)
	fresh.requireRedirect(t, b.ShortCode, b.OriginalURL)
	if got := fresh.createURL(t, "https://example.com/disaster/after"); got.ShortCode == a.ShortCode || got.ShortCode == b.ShortCode {
		t.Errorf("a create after the restore got %s, a code the backup holds", got.ShortCode)
	}
}

// TestRestoreNeverReissuesCodes: a code handed out after a backup was
// taken stays out of use once that backup is restored. Otherwise whoever
// holds that short link would land on a stranger's target.
func TestRestoreNeverReissuesCodes(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})
	a := n.createURL(t, "https://example.com/reissue/a")
	backup := n.backup(t)
	b := n.createURL(t, "https://example.com/reissue/b")
	deleted := n.createURL(t, "https://example.com/reissue/deleted")
	if r := n.request(t, http.MethodDelete, "/api/v1/urls/"+deleted.ShortCode, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: want 204, got %v", r)
	}

	if r := n.restoreBackup(t, backup); r.status != http.StatusOK {
		t.Fatalf("restore: want 200, got %v", r)
	}
	n.requireRedirect(t, a.ShortCode, a.OriginalURL)
	for range 20 {
		c := n.createURL(t, "https://example.com/reissue/c")
		if c.ShortCode == b.ShortCode || c.ShortCode == deleted.ShortCode {
			t.Fatalf("a create after the restore got %s again, a code handed out after the backup", c.ShortCode)
		}
	}
	for _, code := range []string{b.ShortCode, deleted.ShortCode} {
		r := n.request(t, http.MethodGet, "/"+code, http.Header{"Accept": {"application/json"}}, nil)
		requireProblem(t, r, http.StatusNotFound)
		if custom := n.postJSON(t, "/api/v1/urls", map[string]any{"url": "https://example.com/squat", "custom_code": code}); custom.status != http.StatusConflict {
			t.Errorf("custom_code %s after the restore: want 409 (it was handed out before), got %v", code, custom)
		}
	}
}

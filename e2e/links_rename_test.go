package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestRenameIsVisibleOnEveryNode: after a rename's 200, through any node,
// every node redirects the new code and answers the old one as a deleted
// link's: 404 for its redirect and its link, 409 for a create that asks
// for it. The link keeps its id and clicks.
func TestRenameIsVisibleOnEveryNode(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	waitOneLeader(t, formationBound, nodes...)

	var stale []string
	for i := range 6 {
		creator, renamer := nodes[i%3], nodes[(i+1)%3]
		before, after := "before-"+itoa(i), "after-"+itoa(i)
		target := "https://example.com/renamed/" + itoa(i)
		l := creator.createLink(t, map[string]any{"original_url": target, "custom_code": before})
		if r := creator.request(t, http.MethodGet, "/"+before, nil, nil); r.status != http.StatusFound {
			t.Fatalf("GET /%s before the rename: %v", before, r)
		}
		rename(t, renamer, before, after)
		for _, n := range []*node{renamer, nodes[(i+2)%3], creator} {
			if got := n.request(t, http.MethodHead, "/"+after, nil, nil).header.Get("Location"); got != target {
				stale = append(stale, "HEAD /"+after+" on "+n.id+" after a rename through "+renamer.id+": "+got)
			}
			for _, path := range []string{"/" + before, "/api/v1/urls/" + before} {
				if r := n.request(t, http.MethodGet, path, nil, nil); r.status != http.StatusNotFound {
					stale = append(stale, "GET "+path+" on "+n.id+" after a rename through "+renamer.id+": "+itoa(r.status))
				}
			}
			var read link
			if err := json.Unmarshal(n.get(t, "/api/v1/urls/"+after).body, &read); err != nil || read.ID != l.ID {
				stale = append(stale, "link "+after+" on "+n.id+" is not link "+itoa(int(l.ID)))
			}
		}
		if r := nodes[(i+2)%3].postJSON(t, "/api/v1/urls", map[string]any{"original_url": target, "custom_code": before}); r.status != http.StatusConflict {
			t.Errorf("create with the retired code %s: %v, want 409", before, r)
		}
	}
	if len(stale) > 0 {
		t.Fatalf("%d reads right after an acknowledged rename served the old state:\n%v", len(stale), stale)
	}
}

// rename renames code to newCode through n. The cluster raises itself to
// the level renames need once its leader hears every server's, which a
// fresh cluster does within moments: until then a rename is 503.
func rename(t *testing.T, n *node, code, newCode string) {
	t.Helper()
	var r response
	if !eventually(10*time.Second, func() bool {
		r = n.patch(t, code, `{"short_code":"`+newCode+`"}`)
		return r.status != http.StatusServiceUnavailable
	}) || r.status != http.StatusOK {
		t.Fatalf("PATCH /%s to %s through %s: want 200, got %v", code, newCode, n.id, r)
	}
	var l link
	if err := json.Unmarshal(r.body, &l); err != nil || l.ShortCode != newCode {
		t.Fatalf("rename answered %v", r)
	}
}

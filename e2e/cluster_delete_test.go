package e2e

import (
	"net/http"
	"testing"
)

// TestDeleteIsVisibleWhenAcknowledged: once a DELETE answered 204, the node
// that answered and every other node that reaches the leader answer 404
// for that code, at once. Deletes go through every node in turn (followers
// forward them to the leader); each is followed immediately by a read on
// the node that answered, then on the others.
func TestDeleteIsVisibleWhenAcknowledged(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	waitOneLeader(t, formationBound, nodes...)

	var stale []string
	for i := range 30 {
		creator, deleter := nodes[i%3], nodes[(i+1)%3]
		l := creator.createURL(t, "https://example.com/delete-visible/"+itoa(i))
		for _, n := range nodes {
			n.requireRedirectHead(t, l.ShortCode, l.OriginalURL)
		}
		if r := deleter.request(t, http.MethodDelete, "/api/v1/urls/"+l.ShortCode, nil, nil); r.status != http.StatusNoContent {
			t.Fatalf("DELETE /%s through %s: want 204, got %v", l.ShortCode, deleter.id, r)
		}
		readers := []*node{deleter, nodes[(i+2)%3], creator}
		for _, n := range readers {
			if r := n.request(t, http.MethodHead, "/"+l.ShortCode, nil, nil); r.status != http.StatusNotFound {
				stale = append(stale, "HEAD /"+l.ShortCode+" on "+n.id+" after its delete through "+deleter.id+": "+itoa(r.status))
			}
		}
	}
	if len(stale) > 0 {
		t.Fatalf("%d reads after an acknowledged delete still found the link:\n%v", len(stale), stale)
	}
}

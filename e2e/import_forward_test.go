package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestImportThroughFollowerAndLeader: the leader reads an import as it
// imports it; a follower sends it on to the leader as it reads it. Either
// way every line is created and redirects on every node once the answer
// arrives.
func TestImportThroughFollowerAndLeader(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, followers := waitOneLeader(t, formationBound, nodes...)

	const lines = 5000 // ~700 KB: far beyond what is read with the header
	for _, via := range []*node{followers[0], leader} {
		var b strings.Builder
		for i := range lines {
			fmt.Fprintf(&b, `{"short_code":"fw-%s-%05d","original_url":"https://example.com/import/%s/%d"}`+"\n", via.id, i, via.id, i)
		}
		r := via.request(t, http.MethodPost, "/admin/import", http.Header{"Content-Type": {"application/x-ndjson"}}, []byte(b.String()))
		if r.status != http.StatusOK || !strings.Contains(string(r.body), fmt.Sprintf(`"created":%d,"skipped":0,"failed":[]`, lines)) {
			t.Fatalf("POST /admin/import through %s: %v", via.id, r)
		}
		last := fmt.Sprintf("fw-%s-%05d", via.id, lines-1)
		via.requireRedirect(t, last, fmt.Sprintf("https://example.com/import/%s/%d", via.id, lines-1))
		for _, n := range nodes {
			n.requireRedirectHead(t, last, fmt.Sprintf("https://example.com/import/%s/%d", via.id, lines-1))
		}
	}
}

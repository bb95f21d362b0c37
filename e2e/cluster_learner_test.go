package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestJoinAnswersBeforeTheState: a fourth node joins a three-node cluster
// holding 200 000 links through POST /admin/join. The join answers while
// the node is a learner (a non-voter catching up) that does not hold the
// links yet; the leader then promotes it to voter, and it serves every
// link from its own state.
func TestJoinAnswersBeforeTheState(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, _ := waitOneLeader(t, formationBound, nodes...)

	const links = 200_000
	target := func(i int) string { return fmt.Sprintf("https://example.com/learner/%d", i) }
	var b strings.Builder
	for i := range links {
		fmt.Fprintf(&b, `{"short_code":"ln%06d","original_url":"%s"}`+"\n", i, target(i))
	}
	r := leader.request(t, http.MethodPost, "/admin/import", http.Header{"Content-Type": {"application/x-ndjson"}}, []byte(b.String()))
	if r.status != http.StatusOK || !strings.Contains(string(r.body), fmt.Sprintf(`"created":%d,"skipped":0`, links)) {
		t.Fatalf("POST /admin/import: %v", r)
	}

	joiner := startWaitingNode(t, "node4", leader.clusterKey, nil)
	r = leader.postJSON(t, "/admin/join", map[string]any{"id": joiner.id, "raft_addr": joiner.raftAddr, "http_addr": joiner.httpAddr})
	if r.status != http.StatusOK {
		t.Fatalf("POST /admin/join: want 200, got %v", r)
	}
	var answer clusterView
	if err := json.Unmarshal(r.body, &answer); err != nil {
		t.Fatalf("join answer: %v", err)
	}
	if s, ok := answer.server("node4"); !ok || s.Suffrage != "Nonvoter" || !s.CatchingUp {
		t.Fatalf("the join answered with node4 as %+v (listed %v), want a non-voter catching up", s, ok)
	}
	// /health is 503 until node4 has the cluster's state; its links count
	// says how much of it arrived.
	var h health
	if r := joiner.get(t, "/health"); json.Unmarshal(r.body, &h) != nil || h.Links == links {
		t.Errorf("the join answered once node4 held every link (%v): it should not wait for the state", r)
	}

	if !eventually(membershipWait*4, func() bool {
		c, err := leader.tryRequest(t, http.MethodGet, "/admin/cluster", nil, nil)
		var v clusterView
		if err != nil || c.status != http.StatusOK || json.Unmarshal(c.body, &v) != nil {
			return false
		}
		s, ok := v.server("node4")
		return ok && s.Suffrage == "Voter" && !s.CatchingUp
	}) {
		t.Fatalf("node4 not promoted to voter: %+v", leader.clusterView(t))
	}
	if h := joiner.health(t); h.Links != links {
		t.Fatalf("node4 promoted holding %d links, want %d", h.Links, links)
	}
	for _, i := range []int{0, links / 2, links - 1} {
		joiner.requireRedirect(t, fmt.Sprintf("ln%06d", i), target(i))
	}
}

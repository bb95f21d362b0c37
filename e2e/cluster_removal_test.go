package e2e

import (
	"net/http"
	"testing"
	"time"
)

// TestRemovedServerStaysRemovedAcrossALeaderChange: node4 is removed with
// /admin/leave and stopped, and leadership moves at once to another node.
// Gossip still lists node4 for a few seconds (a stopped process is only
// "suspect" at first), and the new leader does not know of the removal it
// did not make: it must not add node4 back.
func TestRemovedServerStaysRemovedAcrossALeaderChange(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, _ := waitOneLeader(t, formationBound, nodes...)
	n4 := launchNode(t, "node4", nodes[0].clusterKey, map[string]string{"join": nodes[0].gossipAddr + "," + nodes[1].gossipAddr})
	leader.waitServers(t, 20*time.Second, "node1", "node2", "node3", "node4")

	if r := leader.postJSON(t, "/admin/leave", map[string]string{"id": "node4"}); r.status != http.StatusOK {
		t.Fatalf("leave node4: %v", r)
	}
	if err := n4.stop(); err != nil {
		t.Fatalf("stop node4: %v", err)
	}
	if r := leader.request(t, http.MethodPost, "/admin/leadership-transfer", nil, nil); r.status != http.StatusOK {
		t.Fatalf("leadership transfer: %v", r)
	}
	newLeader, _ := waitOneLeader(t, 10*time.Second, nodes...)
	deadline := time.Now().Add(8 * time.Second) // past gossip's suspicion of node4
	for time.Now().Before(deadline) {
		newLeader.waitServers(t, 5*time.Second, "node1", "node2", "node3")
		time.Sleep(200 * time.Millisecond)
	}
}

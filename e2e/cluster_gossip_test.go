package e2e

import (
	"net/http"
	"testing"
	"time"
)

// forgetDead is longer than memberlist (LAN defaults) keeps gossiping to a
// member it declared dead (30 s) after its suspicion timeout.
const forgetDead = 40 * time.Second

// TestGossipHealsAfterARestartWithItsSeedsDown: node3 is down long enough
// for the others' gossip to give up on it, then restarts while the only
// --join seed it is given (node1) is down for good. Raft works for it again,
// but its gossip starts alone; it must find the live servers of its Raft
// configuration by itself. The proof: with node2 leading, node4, started
// with node3 as its only seed, is seen by the leader and added as a voter.
func TestGossipHealsAfterARestartWithItsSeedsDown(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	waitOneLeader(t, formationBound, nodes...)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]

	n1.kill9()
	n3.kill9()
	time.Sleep(forgetDead)
	n3.args, n3.env = n3.commandLine(nodeOptions{Settings: map[string]string{"bootstrap-expect": "3", "join": n1.gossipAddr}})
	n3.restartUntil(leaderKnown)
	leader, _ := waitOneLeader(t, 10*time.Second, n2, n3)
	if leader == n3 {
		if r := n3.request(t, http.MethodPost, "/admin/leadership-transfer", nil, nil); r.status != http.StatusOK {
			t.Fatalf("leadership transfer to node2: %v", r)
		}
		if leader, _ = waitOneLeader(t, 10*time.Second, n2, n3); leader != n2 {
			t.Fatalf("leader after transfer: %s, want node2", leader.id)
		}
	}

	n4 := launchNode(t, "node4", n3.clusterKey, map[string]string{"join": n3.gossipAddr})
	n2.waitServers(t, 30*time.Second, "node1", "node2", "node3", "node4")
	if err := n4.waitReady(leaderKnown); err != nil {
		t.Fatalf("node4 after being added: %v", err)
	}
	l := n4.createURL(t, "https://example.com/gossip-healed")
	for _, n := range []*node{n2, n3, n4} {
		n.requireRedirectHead(t, l.ShortCode, l.OriginalURL)
	}
}

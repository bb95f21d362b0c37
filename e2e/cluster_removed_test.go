package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// removedLogLine is what a removed server logs, once, when it learns of its
// removal and stops taking part in the cluster.
const removedLogLine = "this server was removed from the cluster"

// removedWatch is how long, after the last leadership change, every
// remaining node is watched for the removed server coming back: past
// gossip's suspicion of a member and several of the leader's
// reconciliation rounds (every 2 s).
const removedWatch = 10 * time.Second

// TestRemovedRunningServerStaysRemoved: node4 is removed with
// POST /admin/leave while it keeps running, then leadership moves from
// voter to voter. No leader may add node4 back: it never reappears in any
// remaining node's GET /admin/cluster, and node4 itself learns that it was
// removed (it says so in its log, once). Restarted with its old data dir it
// still stays out; started again with an empty data dir and joined
// explicitly, it comes back as a voter.
func TestRemovedRunningServerStaysRemoved(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, _ := waitOneLeader(t, formationBound, nodes...)
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.gossipAddr)
	}
	n4 := launchNode(t, "node4", leader.clusterKey, map[string]string{"join": strings.Join(seeds, ",")})
	all := append(slices.Clone(nodes), n4)
	waitVoters(t, leader, membershipWait, nodeIDs(all...)...)

	if r := leader.postJSON(t, "/admin/leave", map[string]string{"id": n4.id}); r.status != http.StatusOK {
		t.Fatalf("POST /admin/leave node4: want 200, got %v", r)
	}
	for _, n := range nodes {
		n.waitServers(t, membershipWait, nodeIDs(nodes...)...)
	}

	// Leadership moves on until every remaining voter has led once (a
	// transfer picks its target itself, so a few more may be needed).
	led := map[string]bool{leader.id: true}
	for transfer := 0; len(led) < len(nodes) && transfer < 3*len(nodes); transfer++ {
		if r := leader.request(t, http.MethodPost, "/admin/leadership-transfer", nil, nil); r.status != http.StatusOK {
			t.Fatalf("leadership transfer from %s: want 200, got %v", leader.id, r)
		}
		var next *node
		if !eventually(leaderWaitTimeout, func() bool { next = agreedLeader(nodes); return next != nil && next != leader }) {
			t.Fatalf("no other leader that every node names within %v of a transfer from %s", leaderWaitTimeout, leader.id)
		}
		leader, led[next.id] = next, true
		requireOut(t, n4.id, nodes)
	}
	t.Logf("voters that led after the removal: %v", slices.Sorted(maps.Keys(led)))
	watchOut(t, n4.id, nodes, removedWatch)

	if !eventually(membershipWait, func() bool { return strings.Contains(n4.out.String(), removedLogLine) }) {
		t.Errorf("node4 kept running after its removal and never logged %q", removedLogLine)
	}
	if got := strings.Count(n4.out.String(), removedLogLine); got != 1 {
		t.Errorf("node4 logged %q %d times, want once", removedLogLine, got)
	}
	if err := answers(n4); err != nil {
		t.Errorf("removed node4 stopped serving HTTP: %v", err)
	}

	// Restarted with the data dir it was removed with, it stays out, and
	// knows it from the start.
	n4.kill()
	before := len(n4.out.String())
	fmt.Fprintf(n4.out, "\n=== harness: restart with the old data dir ===\n")
	n4.launch()
	if !eventually(leaderWaitTimeout, func() bool { return answers(n4) == nil }) {
		t.Fatalf("node4 restarted with its old data dir does not serve HTTP: %v", answers(n4))
	}
	if !strings.Contains(n4.out.String()[before:], removedLogLine) {
		t.Errorf("node4 restarted with its old data dir did not log %q as it started", removedLogLine)
	}
	watchOut(t, n4.id, nodes, removedWatch)

	// An empty data dir and an explicit join bring it back.
	n4.kill()
	fresh := startWaitingNode(t, n4.id, leader.clusterKey, nil)
	r := nodes[1].postJSON(t, "/admin/join", map[string]any{"id": fresh.id, "raft_addr": fresh.raftAddr, "http_addr": fresh.httpAddr})
	if r.status != http.StatusOK {
		t.Fatalf("POST /admin/join of node4 with an empty data dir: want 200, got %v", r)
	}
	waitVoters(t, leader, membershipWait, nodeIDs(append(slices.Clone(nodes), fresh)...)...)
	if err := fresh.waitReady(leaderKnown); err != nil {
		t.Fatalf("node4 joined with an empty data dir: %v", err)
	}
	l := fresh.createURL(t, "https://example.com/removed/back")
	for _, n := range nodes {
		n.requireRedirectHead(t, l.ShortCode, l.OriginalURL)
	}
}

// waitVoters polls n's GET /admin/cluster (bounded) until it lists exactly
// ids, every one of them a voter.
func waitVoters(t *testing.T, n *node, timeout time.Duration, ids ...string) {
	t.Helper()
	var last clusterView
	if !eventually(timeout, func() bool {
		r, err := n.tryRequest(t, http.MethodGet, "/admin/cluster", nil, nil)
		if err != nil || r.status != http.StatusOK || json.Unmarshal(r.body, &last) != nil {
			return false
		}
		for _, s := range last.Servers {
			if !strings.EqualFold(s.Suffrage, "voter") {
				return false
			}
		}
		return slices.Equal(last.ids(), ids)
	}) {
		t.Fatalf("/admin/cluster on %s does not list exactly %v as voters within %v; last: %+v", n.id, ids, timeout, last.Servers)
	}
}

// requireOut fails the test if any of nodes lists id in GET /admin/cluster.
func requireOut(t *testing.T, id string, nodes []*node) {
	t.Helper()
	for _, n := range nodes {
		if view := n.clusterView(t); slices.Contains(view.ids(), id) {
			t.Fatalf("%s is back in the configuration on %s (leader %s): %v", id, n.id, view.Leader, view.ids())
		}
	}
}

// watchOut reads every node's GET /admin/cluster for d (a bounded number
// of rounds) and fails the test as soon as one lists id.
func watchOut(t *testing.T, id string, nodes []*node, d time.Duration) {
	t.Helper()
	const round = 200 * time.Millisecond
	for range int(d / round) {
		requireOut(t, id, nodes)
		time.Sleep(round)
	}
}

// agreedLeader is the node every one of nodes names as leader in /health,
// nil while they do not agree on one.
func agreedLeader(nodes []*node) *node {
	var leader *node
	named := map[string]bool{}
	for _, n := range nodes {
		h, err := n.tryHealth()
		if err != nil {
			return nil
		}
		named[h.Leader] = true
		if h.Role == "leader" {
			leader = n
		}
	}
	if leader == nil || len(named) != 1 || !named[leader.id] {
		return nil
	}
	return leader
}

// answers reports whether n's HTTP port answers at all: how a removed
// node's /health answers is not this test's.
func answers(n *node) error {
	probe := &http.Client{Transport: n.transport, Timeout: 2 * time.Second}
	resp, err := probe.Get("http://" + n.httpAddr + "/health/live")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

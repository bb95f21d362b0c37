package e2e

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Nodes that come back at other addresses, as recreated pods and
// containers do: same id, same data dir, new IP. Raft's configuration still
// holds the addresses they had; they must find each other where they are
// now, without `linkraft recover`, and the configuration must follow.

// movedWait bounds how long a cluster that moved may take to elect a
// leader and show its new addresses: elections take about a second once
// gossip has met, and the leader updates an address within its 2 s
// reconcile; the rest is slack for a loaded machine.
const movedWait = 45 * time.Second

// movedOneWait bounds how long one node that moved while the others run
// may take to be reached again: its old gossip entry must be declared dead
// (a few seconds of failed probes) before its name is let in at the new
// address, and Raft's replication to it backs off meanwhile. About 11 s
// here; without linkraft's settings memberlist took over 40 s, until it
// forgot the dead entry and a periodic push-pull came by.
const movedOneWait = 30 * time.Second

// moveTo gives n fresh HTTP, Raft and gossip ports on ip (a loopback
// address other than the harness's 127.0.0.1), as a recreated pod gets a
// new IP. The node keeps its id and data dir.
func (n *node) moveTo(t *testing.T, ip string) {
	t.Helper()
	n.httpAddr = net.JoinHostPort(ip, itoa(freePortOn(t, ip, false)))
	n.raftAddr = net.JoinHostPort(ip, itoa(freePortOn(t, ip, false)))
	n.gossipAddr = net.JoinHostPort(ip, itoa(freePortOn(t, ip, true)))
	n.transport.CloseIdleConnections()
	fmt.Fprintf(n.out, "\n=== harness: moved to http %s raft %s gossip %s ===\n", n.httpAddr, n.raftAddr, n.gossipAddr)
}

// waitAddresses polls /admin/cluster on via until the configuration lists
// every node of nodes at its current Raft and HTTP addresses (bounded).
func waitAddresses(t *testing.T, timeout time.Duration, via *node, nodes ...*node) {
	t.Helper()
	var last []string
	ok := eventually(timeout, func() bool {
		last = nil
		r, err := via.tryRequest(t, http.MethodGet, "/admin/cluster", nil, nil)
		if err != nil || r.status != http.StatusOK {
			last = append(last, fmt.Sprintf("GET /admin/cluster: %v %v", r, err))
			return false
		}
		var c clusterView
		decodeObject(t, r, nil, &c)
		for _, n := range nodes {
			s, found := c.server(n.id)
			if !found || s.RaftAddr != n.raftAddr || s.HTTPAddr != n.httpAddr {
				last = append(last, fmt.Sprintf("%s listed as %+v (found %v), want raft %s http %s", n.id, s, found, n.raftAddr, n.httpAddr))
			}
		}
		return len(last) == 0 && len(c.Servers) == len(nodes)
	})
	if !ok {
		t.Fatalf("/admin/cluster on %s does not show the nodes' current addresses within %v:\n%s", via.id, timeout, strings.Join(last, "\n"))
	}
}

// waitApplied waits until n has applied at least index (bounded): its
// Raft receives the leader's entries, not just answers through the leader.
func waitApplied(t *testing.T, n *node, index uint64) {
	t.Helper()
	var last uint64
	ok := eventually(movedWait, func() bool {
		h, err := n.tryHealth()
		last = h.AppliedIndex
		return err == nil && h.AppliedIndex >= index
	})
	if !ok {
		t.Fatalf("%s applied %d, not %d, within %v", n.id, last, index, movedWait)
	}
}

// TestClusterComesBackOnNewAddresses: every node of a three-node cluster
// stops and starts again with its id and data dir but on another loopback
// address (Raft, gossip and HTTP), joined to the others' new gossip
// addresses, as when every pod of a StatefulSet is recreated at once. The
// configuration names only the old addresses, which nothing answers: the
// nodes must elect a leader at the addresses gossip tells them, serve the
// old links, take new writes, and the configuration must show the new
// addresses (/admin/cluster and `linkraft status`).
func TestClusterComesBackOnNewAddresses(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	key := newClusterKey(t)
	nodes := startCluster(t, 3, map[string]string{"cluster-key": key})
	waitOneLeader(t, formationBound, nodes...)
	var acked []link
	for i, n := range nodes {
		acked = append(acked, n.createURL(t, "https://example.com/moved/before/"+itoa(i)))
	}
	// Every node has every link before the stop (a redirect on a lagging
	// node catches it up), so each can be asked for them afterwards.
	for _, n := range nodes {
		checkRedirectsHead(t, n, acked)
	}

	for _, n := range nodes {
		if err := n.stop(); err != nil {
			t.Fatalf("stop %s: %v", n.id, err)
		}
	}
	var seeds []string
	for i, n := range nodes {
		n.moveTo(t, fmt.Sprintf("127.0.0.%d", 21+i))
		seeds = append(seeds, n.gossipAddr)
	}
	for _, n := range nodes {
		n.args, n.env = n.commandLine(nodeOptions{Settings: map[string]string{
			"cluster-key": key, "bootstrap-expect": "3", "join": strings.Join(seeds, ","),
		}})
		n.launch()
	}
	start := time.Now()
	leader, _ := waitOneLeader(t, movedWait, nodes...)
	t.Logf("a leader known to every node %v after the start on new addresses", time.Since(start).Round(time.Millisecond))

	for _, n := range nodes {
		checkRedirectsHead(t, n, acked)
	}
	for i, n := range nodes {
		acked = append(acked, n.createURL(t, "https://example.com/moved/after/"+itoa(i)))
	}
	for _, n := range nodes {
		checkRedirectsHead(t, n, acked)
	}
	for _, n := range nodes {
		waitAddresses(t, movedWait, n, nodes...)
	}
	out, err := runCLI(t, leader, "status")
	if err != nil {
		t.Fatalf("linkraft status: %v\n%s", err, out)
	}
	for _, n := range nodes {
		if !strings.Contains(out, n.raftAddr) || !strings.Contains(out, n.httpAddr) {
			t.Errorf("linkraft status does not show %s at raft %s, http %s:\n%s", n.id, n.raftAddr, n.httpAddr, out)
		}
	}
	if strings.Contains(out, "127.0.0.1:") {
		t.Errorf("linkraft status still shows an old address:\n%s", out)
	}
}

// TestClusterNodeMovesWhileTheOthersRun: a follower stops and starts again
// on another loopback address while the other two keep the cluster going.
// The leader must replicate to it at its new address (not only answer it
// through forwarding), and the configuration must show the new address.
func TestClusterNodeMovesWhileTheOthersRun(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	key := newClusterKey(t)
	nodes := startCluster(t, 3, map[string]string{"cluster-key": key})
	leader, followers := waitOneLeader(t, formationBound, nodes...)
	moved := followers[0]
	var acked []link
	for i, n := range nodes {
		acked = append(acked, n.createURL(t, "https://example.com/moved-one/before/"+itoa(i)))
	}

	if err := moved.stop(); err != nil {
		t.Fatalf("stop %s: %v", moved.id, err)
	}
	acked = append(acked, leader.createURL(t, "https://example.com/moved-one/while-away"))
	moved.moveTo(t, "127.0.0.24")
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.gossipAddr)
	}
	moved.args, moved.env = moved.commandLine(nodeOptions{Settings: map[string]string{
		"cluster-key": key, "bootstrap-expect": "3", "join": strings.Join(seeds, ","),
	}})
	moved.launch()
	start := time.Now()
	waitOneLeader(t, movedOneWait, nodes...)
	t.Logf("%s knows the leader %v after its start at %s", moved.id, time.Since(start).Round(time.Millisecond), moved.raftAddr)
	waitAddresses(t, movedOneWait, leader, nodes...)
	t.Logf("the configuration names %s's new address %v after its start", moved.id, time.Since(start).Round(time.Millisecond))

	// Replication reaches the new address: the moved node applies a write
	// made on the leader by itself.
	l := leader.createURL(t, "https://example.com/moved-one/after")
	acked = append(acked, l)
	waitApplied(t, moved, leader.health(t).AppliedIndex)
	checkRedirectsHead(t, moved, acked)
	acked = append(acked, moved.createURL(t, "https://example.com/moved-one/through-it"))
	for _, n := range nodes {
		checkRedirectsHead(t, n, acked)
	}
}

package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Membership of a running cluster (the admin endpoints and guarantees of
// docs/API.md): leave and join through the API and the CLI, a node added and
// removed under load, a node with the wrong cluster key, refused membership
// changes, and leadership transfer.

// membershipWait bounds waiting for a configuration change to show in
// /admin/cluster (the leader adds gossip members within ~2 s).
const membershipWait = 15 * time.Second

// startWaitingNode starts a node with a fresh data dir that bootstraps
// nothing and joins no gossip seeds: it waits to be added with
// POST /admin/join. It returns once its HTTP port answers.
func startWaitingNode(t *testing.T, id, clusterKey string, settings map[string]string) *node {
	t.Helper()
	all := map[string]string{"bootstrap-expect": "3"}
	for k, v := range settings {
		all[k] = v
	}
	n := launchNode(t, id, clusterKey, all)
	if err := n.waitLive(); err != nil {
		t.Fatalf("node %s: %v", id, err)
	}
	return n
}

// TestHealthReadinessOfAJoiner: a node started to join a cluster that does
// not exist yet serves HTTP (liveness 200) but is not ready (/health 503,
// not_member): a load balancer must not send it traffic, it would answer
// 404 to every code. Once added, it is ready.
func TestHealthReadinessOfAJoiner(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	first := startNode(t, nodeOptions{ID: "node1"})
	l := first.createURL(t, "https://example.com/readiness/before")
	// The key node1 made for itself at its first start, given to the
	// joiner as an operator would.
	joiner := startWaitingNode(t, "node2", "", map[string]string{"cluster-key-file": filepath.Join(first.dataDir, "cluster.key")})

	r := joiner.get(t, "/health")
	var h health
	decodeObject(t, r, []string{"status", "reason", "node_id", "role", "leader", "links", "applied_index", "version"}, &h)
	if r.status != http.StatusServiceUnavailable || h.Status != "unavailable" || h.Reason != "not_member" {
		t.Errorf("/health on a node waiting to join: %d %+v, want 503 unavailable, reason not_member", r.status, h)
	}
	if h := joiner.liveHealth(t); h.Status != "alive" || h.NodeID != "node2" {
		t.Errorf("/health/live on a node waiting to join: %+v, want alive", h)
	}

	r = first.postJSON(t, "/admin/join", map[string]any{"id": joiner.id, "raft_addr": joiner.raftAddr, "http_addr": joiner.httpAddr})
	if r.status < 200 || r.status > 299 {
		t.Fatalf("POST /admin/join: want 2xx, got %v", r)
	}
	if err := joiner.waitReady(leaderKnown); err != nil {
		t.Fatalf("after the join: %v", err)
	}
	if h := joiner.health(t); h.Status != "healthy" || h.Reason != "" || h.Links != 1 {
		t.Errorf("/health after the join: %+v, want healthy with the cluster's link", h)
	}
	joiner.requireRedirect(t, l.ShortCode, l.OriginalURL)
}

// TestClusterLeaveAndJoin removes a server and adds it back with a fresh
// data dir, once through the admin API and once through the CLI; the
// re-added node serves the links created before it joined.
func TestClusterLeaveAndJoin(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startJoinedCluster(t, 3, nil)
	leader, _ := waitOneLeader(t, leaderWaitTimeout, nodes...)

	var acked []link
	for i, n := range nodes {
		acked = append(acked, n.createURL(t, "https://example.com/membership/before/"+itoa(i)))
	}

	cases := []struct {
		name  string
		slug  string
		leave func(t *testing.T, via *node, id string)
		join  func(t *testing.T, via *node, n *node)
	}{
		{
			name: "admin API",
			slug: "api",
			leave: func(t *testing.T, via *node, id string) {
				r := via.postJSON(t, "/admin/leave", map[string]any{"id": id})
				if r.status != http.StatusOK {
					t.Fatalf("POST /admin/leave %s through %s: want 200, got %v", id, via.id, r)
				}
			},
			join: func(t *testing.T, via *node, n *node) {
				r := via.postJSON(t, "/admin/join", map[string]any{"id": n.id, "raft_addr": n.raftAddr, "http_addr": n.httpAddr})
				if r.status != http.StatusOK {
					t.Fatalf("POST /admin/join %s through %s: want 200, got %v", n.id, via.id, r)
				}
			},
		},
		{
			name: "CLI",
			slug: "cli",
			leave: func(t *testing.T, via *node, id string) {
				if out, err := runCLI(t, via, "leave", "--id", id); err != nil {
					t.Fatalf("linkraft leave --id %s: %v\n%s", id, err, out)
				}
			},
			join: func(t *testing.T, via *node, n *node) {
				if out, err := runCLI(t, via, "join", "--id", n.id, "--raft-addr", n.raftAddr, "--http-addr", n.httpAddr); err != nil {
					t.Fatalf("linkraft join --id %s: %v\n%s", n.id, err, out)
				}
			},
		},
	}
	parent := t // owns the replacement nodes, which outlive each subtest
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, followers := waitOneLeader(t, leaderWaitTimeout, nodes...)
			gone, via := followers[0], followers[1]

			// The call goes through a follower, which forwards it.
			tc.leave(t, via, gone.id)
			rest := []*node{}
			for _, n := range nodes {
				if n != gone {
					rest = append(rest, n)
				}
			}
			for _, n := range rest {
				n.waitServers(t, membershipWait, nodeIDs(rest...)...)
			}
			gone.kill9()
			acked = append(acked, via.createURL(t, "https://example.com/membership/two-servers/"+tc.slug))

			// A fresh process with the same id and a new data dir and
			// addresses takes its place.
			fresh := startWaitingNode(parent, gone.id, gone.clusterKey, nil)
			tc.join(t, via, fresh)
			for i, n := range nodes {
				if n == gone {
					nodes[i] = fresh
				}
			}
			view := leader.waitServers(t, membershipWait, nodeIDs(nodes...)...)
			if s, _ := view.server(fresh.id); s.RaftAddr != fresh.raftAddr {
				t.Errorf("server %s listed at raft address %q, want the new %q", fresh.id, s.RaftAddr, fresh.raftAddr)
			}
			if err := fresh.waitReady(leaderKnown); err != nil {
				t.Fatalf("joined node %s: %v", fresh.id, err)
			}
			checkRedirectsHead(t, fresh, acked)
			l := fresh.createURL(t, "https://example.com/membership/joined/"+tc.slug)
			acked = append(acked, l)
			for _, n := range nodes {
				n.requireRedirectHead(t, l.ShortCode, l.OriginalURL)
			}
		})
	}

	t.Run("CLI refusals exit 1", func(t *testing.T) {
		out, err := runCLI(t, nodes[0], "leave", "--id", "no-such-node")
		if code := exitCode(err); code != 1 {
			t.Errorf("linkraft leave --id no-such-node: exit %d (%v), want 1; output:\n%s", code, err, out)
		}
		out, err = runCLI(t, nodes[0], "join", "--id", nodes[1].id, "--raft-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t, false)))
		if code := exitCode(err); code != 1 {
			t.Errorf("linkraft join with a duplicate id: exit %d (%v), want 1; output:\n%s", code, err, out)
		}
		leader.waitServers(t, time.Second, nodeIDs(nodes...)...)
	})
}

// exitCode returns the exit status carried by err (0 for nil, -1 when it
// is not an exit status).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	return -1
}

// TestClusterFourthNodeUnderLoad adds a fourth node (gossip --join; the
// leader adds it) and removes it again (SIGTERM with --leave-on-terminate)
// while creates and redirects keep running: no create fails except with a
// retryable 503, the new node redirects every acknowledged code, and the
// configuration goes 3 → 4 → 3.
func TestClusterFourthNodeUnderLoad(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, _ := waitOneLeader(t, leaderWaitTimeout, nodes...)
	// The load goes to the members of the moment.
	var membersMu sync.Mutex
	members := nodes
	current := func() []*node {
		membersMu.Lock()
		defer membersMu.Unlock()
		return members
	}
	setMembers := func(ns []*node) {
		membersMu.Lock()
		members = ns
		membersMu.Unlock()
	}
	load := startLoad(t, loadConfig{
		name:            "fourth-node",
		writers:         current,
		readers:         current,
		createWorkers:   2,
		redirectWorkers: 2,
		pause:           10 * time.Millisecond,
		retry503:        20,
		maxOps:          5000,
		maxDuration:     90 * time.Second,
	})
	if !eventually(10*time.Second, func() bool { return load.ackedCount() >= 20 }) {
		t.Fatalf("the load got only %d creates acknowledged in 10 s", load.ackedCount())
	}

	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.gossipAddr)
	}
	fourth := launchNode(t, "node4", leader.clusterKey, map[string]string{"join": strings.Join(seeds, ","), "leave-on-terminate": "true"})
	all := append(append([]*node(nil), nodes...), fourth)
	leader.waitServers(t, membershipWait, nodeIDs(all...)...)
	if err := fourth.waitReady(leaderKnown); err != nil {
		t.Fatalf("node4: %v", err)
	}
	// Creates through the new node too, while it is a member.
	acked := load.ackedLinks()
	for i := range 5 {
		acked = append(acked, fourth.createURL(t, "https://example.com/fourth/"+itoa(i)))
	}
	checkRedirectsHead(t, fourth, acked)
	// The new member takes its share of the load for a while.
	setMembers(all)
	time.Sleep(2 * time.Second)
	setMembers(nodes)
	time.Sleep(100 * time.Millisecond) // requests already sent to node4 finish

	stopped := time.Now()
	if err := fourth.stop(); err != nil {
		t.Errorf("node4 exited with %v after SIGTERM, want status 0", err)
	}
	exited := time.Since(stopped)
	if _, err := leader.pollServers(t, membershipWait, nodeIDs(nodes...)...); err != nil {
		t.Errorf("node4 left with SIGTERM and --leave-on-terminate: %v", err)
	} else {
		t.Logf("node4 exited %v after SIGTERM; the configuration was back to 3 servers %v after SIGTERM",
			exited.Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
	}
	// A little more load on the three-node cluster after the removal.
	before := load.ackedCount()
	if !eventually(10*time.Second, func() bool { return load.ackedCount() >= before+20 }) {
		t.Errorf("creates stalled after node4 left: %d acknowledged before, %d 10 s later", before, load.ackedCount())
	}
	load.stopLoad()
	load.report(t)
	for _, n := range nodes {
		checkRedirectsHead(t, n, load.ackedLinks())
	}
}

// TestClusterWrongClusterKeyRefused: a node with another --cluster-key that
// points --join at the cluster is never let in: the configuration keeps
// its three servers, the outsider never learns of a leader (its writes
// 503), and naming its raft address in POST /admin/join is refused.
func TestClusterWrongClusterKeyRefused(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	key := newClusterKey(t)
	nodes := startCluster(t, 3, map[string]string{"cluster-key": key})
	leader, _ := waitOneLeader(t, leaderWaitTimeout, nodes...)
	l := nodes[1].createURL(t, "https://example.com/wrong-key/existing")

	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.gossipAddr)
	}
	intruder := launchNode(t, "intruder", newClusterKey(t), map[string]string{
		"join":          strings.Join(seeds, ","),
		"write-timeout": "2s",
	})
	if err := intruder.waitLive(); err != nil {
		t.Fatalf("intruder: %v", err)
	}

	// Give gossip and the leader's reconciliation (every ~2 s) time to
	// let it in, were they going to.
	time.Sleep(5 * time.Second)
	want := nodeIDs(nodes...)
	if got := leader.clusterView(t).ids(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("after 5 s the cluster lists %v, want exactly %v", got, want)
	}
	if h := intruder.liveHealth(t); h.Leader != "" {
		t.Errorf("the wrong-key node knows leader %q, want none", h.Leader)
	}
	r := intruder.postJSON(t, "/api/v1/urls", map[string]any{"original_url": "https://example.com/wrong-key/write"})
	requireProblem(t, r, http.StatusServiceUnavailable)

	r = nodes[2].postJSON(t, "/admin/join", map[string]any{"id": intruder.id, "raft_addr": intruder.raftAddr, "http_addr": intruder.httpAddr})
	if r.status < 400 || r.status > 499 {
		t.Errorf("POST /admin/join naming the wrong-key node: want 4xx, got %v", r)
	} else {
		p := checkProblemBody(t, r)
		t.Logf("join of the wrong-key node refused: %d %s", r.status, p.Detail)
	}
	if got := leader.clusterView(t).ids(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("after the refused join the cluster lists %v, want exactly %v", got, want)
	}
	if h := intruder.liveHealth(t); h.Leader != "" || h.Links != 0 {
		t.Errorf("the wrong-key node learnt leader %q and %d links, want none", h.Leader, h.Links)
	}
	for _, n := range nodes {
		n.requireRedirect(t, l.ShortCode, l.OriginalURL)
		n.createURL(t, "https://example.com/wrong-key/after/"+n.id)
	}
}

// TestClusterMembershipBadInput: joins and leaves that would break the
// cluster, and a corrupt restore, are refused with a 4xx problem+json
// naming the reason; the configuration stays as it was and writes work.
func TestClusterMembershipBadInput(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, followers := waitOneLeader(t, leaderWaitTimeout, nodes...)
	before := leader.clusterView(t)
	// Another cluster: a single node that bootstrapped itself, with the
	// same key (else the join fails before it sees the cluster's id).
	other := startNode(t, nodeOptions{ID: "other-cluster-node", Settings: map[string]string{"cluster-key": leader.clusterKey}})
	otherLink := other.createURL(t, "https://example.com/other-cluster")

	free := fmt.Sprintf("127.0.0.1:%d", freePort(t, false))
	cases := []struct {
		name    string
		via     *node
		path    string
		body    any
		status  int
		mention string // a word the detail must contain (lowercase)
	}{
		{"join with an unreachable raft address", followers[0], "/admin/join",
			map[string]any{"id": "ghost", "raft_addr": free, "http_addr": free}, http.StatusBadRequest, "reach"},
		{"join with a raft address that is not host:port", leader, "/admin/join",
			map[string]any{"id": "ghost", "raft_addr": "no-port-here"}, http.StatusBadRequest, "raft_addr"},
		{"join with an existing id and a new address", followers[1], "/admin/join",
			map[string]any{"id": followers[0].id, "raft_addr": free, "http_addr": free}, http.StatusConflict, followers[0].id},
		{"join with a new id and an existing address", leader, "/admin/join",
			map[string]any{"id": "impostor", "raft_addr": followers[0].raftAddr, "http_addr": followers[0].httpAddr}, http.StatusConflict, followers[0].id},
		{"join a server of another cluster", followers[0], "/admin/join",
			map[string]any{"id": other.id, "raft_addr": other.raftAddr, "http_addr": other.httpAddr}, http.StatusConflict, "cluster"},
		{"leave of an unknown id", followers[1], "/admin/leave",
			map[string]any{"id": "no-such-node"}, http.StatusNotFound, "id"},
		{"leave of the last voter", other, "/admin/leave",
			map[string]any{"id": other.id}, http.StatusConflict, "last"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.via.postJSON(t, tc.path, tc.body)
			p := requireProblem(t, r, tc.status)
			if r.status == tc.status && !strings.Contains(strings.ToLower(p.Detail), strings.ToLower(tc.mention)) {
				t.Errorf("detail %q does not mention %q", p.Detail, tc.mention)
			}
		})
	}

	t.Run("restore of a corrupt backup", func(t *testing.T) {
		backup := leader.get(t, "/admin/backup")
		if backup.status != http.StatusOK || len(backup.body) < 2 {
			t.Fatalf("GET /admin/backup: want 200 with a body, got %v", backup)
		}
		corrupt := append([]byte(nil), backup.body[:len(backup.body)/2]...)
		r := followers[0].request(t, http.MethodPost, "/admin/restore", http.Header{"Content-Type": {"application/octet-stream"}}, corrupt)
		requireProblem(t, r, http.StatusBadRequest)
		// The CLI says so too, with exit status 1.
		file := filepath.Join(t.TempDir(), "corrupt.backup")
		if err := os.WriteFile(file, corrupt, 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := runCLI(t, followers[1], "restore", file); exitCode(err) != 1 {
			t.Errorf("linkraft restore of a corrupt file: %v, want exit status 1; output:\n%s", err, out)
		}
	})

	after := leader.clusterView(t)
	if strings.Join(after.ids(), ",") != strings.Join(before.ids(), ",") {
		t.Errorf("the refused calls changed the cluster from %v to %v", before.ids(), after.ids())
	}
	for _, s := range before.Servers {
		if a, ok := after.server(s.ID); !ok || a.RaftAddr != s.RaftAddr || a.Suffrage != s.Suffrage {
			t.Errorf("server %s changed from %+v to %+v", s.ID, s, a)
		}
	}
	if h := other.health(t); h.Role != "leader" {
		t.Errorf("the other cluster's node is %q after the refused calls, want leader", h.Role)
	}
	if v := other.clusterView(t); len(v.Servers) != 1 {
		t.Errorf("the other cluster lists %v, want itself only", v.ids())
	}
	other.requireRedirect(t, otherLink.ShortCode, otherLink.OriginalURL)
	for _, n := range nodes {
		l := n.createURL(t, "https://example.com/bad-membership/after/"+n.id)
		for _, m := range nodes {
			m.requireRedirectHead(t, l.ShortCode, l.OriginalURL)
		}
	}
	// The other cluster's link never leaked into this one.
	r := leader.request(t, http.MethodGet, "/"+otherLink.ShortCode, http.Header{"Accept": {"application/json"}}, nil)
	if r.status == http.StatusFound && r.header.Get("Location") == otherLink.OriginalURL {
		t.Errorf("the cluster redirects the other cluster's code %s", otherLink.ShortCode)
	}
}

// TestClusterLeadershipTransfer: POST /admin/leadership-transfer hands
// leadership to another voter, every node sees the new leader, and writes
// through every node keep working.
func TestClusterLeadershipTransfer(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, followers := waitOneLeader(t, leaderWaitTimeout, nodes...)
	l := leader.createURL(t, "https://example.com/transfer/before")

	// Asked through a follower, which forwards to the leader.
	r := followers[0].request(t, http.MethodPost, "/admin/leadership-transfer", nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("POST /admin/leadership-transfer: want 200, got %v", r)
	}
	newLeader, _ := waitOneLeader(t, leaderWaitTimeout, nodes...)
	if newLeader == leader {
		t.Errorf("leadership stayed on %s after the transfer", leader.id)
	}
	if h := leader.health(t); h.Role != "follower" || h.Leader != newLeader.id {
		t.Errorf("old leader %s: role %q leader %q, want follower of %s", leader.id, h.Role, h.Leader, newLeader.id)
	}
	for _, n := range nodes {
		n.requireRedirect(t, l.ShortCode, l.OriginalURL)
		m := n.createURL(t, "https://example.com/transfer/after/"+n.id)
		for _, reader := range nodes {
			reader.requireRedirectHead(t, m.ShortCode, m.OriginalURL)
		}
	}
}

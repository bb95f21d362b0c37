package e2e

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestClusterBootstrapOverGossip covers cluster formation: three nodes
// started with the same command (--bootstrap-expect 3, --join seeds) meet
// over gossip and form exactly one Raft cluster that every node agrees on.
func TestClusterBootstrapOverGossip(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)

	leaders := map[string]bool{}
	roles := map[string]int{}
	for _, n := range nodes {
		h := n.health(t)
		leaders[h.Leader] = true
		roles[h.Role]++
		r := n.get(t, "/admin/cluster")
		var cluster struct {
			Servers []map[string]any `json:"servers"`
		}
		decodeObject(t, r, []string{"servers"}, &cluster)
		if len(cluster.Servers) != 3 {
			t.Errorf("%s: /admin/cluster lists %d servers, want 3: %s", n.id, len(cluster.Servers), r.body)
		}
	}
	if len(leaders) != 1 || roles["leader"] != 1 || roles["follower"] != 2 {
		t.Errorf("nodes disagree: leaders %v, roles %v; want one leader known to all and two followers", leaders, roles)
	}
	l := nodes[2].createURL(t, "https://example.com/gossip-cluster")
	for _, n := range nodes {
		n.requireRedirect(t, l.ShortCode, l.OriginalURL)
	}
}

// TestClusterWritesAndLostQuorum covers what docs/API.md guarantees a
// three-node cluster: any node takes writes, every node redirects an
// acknowledged code at once, a node cut off from the leader keeps redirecting
// but answers writes with 503 and Retry-After, and the cluster comes back
// when the killed nodes restart with their data dirs. The cluster is built
// with POST /admin/join so this does not depend on gossip.
func TestClusterWritesAndLostQuorum(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startJoinedCluster(t, 3, map[string]string{"write-timeout": "2s"})

	var leader *node
	var followers []*node
	for _, n := range nodes {
		if n.health(t).Role == "leader" {
			leader = n
		} else {
			followers = append(followers, n)
		}
	}
	if leader == nil || len(followers) != 2 {
		t.Fatalf("want one leader and two followers, got leader %v and %d followers", leader != nil, len(followers))
	}

	r := leader.get(t, "/admin/cluster")
	var cluster struct {
		Servers []map[string]any `json:"servers"`
	}
	decodeObject(t, r, []string{"servers"}, &cluster)
	if len(cluster.Servers) != 3 {
		t.Errorf("/admin/cluster lists %d servers, want 3: %s", len(cluster.Servers), r.body)
	}

	// A write on a follower is forwarded to the leader; once acknowledged,
	// no node may answer 404 for it.
	var acknowledged []link
	for i, n := range []*node{leader, followers[0], followers[1]} {
		r := n.postJSON(t, "/api/v1/urls", map[string]any{"original_url": "https://example.com/cluster/" + itoa(i)})
		if r.status != http.StatusCreated {
			t.Errorf("create on %s (%s): want 201, got %v", n.id, n.health(t).Role, r)
			continue
		}
		var l link
		decodeObject(t, r, createFields, &l)
		acknowledged = append(acknowledged, l)
		for _, reader := range nodes {
			reader.requireRedirect(t, l.ShortCode, l.OriginalURL)
		}
	}

	// Kill the leader and one follower: the survivor has no quorum.
	survivor := followers[1]
	leader.kill9()
	followers[0].kill9()

	for _, l := range acknowledged {
		survivor.requireRedirect(t, l.ShortCode, l.OriginalURL)
	}
	refused := survivor.postJSON(t, "/api/v1/urls", map[string]any{"original_url": "https://example.com/cluster/no-quorum"})
	requireProblem(t, refused, http.StatusServiceUnavailable)
	if retry, err := strconv.Atoi(refused.header.Get("Retry-After")); err != nil || retry < 1 {
		t.Errorf("503 without quorum: Retry-After = %q, want a number of seconds", refused.header.Get("Retry-After"))
	}

	// The killed nodes rejoin by themselves; writes work again.
	followers[0].restartUntil(leaderKnown)
	leader.restartUntil(leaderKnown)
	var recovered link
	ok := eventually(20*time.Second, func() bool {
		r := survivor.postJSON(t, "/api/v1/urls", map[string]any{"original_url": "https://example.com/cluster/recovered"})
		if r.status != http.StatusCreated {
			return false
		}
		decodeObject(t, r, createFields, &recovered)
		return true
	})
	if !ok {
		t.Fatalf("writes on %s still fail 20 s after the killed nodes restarted", survivor.id)
	}
	acknowledged = append(acknowledged, recovered)
	for _, n := range nodes {
		for _, l := range acknowledged {
			n.requireRedirect(t, l.ShortCode, l.OriginalURL)
		}
	}
}

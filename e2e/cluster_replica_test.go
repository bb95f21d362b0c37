package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestReadReplica: three voters and a read replica (--read-replica, found
// over gossip). The replica is a non-voter; it redirects a code right after
// a voter's 201 and answers 404 right after a voter's 204; creates through
// it work; with it killed and one voter killed too, writes still work (the
// replica never counts towards the quorum: as a voter, 2 of 4 would be no
// majority); and it can be promoted to a voter.
func TestReadReplica(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	voters := startCluster(t, 3, nil)
	leader, followers := waitOneLeader(t, formationBound, voters...)
	var seeds []string
	for _, n := range voters {
		seeds = append(seeds, n.gossipAddr)
	}
	// bootstrap-expect as the voters have it: a replica is never one of them.
	replica := newNode(t, "replica1")
	replica.clusterKey = leader.clusterKey
	replica.args, replica.env = replica.commandLine(nodeOptions{ViaEnv: true, Settings: map[string]string{
		"read-replica": "true", "join": strings.Join(seeds, ","), "bootstrap-expect": "3",
	}})
	replica.launch()
	if err := replica.waitReady(leaderKnown); err != nil {
		t.Fatalf("replica: %v", err)
	}
	all := append(nodeIDs(voters...), replica.id)
	view := leader.waitServers(t, membershipWait, all...)
	for _, s := range view.Servers {
		want := "Voter"
		if s.ID == replica.id {
			want = "Nonvoter"
		}
		if s.Suffrage != want {
			t.Errorf("%s: suffrage %q, want %q", s.ID, s.Suffrage, want)
		}
	}
	if h := replica.health(t); h.Role != "follower" {
		t.Errorf("replica role %q, want follower", h.Role)
	}

	// Read-after-write on the replica, for creates through each voter and
	// through the replica itself, and for deletes through each voter.
	var stale []string
	for i := range 12 {
		creator := voters[i%3]
		if i%4 == 3 {
			creator = replica
		}
		l := creator.createURL(t, "https://example.com/replica/"+itoa(i))
		if r := replica.request(t, http.MethodHead, "/"+l.ShortCode, nil, nil); r.status != http.StatusFound {
			stale = append(stale, "HEAD /"+l.ShortCode+" on the replica right after its create through "+creator.id+": "+itoa(r.status))
		}
		for _, n := range voters {
			n.requireRedirectHead(t, l.ShortCode, l.OriginalURL)
		}
		deleter := voters[(i+1)%3]
		if r := deleter.request(t, http.MethodDelete, "/api/v1/urls/"+l.ShortCode, nil, nil); r.status != http.StatusNoContent {
			t.Fatalf("DELETE /%s through %s: want 204, got %v", l.ShortCode, deleter.id, r)
		}
		if r := replica.request(t, http.MethodHead, "/"+l.ShortCode, nil, nil); r.status != http.StatusNotFound {
			stale = append(stale, "HEAD /"+l.ShortCode+" on the replica right after its delete through "+deleter.id+": "+itoa(r.status))
		}
	}
	if len(stale) > 0 {
		t.Fatalf("%d stale reads on the replica:\n%v", len(stale), stale)
	}

	// The replica and one voter die: two voters of three are a majority.
	replica.kill9()
	followers[0].kill9()
	survivors := []*node{leader, followers[1]}
	for i, n := range survivors {
		l := n.createURL(t, "https://example.com/replica/quorum/"+itoa(i))
		for _, m := range survivors {
			m.requireRedirectHead(t, l.ShortCode, l.OriginalURL)
		}
	}
	view = leader.clusterView(t)
	voterCount := 0
	for _, s := range view.Servers {
		if s.Suffrage == "Voter" {
			voterCount++
		}
	}
	if voterCount != 3 {
		t.Errorf("/admin/cluster with the replica dead: %d voters, want 3: %+v", voterCount, view.Servers)
	}

	// Back up, the replica is promoted.
	followers[0].restartUntil(leaderKnown)
	replica.restartUntil(leaderKnown)
	if r := leader.postJSON(t, "/admin/promote", map[string]string{"id": replica.id}); r.status != http.StatusOK {
		t.Fatalf("POST /admin/promote: want 200, got %v", r)
	}
	if s, ok := leader.clusterView(t).server(replica.id); !ok || s.Suffrage != "Voter" {
		t.Fatalf("after promote: %+v, want a voter", s)
	}
	if r := leader.postJSON(t, "/admin/promote", map[string]string{"id": replica.id}); r.status != http.StatusConflict {
		t.Fatalf("POST /admin/promote of a voter: want 409, got %v", r)
	}
}

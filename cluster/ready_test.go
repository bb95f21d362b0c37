package cluster

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/cluster/membership"
)

// TestReadinessDecisions: what a node's situation makes /health and
// /health/writes say. A node that serves redirects from its own state
// takes traffic whether or not writes work; only a node that must get none
// (closing, restoring, outside the cluster, without the state, a learner
// far behind) is taken out.
func TestReadinessDecisions(t *testing.T) {
	t.Parallel()
	serving := readiness{member: true, hasState: true, leaderKnown: true}
	with := func(change func(*readiness)) readiness {
		r := serving
		change(&r)
		return r
	}
	cases := []struct {
		name               string
		r                  readiness
		notReady, noWrites string
	}{
		{"a member with the state and a leader", serving, "", ""},
		{"cut off from the majority", with(func(r *readiness) { r.leaderKnown = false }), "", NotReadyNoLeader},
		{"a voter behind the leader", with(func(r *readiness) { r.lag = 100_000 }), "", ""},
		{"a learner a little behind", with(func(r *readiness) { r.learner, r.lag = true, membership.PromoteMaxLag }), "", ""},
		{"a learner far behind", with(func(r *readiness) { r.learner, r.lag = true, membership.PromoteMaxLag+1 }), NotReadyCatchingUp, NotReadyCatchingUp},
		{"a member without the state yet", with(func(r *readiness) { r.hasState, r.leaderKnown = false, false }), NotReadyStarting, NotReadyStarting},
		{"waiting to be added", readiness{}, NotReadyNotMember, NotReadyNotMember},
		{"removed, with its old state", with(func(r *readiness) { r.member, r.removed = false, true }), NotReadyRemoved, NotReadyRemoved},
		{"awaiting its restore at start", with(func(r *readiness) { r.restoring = true }), NotReadyRestoring, NotReadyRestoring},
		{"closing", with(func(r *readiness) { r.closing = true }), NotReadyShuttingDown, NotReadyShuttingDown},
		{"closing while cut off", with(func(r *readiness) { r.closing, r.leaderKnown = true, false }), NotReadyShuttingDown, NotReadyShuttingDown},
	}
	for _, tc := range cases {
		if got := tc.r.notReady(); got != tc.notReady {
			t.Errorf("%s: /health reason %q, want %q", tc.name, got, tc.notReady)
		}
		if got := tc.r.writesUnavailable(); got != tc.noWrites {
			t.Errorf("%s: /health/writes reason %q, want %q", tc.name, got, tc.noWrites)
		}
	}
}

// TestNotReadyReasons walks real nodes through the answers: up but not yet
// added, a ready follower, a voter behind the leader, one cut off from any
// leader (serving, not writing), and closed.
func TestNotReadyReasons(t *testing.T) {
	t.Parallel()
	leader := openMember(t, "n1", true, 5*time.Second)
	waitFor(t, func() bool { return leader.NotReady() == "" && leader.WritesUnavailable() == "" })

	follower := openMember(t, "n2", false, 5*time.Second)
	if got := follower.NotReady(); got != NotReadyNotMember {
		t.Fatalf("a node waiting to be added: NotReady = %q, want %q", got, NotReadyNotMember)
	}
	if got := follower.WritesUnavailable(); got != NotReadyNotMember {
		t.Fatalf("a node waiting to be added: WritesUnavailable = %q, want %q", got, NotReadyNotMember)
	}
	if !follower.Live() {
		t.Fatal("a node waiting to be added is not live")
	}
	if err := leader.members.AddServer("n2", follower.cfg.RaftAddr, "", false, ""); err != nil {
		t.Fatalf("join: %v", err)
	}
	waitFor(t, func() bool { return follower.NotReady() == "" && follower.WritesUnavailable() == "" })
	if follower.FSM().ClusterID() != leader.FSM().ClusterID() {
		t.Fatal("ready before it has the cluster's state")
	}
	// Promoted once caught up: a voter from then on, in its own
	// configuration too (which decides whether it counts as a learner).
	waitFor(t, func() bool {
		for _, n := range []*member{leader, follower} {
			servers, err := configuration(n.raft)
			if err != nil || len(servers) != 2 || servers[1].Suffrage != raft.Voter {
				return false
			}
		}
		return true
	})

	// The leader said it applied entries this voter has not: its misses
	// ask the leader, so it still serves.
	follower.machine.noteLeaderIndex(follower.machine.appliedIndex() + 1000)
	if got := follower.NotReady(); got != "" {
		t.Fatalf("a voter behind the leader: NotReady = %q, want it serving", got)
	}

	// One of two voters left: no leader can be elected, yet the node
	// still has the state and serves redirects from it.
	leader.Close()
	waitFor(t, func() bool { return follower.WritesUnavailable() == NotReadyNoLeader })
	if got := follower.NotReady(); got != "" {
		t.Fatalf("cut off from the majority: NotReady = %q, want it serving", got)
	}

	follower.Close()
	if got := follower.NotReady(); got != NotReadyShuttingDown {
		t.Fatalf("closed: NotReady = %q, want %q", got, NotReadyShuttingDown)
	}
	if got := follower.WritesUnavailable(); got != NotReadyShuttingDown {
		t.Fatalf("closed: WritesUnavailable = %q, want %q", got, NotReadyShuttingDown)
	}
	if follower.Live() {
		t.Fatal("closed but live")
	}
}

// TestDrainHandsOffLeadership: a leader about to stop hands leadership to
// another voter while it still serves, so the cluster elects before it
// goes rather than after; a follower, or a leader alone, has nothing to
// hand over.
func TestDrainHandsOffLeadership(t *testing.T) {
	t.Parallel()
	leader, follower := openPair(t, 5*time.Second)
	waitFor(t, func() bool {
		servers, err := configuration(leader.raft)
		return err == nil && len(servers) == 2 && servers[1].Suffrage == raft.Voter
	})
	follower.Drain() // not the leader: nothing to do
	if !leader.IsLeader() {
		t.Fatal("draining a follower moved leadership")
	}
	leader.Drain()
	waitFor(t, follower.IsLeader)
	if got := leader.NotReady(); got != "" {
		t.Fatalf("a drained node still serves until it closes: NotReady = %q", got)
	}
}

// TestRemovedServerIsOutButAlive: an operator removes a running voter; it
// stops taking part (its Raft shuts down on purpose), so /health takes it
// out as not a member, while /health/live keeps it alive until it closes:
// restarting it would not bring it back.
func TestRemovedServerIsOutButAlive(t *testing.T) {
	t.Parallel()
	nodes := raisedCluster(t)
	d := openGossipMember(t, "d", t.TempDir(), nodes[0].gossip.advertised())
	waitVoter(t, nodes[0], "d")
	if err := nodes[0].members.RemoveServer("d", ""); err != nil {
		t.Fatalf("remove d: %v", err)
	}
	// d learns of it from the record, or else from a leader's notice on a
	// later membership pass (every 2 s): a few passes on a loaded machine.
	deadline := time.Now().Add(30 * time.Second)
	for !(d.Removed() && raftState(d) == raft.Shutdown) {
		if time.Now().After(deadline) {
			t.Fatal("d did not stop taking part within 30 s of its removal")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := d.NotReady(); got != NotReadyRemoved {
		t.Errorf("removed: NotReady = %q, want %q", got, NotReadyRemoved)
	}
	if !d.Live() {
		t.Error("removed but still running: not live")
	}
	d.Close()
	if d.Live() {
		t.Error("removed and closed: still live")
	}
}

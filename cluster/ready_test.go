package cluster

import (
	"testing"
	"time"
)

// TestNotReadyReasons walks one node through every readiness answer: up
// but not yet added, a ready follower, behind the leader, cut off from any
// leader, and closed.
func TestNotReadyReasons(t *testing.T) {
	t.Parallel()
	leader := openMember(t, "n1", true, 5*time.Second)
	waitFor(t, func() bool { return leader.NotReady() == "" })

	follower := openMember(t, "n2", false, 5*time.Second)
	if got := follower.NotReady(); got != NotReadyNotMember {
		t.Fatalf("a node waiting to be added: NotReady = %q, want %q", got, NotReadyNotMember)
	}
	if !follower.Live() {
		t.Fatal("a node waiting to be added is not live")
	}
	if err := leader.AddServer("n2", follower.cfg.RaftAddr, "", false, ""); err != nil {
		t.Fatalf("join: %v", err)
	}
	waitFor(t, func() bool { return follower.NotReady() == "" })
	if follower.FSM().ClusterID() != leader.FSM().ClusterID() {
		t.Fatal("ready before it has the cluster's state")
	}

	// The leader said it applied entries this node has not.
	follower.machine.noteLeaderIndex(follower.machine.appliedIndex() + 1000)
	if got := follower.NotReady(); got != NotReadyCatchingUp {
		t.Fatalf("behind the leader: NotReady = %q, want %q", got, NotReadyCatchingUp)
	}

	// One of two voters left: no leader can be elected.
	leader.Close()
	waitFor(t, func() bool { return follower.NotReady() == NotReadyNoLeader })

	follower.Close()
	if got := follower.NotReady(); got != NotReadyShuttingDown {
		t.Fatalf("closed: NotReady = %q, want %q", got, NotReadyShuttingDown)
	}
	if follower.Live() {
		t.Fatal("closed but live")
	}
}

package cluster

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// suffrageOf returns id's suffrage in n's configuration.
func suffrageOf(t *testing.T, n *Node, id string) (raft.ServerSuffrage, bool) {
	t.Helper()
	servers, err := configuration(n.raft)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if s.ID == raft.ServerID(id) {
			return s.Suffrage, true
		}
	}
	return 0, false
}

// openReplica opens a read replica "r1", not yet a member of leader's
// cluster, closed when the test ends.
func openReplica(t *testing.T, leader *member) *Node {
	t.Helper()
	replica, err := Open(Config{
		ID:         "r1",
		DataDir:    t.TempDir(),
		RaftAddr:   freeAddr(t),
		Key:        testKey(t),
		Logger:     leader.log,
		Membership: MembershipConfig{ReadReplica: true},
		Raft:       RaftConfig{LogLevel: "off"},
		Writes:     WriteConfig{Timeout: 5 * time.Second, ClickFlushInterval: time.Hour},
	}, fsm.New())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { replica.Close() })
	return replica
}

// TestReadReplicaJoinsAsNonvoter: a replica alone never bootstraps; an
// operator adds it as a non-voter, it serves the cluster's links, a delete
// is gone from it once acknowledged, and it can be promoted once.
func TestReadReplicaJoinsAsNonvoter(t *testing.T) {
	t.Parallel()
	leader := openMember(t, "n1", true, 5*time.Second)
	waitFor(t, func() bool { return leader.NotReady() == "" })

	replica := openReplica(t, leader)
	if got := replica.NotReady(); got != NotReadyNotMember || replica.raft.LastIndex() != 0 {
		t.Fatalf("a replica without peers bootstrapped: NotReady %q, last index %d", got, replica.raft.LastIndex())
	}

	if err := leader.members.AddServer("r1", replica.cfg.RaftAddr, "", true, ""); err != nil {
		t.Fatalf("join as non-voter: %v", err)
	}
	if s, _ := suffrageOf(t, leader.Node, "r1"); s != raft.Nonvoter {
		t.Fatalf("r1 joined as %v, want Nonvoter", s)
	}
	if err := leader.members.AddServer("r1", replica.cfg.RaftAddr, "", true, ""); err != nil {
		t.Fatalf("the same join again: %v, want a no-op", err)
	}
	if err := leader.members.AddServer("r1", replica.cfg.RaftAddr, "", false, ""); !errors.Is(err, ErrServerConflict) {
		t.Fatalf("joining a non-voter as a voter: %v, want ErrServerConflict", err)
	}
	waitFor(t, func() bool { return replica.NotReady() == "" })
	if leader.members.OtherVoters() != 0 {
		t.Fatal("a non-voter counts as a voter")
	}
	if err := leader.members.TransferLeadership(); !errors.Is(err, ErrNoTransferTarget) {
		t.Fatalf("leadership transfer with only a replica besides the leader: %v, want ErrNoTransferTarget", err)
	}

	res, err := leader.Create(context.Background(), fsm.CreateRequest{URL: "https://example.com/r", Workspace: "default", CodeLength: 7})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	code := res.Link.Code
	waitFor(t, func() bool { _, ok := replica.FSM().Get(code); return ok })
	if _, err := leader.Propose(context.Background(), fsm.DeleteCommand{Code: code, Now: time.Now().UnixMilli()}, ProposeOptions{Visible: true}); err != nil {
		t.Fatal(err)
	}
	if _, ok := replica.FSM().Get(code); ok {
		t.Fatalf("the replica still has %s after its delete returned", code)
	}

	if err := leader.members.Promote("nobody", ""); !errors.Is(err, ErrUnknownServer) {
		t.Fatalf("promote an unknown id: %v, want ErrUnknownServer", err)
	}
	if err := leader.members.Promote("n1", ""); !errors.Is(err, ErrAlreadyVoter) {
		t.Fatalf("promote a voter: %v, want ErrAlreadyVoter", err)
	}
	if err := leader.members.Promote("r1", ""); err != nil {
		t.Fatalf("promote: %v", err)
	}
	if s, _ := suffrageOf(t, leader.Node, "r1"); s != raft.Voter {
		t.Fatalf("r1 promoted to %v, want Voter", s)
	}
	if err := leader.members.AddServer("r1", replica.cfg.RaftAddr, "", true, ""); !errors.Is(err, ErrServerConflict) {
		t.Fatalf("joining a voter as a non-voter: %v, want ErrServerConflict", err)
	}
}

// TestBootstrapExpectCountsOnlyVoters: two servers expecting two bootstrap
// while a replica is among the members they meet (counted, the three of
// them would never bootstrap), and the leader adds the replica as a
// non-voter.
func TestBootstrapExpectCountsOnlyVoters(t *testing.T) {
	t.Parallel()
	gossipAddr := func() string { return net.JoinHostPort("127.0.0.1", sharedGossipPort(t, "127.0.0.1")) }
	seed := gossipAddr()
	expect2 := func(c *Config) { c.Discovery.BootstrapExpect = 2 }
	nodes := []*Node{
		openGossipNode(t, "r", gossipAddr(), func(c *Config) {
			expect2(c)
			c.Membership.ReadReplica = true
			c.Discovery.Seeds = []string{seed}
		}),
		openGossipNode(t, "a", seed, expect2),
		openGossipNode(t, "b", gossipAddr(), func(c *Config) { expect2(c); c.Discovery.Seeds = []string{seed} }),
	}
	var leader *Node
	waitWithin(t, 30*time.Second, func() bool {
		for _, n := range nodes {
			if n.IsLeader() {
				leader = n
				return true
			}
		}
		return false
	})
	if leader.cfg.ID == "r" {
		t.Fatal("the replica leads")
	}
	waitWithin(t, 30*time.Second, func() bool {
		s, ok := suffrageOf(t, leader, "r")
		return ok && s == raft.Nonvoter
	})
	for _, id := range []string{"a", "b"} {
		if s, ok := suffrageOf(t, leader, id); !ok || s != raft.Voter {
			t.Fatalf("%s: suffrage %v (present %v), want Voter", id, s, ok)
		}
	}
}

// TestPromotionDoesNotUndoARemoval: a promotion and a removal of the same
// non-voter, asked at once (the leader's promotion duty and an operator's
// leave), end with the server out of the configuration whichever comes
// first: a promotion decided on the configuration before the removal
// would add the removed server back, as a voter. A removed server stays
// removed, so each try joins it anew on an empty data dir.
func TestPromotionDoesNotUndoARemoval(t *testing.T) {
	t.Parallel()
	leader := openMember(t, "n1", true, 5*time.Second)
	waitFor(t, func() bool { return leader.NotReady() == "" })
	for try := range 20 {
		replica := openReplica(t, leader)
		if err := leader.members.AddServer("r1", replica.cfg.RaftAddr, "", true, ""); err != nil {
			t.Fatalf("try %d: join: %v", try, err)
		}
		promoted := make(chan error, 1)
		go func() { promoted <- leader.members.Promote("r1", "") }()
		if err := leader.members.RemoveServer("r1", ""); err != nil && !errors.Is(err, ErrUnknownServer) {
			t.Fatalf("try %d: remove: %v", try, err)
		}
		if err := <-promoted; err != nil && !errors.Is(err, ErrUnknownServer) {
			t.Fatalf("try %d: promote: %v", try, err)
		}
		if s, ok := suffrageOf(t, leader.Node, "r1"); ok {
			t.Fatalf("try %d: the removed server is in the configuration again, as %v", try, s)
		}
	}
}

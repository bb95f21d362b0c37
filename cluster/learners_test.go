package cluster

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/cluster/membership"
	"github.com/linkraft/linkraft/fsm"
)

// holdApplies lets n apply its first batch of entries and holds every
// later batch (and restore) until release: a server that is installing a
// large state, deterministically. A node that closes held is let go once
// its cluster port no longer answers (Raft's shutdown waits for its
// applies), so it is never seen caught up.
func holdApplies(t *testing.T, n *Node) (release func()) {
	t.Helper()
	gate := make(chan struct{})
	var first atomic.Bool
	hold := func() {
		if first.CompareAndSwap(false, true) {
			return
		}
		select {
		case <-gate:
		case <-n.service.served:
		}
	}
	n.machine.hold.Store(&hold)
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release) // runs before the node's Close, registered earlier
	return release
}

// growLog appends entries to the leader's log, concurrently (Raft commits
// them in groups), so that a server holding back its applies trails the
// leader by more than membership.PromoteMaxLag whatever its first batch held.
func growLog(t *testing.T, leader *Node, entries int) {
	t.Helper()
	const workers = 32
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < entries; i += workers {
				if _, _, err := leader.apply(fsm.ServerCommand{ID: "filler", HTTPAddr: strconv.Itoa(i)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("grow the log: %v", err)
	}
}

// createLink creates one link through n.
func createLink(t *testing.T, n *Node, url string) string {
	t.Helper()
	res, err := n.Create(context.Background(), fsm.CreateRequest{URL: url, Workspace: "default", CodeLength: 7})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", url, err)
	}
	return res.Link.Code
}

// statusOf returns id's entry in n's Status.
func statusOf(t *testing.T, n *Node, id string) Server {
	t.Helper()
	st, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Servers {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("%s is not in %s's status", id, n.cfg.ID)
	return Server{}
}

func waitVoter(t *testing.T, leader *Node, id string) {
	t.Helper()
	waitWithin(t, 30*time.Second, func() bool {
		s, ok := suffrageOf(t, leader, id)
		return ok && s == raft.Voter
	})
}

// TestJoinAnswersAtOnceAsALearner: a server joined to vote is added as a
// non-voter and the join answers while it has applied none of the state
// (its applies are held); it is not promoted while it trails, a second
// join changes nothing, and once it catches up the leader makes it a voter
// that holds every link.
func TestJoinAnswersAtOnceAsALearner(t *testing.T) {
	t.Parallel()
	leader := openMember(t, "n1", true, 5*time.Second)
	waitFor(t, leader.leadership.ready)
	growLog(t, leader.Node, 2*membership.PromoteMaxLag+2*256)
	code := createLink(t, leader.Node, "https://example.com/learner")

	learner := openMember(t, "n2", false, 5*time.Second)
	release := holdApplies(t, learner.Node)
	if err := leader.members.AddServer("n2", learner.cfg.RaftAddr, "", false, ""); err != nil {
		t.Fatalf("join: %v", err)
	}
	if _, ok := learner.FSM().Get(code); ok {
		t.Fatal("the join answered only once the new server held the state")
	}
	if s, _ := suffrageOf(t, leader.Node, "n2"); s != raft.Nonvoter {
		t.Fatalf("n2 joined as %v, want a non-voter until it catches up", s)
	}
	if s := statusOf(t, leader.Node, "n2"); !s.CatchingUp || s.Suffrage != raft.Nonvoter.String() {
		t.Fatalf("status of the learner: %+v, want a non-voter catching up", s)
	}
	if got := leader.members.Promoter().Once(); got != "" {
		t.Fatalf("promoted %q while it trails the leader", got)
	}
	if err := leader.members.AddServer("n2", learner.cfg.RaftAddr, "", false, ""); err != nil {
		t.Fatalf("the same join again while it catches up: %v, want a no-op", err)
	}

	release()
	waitVoter(t, leader.Node, "n2")
	if _, ok := learner.FSM().Get(code); !ok {
		t.Fatal("promoted before it held the state")
	}
	if s := statusOf(t, leader.Node, "n2"); s.CatchingUp {
		t.Fatalf("a voter still catching up: %+v", s)
	}
}

// TestLearnerPromotedByTheNextLeader: three voters and a learner. While it
// catches up, the quorum is the voters': the leader stops, the other two
// elect one and take writes, and a second learner that dies before its
// promotion blocks nothing. The new leader promotes the first learner once
// it has caught up.
func TestLearnerPromotedByTheNextLeader(t *testing.T) {
	t.Parallel()
	n1 := openMember(t, "n1", true, 5*time.Second)
	waitFor(t, n1.leadership.ready)
	voters := []*member{n1, openMember(t, "n2", false, 5*time.Second), openMember(t, "n3", false, 5*time.Second)}
	for _, v := range voters[1:] {
		if err := n1.members.AddServer(v.cfg.ID, v.cfg.RaftAddr, "", false, ""); err != nil {
			t.Fatalf("join %s: %v", v.cfg.ID, err)
		}
		waitVoter(t, n1.Node, v.cfg.ID)
	}
	growLog(t, n1.Node, 2*membership.PromoteMaxLag+2*256)

	learner := openMember(t, "n4", false, 5*time.Second)
	release := holdApplies(t, learner.Node)
	doomed := openMember(t, "n5", false, 5*time.Second)
	holdApplies(t, doomed.Node)
	for _, m := range []*member{learner, doomed} {
		if err := n1.members.AddServer(m.cfg.ID, m.cfg.RaftAddr, "", false, ""); err != nil {
			t.Fatalf("join %s: %v", m.cfg.ID, err)
		}
	}
	doomed.Close()
	n1.Close()

	var leader *Node
	waitWithin(t, 30*time.Second, func() bool {
		for _, v := range voters[1:] {
			if v.IsLeader() && v.leadership.ready() {
				leader = v.Node
				return true
			}
		}
		return false
	})
	code := createLink(t, leader, "https://example.com/after-the-leader")
	for _, id := range []string{"n4", "n5"} {
		if s, _ := suffrageOf(t, leader, id); s != raft.Nonvoter {
			t.Fatalf("%s is %v under the new leader, want a non-voter", id, s)
		}
	}

	release()
	waitVoter(t, leader, "n4")
	waitFor(t, func() bool { _, ok := learner.FSM().Get(code); return ok })
	if s, _ := suffrageOf(t, leader, "n5"); s != raft.Nonvoter {
		t.Fatalf("the learner that died is %v, want a non-voter", s)
	}
	createLink(t, leader, "https://example.com/with-four-voters")
}

// TestReplicasAreNeverPromoted: a --read-replica server and a server an
// operator joined as a non-voter (started to vote) stay non-voters once
// caught up, through promotion rounds that promote a learner beside them;
// the second keeps asking to remain one, and neither is shown catching up.
func TestReplicasAreNeverPromoted(t *testing.T) {
	t.Parallel()
	leader := openMember(t, "n1", true, 5*time.Second)
	waitFor(t, leader.leadership.ready)
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
	added := openMember(t, "p1", false, 5*time.Second)
	if err := leader.members.AddServer("r1", replica.cfg.RaftAddr, "", true, ""); err != nil {
		t.Fatalf("join the replica: %v", err)
	}
	if err := leader.members.AddServer("p1", added.cfg.RaftAddr, "", true, ""); err != nil {
		t.Fatalf("join p1 as a non-voter: %v", err)
	}
	learner := openMember(t, "l1", false, 5*time.Second)
	if err := leader.members.AddServer("l1", learner.cfg.RaftAddr, "", false, ""); err != nil {
		t.Fatalf("join the learner: %v", err)
	}
	waitVoter(t, leader.Node, "l1")

	code := createLink(t, leader.Node, "https://example.com/replicas")
	for _, n := range []*Node{replica, added.Node} {
		waitFor(t, func() bool { _, ok := n.FSM().Get(code); return ok })
	}
	if got := leader.members.Promoter().Once(); got != "" {
		t.Fatalf("promoted %q, a non-voter by request", got)
	}
	for _, id := range []string{"r1", "p1"} {
		if s, _ := suffrageOf(t, leader.Node, id); s != raft.Nonvoter {
			t.Fatalf("%s is %v, want a non-voter", id, s)
		}
		if s := statusOf(t, leader.Node, id); s.CatchingUp {
			t.Fatalf("%s shown catching up: %+v", id, s)
		}
	}
	if err := leader.members.AddServer("p1", added.cfg.RaftAddr, "", false, ""); !errors.Is(err, ErrServerConflict) {
		t.Fatalf("joining the non-voter p1 as a voter: %v, want ErrServerConflict", err)
	}
	// What p1 was told outlives a restart.
	if remains, err := loadNonvoter(added.cfg); err != nil || !remains {
		t.Fatalf("p1 after a restart would ask to remain a non-voter: %v (%v), want true", remains, err)
	}
}

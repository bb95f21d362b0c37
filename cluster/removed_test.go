package cluster

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// openGossipMember opens server id on data dir dir, with gossip on a
// loopback port of its own, joining seeds; without seeds it bootstraps a
// cluster of one.
func openGossipMember(t *testing.T, id, dir string, seeds ...string) *Node {
	t.Helper()
	at := net.JoinHostPort("127.0.0.1", sharedGossipPort(t, "127.0.0.1"))
	return openGossipNode(t, id, at, func(c *Config) {
		c.DataDir, c.Discovery.Seeds = dir, seeds
	})
}

// reopen starts the closed server n again, as a restarted process: the same
// configuration, data dir and addresses.
func reopen(t *testing.T, n *Node) *Node {
	t.Helper()
	cfg := n.cfg
	back, err := Open(cfg, fsm.New())
	if err != nil {
		t.Fatalf("reopen %s: %v", cfg.ID, err)
	}
	t.Cleanup(func() { back.Close() })
	return back
}

// inConfiguration reports whether n's configuration lists id.
func inConfiguration(t *testing.T, n *Node, id string) bool {
	t.Helper()
	_, ok := suffrageOf(t, n, id)
	return ok
}

// seesMember waits until n's gossip shows member's process live.
func seesMember(t *testing.T, n *Node, member *Node) {
	t.Helper()
	member.gossip.mu.Lock()
	boot := member.gossip.meta.Boot
	member.gossip.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for !slices.ContainsFunc(n.gossip.members(), func(m memberMeta) bool { return m.ID == member.cfg.ID && m.Boot == boot }) {
		if time.Now().After(deadline) {
			t.Fatalf("%s's gossip does not show %s (boot %s) within 30 s: %+v", n.cfg.ID, member.cfg.ID, boot, n.gossip.members())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// raisedCluster starts three voters that find each other over gossip,
// raised to this build's level, and returns them, the first leading.
func raisedCluster(t *testing.T) []*Node {
	t.Helper()
	a := openGossipMember(t, "a", t.TempDir())
	waitFor(t, func() bool { return a.NotReady() == "" && a.FSM().Raised() == fsm.EntryLevel })
	nodes := []*Node{a}
	for _, id := range []string{"b", "c"} {
		nodes = append(nodes, openGossipMember(t, id, t.TempDir(), a.gossip.advertised()))
		waitVoter(t, a, id)
	}
	return nodes
}

// joinsOf counts the joins of server id in n's security audit, where an
// operator sees every change of the configuration.
func joinsOf(n *Node, id string) int {
	joins := 0
	for _, e := range n.FSM().Audit(fsm.AuditQuery{Kind: fsm.AuditSecurity, Limit: 1000}) {
		if e.Action == fsm.AuditMemberJoin && e.Subject == id {
			joins++
		}
	}
	return joins
}

// TestRemovedServerStaysOutUnderEveryLeader: an operator removes a running
// voter. It learns of its removal from the record in its own state and
// stops taking part; every server holds the record. A server of the same
// id on a new data dir, which gossip shows to every leader in turn, is
// never added back by reconciliation; an operator's join of it is, and
// forgets the record.
func TestRemovedServerStaysOutUnderEveryLeader(t *testing.T) {
	t.Parallel()
	nodes := raisedCluster(t)
	leader := nodes[0]
	d := openGossipMember(t, "d", t.TempDir(), leader.gossip.advertised())
	waitVoter(t, leader, "d")

	if err := leader.members.RemoveServer("d", "opskey000001"); err != nil {
		t.Fatalf("remove d: %v", err)
	}
	waitFor(t, d.Removed)
	// Raft shut down (no elections from it) closed its cluster port.
	waitFor(t, func() bool { return reachableAt(leader, d.cfg.RaftAddr) != nil })
	if _, err := os.Stat(filepath.Join(d.cfg.DataDir, removedFile)); err != nil {
		t.Errorf("d's data dir is not marked removed: %v", err)
	}
	for _, n := range nodes {
		waitFor(t, func() bool { inc, ok := n.FSM().Removed("d"); return ok && inc == d.incarnation })
		// It left gossip: a server started under its id is not taken for it.
		waitFor(t, func() bool {
			return !slices.ContainsFunc(n.gossip.members(), func(m memberMeta) bool { return m.ID == "d" })
		})
	}

	fresh := openGossipMember(t, "d", t.TempDir(), leader.gossip.advertised())
	if fresh.incarnation == d.incarnation {
		t.Fatal("a new data dir has the old one's incarnation")
	}
	joins := joinsOf(leader, "d")
	for _, next := range nodes {
		if !next.IsLeader() {
			if err := leader.raft.LeadershipTransferToServer(raft.ServerID(next.cfg.ID), raft.ServerAddress(next.cfg.RaftAddr)).Error(); err != nil {
				t.Fatalf("transfer leadership to %s: %v", next.cfg.ID, err)
			}
		}
		waitWithin(t, 30*time.Second, next.leadership.ready)
		leader = next
		seesMember(t, leader, fresh)
		leader.members.Reconcile()
		if inConfiguration(t, leader, "d") || joinsOf(leader, "d") != joins {
			t.Fatalf("leader %s added the removed d back (the security audit shows %d joins of d, %d before)", leader.cfg.ID, joinsOf(leader, "d"), joins)
		}
	}

	if err := leader.members.AddServer("d", fresh.cfg.RaftAddr, "", false, "opskey000001"); err != nil {
		t.Fatalf("join d on a new data dir: %v", err)
	}
	if _, ok := leader.FSM().Removed("d"); ok {
		t.Error("the join left the removal record")
	}
	waitVoter(t, leader, "d")
	if fresh.Removed() {
		t.Error("the server joined on a new data dir thinks it was removed")
	}
}

// TestRemovedServerIsToldWhenItComesBack: a server removed while it was
// down, by a leader that could not learn its data dir, comes back on that
// data dir: the leader completes the record with its incarnation, tells it,
// and it stops taking part. Restarted again, it knows at once; an
// operator's join of it is refused.
func TestRemovedServerIsToldWhenItComesBack(t *testing.T) {
	t.Parallel()
	leader := openGossipMember(t, "a", t.TempDir())
	waitFor(t, func() bool { return leader.NotReady() == "" && leader.FSM().Raised() == fsm.EntryLevel })
	dir := t.TempDir()
	d := openGossipMember(t, "d", dir, leader.gossip.advertised())
	waitVoter(t, leader, "d")
	inc := d.incarnation
	d.Close()
	// As RemoveServer does for a server that does not answer, when neither
	// gossip nor the server can say which data dir it ran on.
	if err := leader.members.Leave("d"); err != nil {
		t.Fatalf("remove d: %v", err)
	}
	if err := leader.applyOwn(fsm.ServerRemovalCommand{ID: "d"}, "removal record"); err != nil {
		t.Fatal(err)
	}

	back := reopen(t, d)
	if back.incarnation != inc || back.Removed() {
		t.Fatalf("d back on its data dir: incarnation %q (was %q), removed %v", back.incarnation, inc, back.Removed())
	}
	seesMember(t, leader, back)
	leader.members.Reconcile()
	if got, _ := leader.FSM().Removed("d"); got != inc {
		t.Fatalf("the record names incarnation %q, want d's %q", got, inc)
	}
	leader.members.Reconcile()
	waitFor(t, back.Removed)
	if inConfiguration(t, leader, "d") {
		t.Fatal("the removed d is in the configuration")
	}
	back.Close()

	again := reopen(t, back)
	if !again.Removed() || again.gossip != nil {
		t.Fatalf("d restarted on its removed data dir: removed %v, gossip started %v", again.Removed(), again.gossip != nil)
	}
	err := leader.members.AddServer("d", again.cfg.RaftAddr, "", false, "")
	if err == nil || inConfiguration(t, leader, "d") {
		t.Fatalf("join of d on the data dir it was removed with: %v, want refused", err)
	}
}

// TestLeaderFinishesARecordedRemoval: a leader that recorded a removal
// and lost leadership before it changed the configuration leaves a record
// and the server in the configuration: promotion does not make it a voter,
// and the next reconciliation removes it.
func TestLeaderFinishesARecordedRemoval(t *testing.T) {
	t.Parallel()
	leader := openGossipMember(t, "a", t.TempDir())
	waitFor(t, func() bool { return leader.NotReady() == "" && leader.FSM().Raised() == fsm.EntryLevel })
	d := openMember(t, "d", false, 5*time.Second)
	if err := leader.members.AddServer("d", d.cfg.RaftAddr, "", true, ""); err != nil {
		t.Fatalf("join d: %v", err)
	}
	if err := leader.applyOwn(fsm.ServerRemovalCommand{ID: "d", Incarnation: d.incarnation}, "removal record"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, d.Removed)
	if err := leader.members.Promote("d", ""); !errors.Is(err, ErrRemovedServer) {
		t.Fatalf("promote a server whose removal is recorded: %v, want ErrRemovedServer", err)
	}
	leader.members.Reconcile()
	if inConfiguration(t, leader, "d") {
		t.Fatal("reconciliation left a server whose removal is recorded in the configuration")
	}
}

// TestServerThatLeftAsItStoppedRejoins: a server's own leave as it stops
// is not recorded: started again on its data dir, the leader adds it back.
// Its leave waits for the removal on Raft's events, and returns once the
// leader confirmed it.
func TestServerThatLeftAsItStoppedRejoins(t *testing.T) {
	t.Parallel()
	leader := openGossipMember(t, "a", t.TempDir())
	waitFor(t, func() bool { return leader.NotReady() == "" && leader.FSM().Raised() == fsm.EntryLevel })
	dir := t.TempDir()
	d := openGossipNode(t, "d", net.JoinHostPort("127.0.0.1", sharedGossipPort(t, "127.0.0.1")), func(c *Config) {
		c.DataDir, c.Discovery.Seeds, c.Membership.LeaveOnTerminate = dir, []string{leader.gossip.advertised()}, true
	})
	waitVoter(t, leader, "d")
	if err := d.Close(); err != nil {
		t.Fatalf("close d: %v", err)
	}
	if inConfiguration(t, leader, "d") {
		t.Fatal("d left as it stopped, and is still in the configuration")
	}
	if _, ok := leader.FSM().Removed("d"); ok || d.Removed() {
		t.Fatalf("a server's own leave was recorded as a removal (removed %v)", d.Removed())
	}
	back := openGossipMember(t, "d", dir, leader.gossip.advertised())
	waitVoter(t, leader, "d")
	if back.Removed() {
		t.Error("d, back after its own leave, thinks it was removed")
	}
}

// TestAwaitLeftWakesOnRaftEvents: a follower's wait for its removal ends
// when the leader removes it (no record: it does not stop taking part),
// and times out while it is still a member.
func TestAwaitLeftWakesOnRaftEvents(t *testing.T) {
	t.Parallel()
	leader, follower := openPair(t, 5*time.Second)
	// Knowing the leader comes with its first heartbeat, which may come
	// before the entry that adds the follower.
	waitFor(t, func() bool { return inConfiguration(t, follower.Node, "n2") })
	if follower.standing.awaitLeft(100 * time.Millisecond) {
		t.Fatal("awaitLeft reported a member as gone")
	}
	removed := make(chan error, 1)
	go func() { removed <- leader.members.Leave("n2") }()
	if !follower.standing.awaitLeft(30 * time.Second) {
		t.Fatal("the follower never saw its removal")
	}
	if err := <-removed; err != nil {
		t.Fatalf("remove n2: %v", err)
	}
	if follower.Removed() {
		t.Error("a removal that was not recorded made the follower stop taking part")
	}
}

// TestRemovedServerRejoinsOnANewDataDirAtOnce: an operator removes a
// running server, stops it, empties its data dir and starts it again at
// the same address, waiting to be added by hand (no seeds). The join pasted
// right after the start is let in at once, although the leader last talked
// to that address when the removed process answered there.
func TestRemovedServerRejoinsOnANewDataDirAtOnce(t *testing.T) {
	t.Parallel()
	leader := openGossipMember(t, "a", t.TempDir())
	waitFor(t, func() bool { return leader.NotReady() == "" && leader.FSM().Raised() == fsm.EntryLevel })
	d := openGossipMember(t, "d", t.TempDir(), leader.gossip.advertised())
	waitVoter(t, leader, "d")
	// The leader asks its servers who they are all along (their entry
	// levels, promotion): it keeps a connection to d's address.
	if _, err := leader.peers.nodeInfo(d.cfg.RaftAddr, 5*time.Second); err != nil {
		t.Fatalf("ask d who it is: %v", err)
	}
	if err := leader.members.RemoveServer("d", "opskey000001"); err != nil {
		t.Fatalf("remove d: %v", err)
	}
	waitFor(t, d.Removed)
	if err := d.Close(); err != nil {
		t.Fatalf("stop the removed d: %v", err)
	}
	waitFor(t, func() bool {
		return !slices.ContainsFunc(leader.gossip.members(), func(m memberMeta) bool { return m.ID == "d" })
	})

	cfg := d.cfg
	cfg.DataDir, cfg.Discovery.Seeds, cfg.Discovery.BootstrapExpect = t.TempDir(), nil, 3
	fresh, err := Open(cfg, fsm.New())
	if err != nil {
		t.Fatalf("start d again on an empty data dir: %v", err)
	}
	t.Cleanup(func() { fresh.Close() })
	if err := leader.members.AddServer("d", cfg.RaftAddr, "", false, "opskey000001"); err != nil {
		t.Fatalf("join d, started on an empty data dir: %v", err)
	}
	waitVoter(t, leader, "d")
	if _, ok := leader.FSM().Removed("d"); ok || fresh.Removed() {
		t.Errorf("d joined on a new data dir: the record kept %v, d thinks it was removed %v", ok, fresh.Removed())
	}
}

// TestClicksOfARemovedServerAreCountedOnce: the redirects a server served
// just before an operator removed it reach the cluster's state as it
// stops taking part, and those it serves afterwards (to a client that
// still reaches it until it is stopped) once it is stopped: each counted
// once, none left behind in the data dir the operator empties to bring it
// back.
func TestClicksOfARemovedServerAreCountedOnce(t *testing.T) {
	t.Parallel()
	leader := openGossipMember(t, "a", t.TempDir())
	waitFor(t, func() bool { return leader.NotReady() == "" && leader.FSM().Raised() == fsm.EntryLevel })
	d := openGossipMember(t, "d", t.TempDir(), leader.gossip.advertised())
	waitVoter(t, leader, "d")
	code := createLink(t, leader, "https://example.com/clicked-on-a-removed-server")
	waitFor(t, func() bool { _, ok := d.FSM().Get(code); return ok })
	clicks := func() uint64 { l, _ := leader.FSM().Get(code); return l.Clicks }

	for range 5 {
		d.Clicks().Record(code, fsm.Visitor{})
	}
	if err := leader.members.RemoveServer("d", "opskey000001"); err != nil {
		t.Fatalf("remove d: %v", err)
	}
	waitFor(t, d.Removed)
	waitFor(t, func() bool { return clicks() >= 5 })

	for range 3 {
		d.Clicks().Record(code, fsm.Visitor{})
	}
	if err := d.Close(); err != nil {
		t.Fatalf("stop the removed d: %v", err)
	}
	if got := clicks(); got != 8 {
		t.Errorf("d served 8 redirects, 5 before its removal and 3 after: the cluster counts %d", got)
	}
	if _, err := os.Stat(filepath.Join(d.cfg.DataDir, "clicks-pending")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("d left clicks in the data dir the operator empties to bring it back (%v)", err)
	}
}

// TestRemovalNoticeIsCheckedWhereBelieved: a removal notice is believed
// only when it names this server and the data dir it runs on; one for
// another id, another data dir, or none is refused (409) and changes
// nothing: the server keeps its Raft and stays in.
func TestRemovalNoticeIsCheckedWhereBelieved(t *testing.T) {
	t.Parallel()
	asker := openNode(t, t.TempDir())
	n := openNode(t, t.TempDir(), func(c *Config) { c.ID = "target" })
	waitFor(t, n.leadership.ready)
	for _, tc := range []struct{ name, id, incarnation string }{
		{"another server", "someone-else", n.incarnation},
		{"another data dir", "target", "0123456789abcdef"},
		{"no data dir named", "target", ""},
	} {
		err := asker.peers.tellRemoved(tc.id, tc.incarnation, n.cfg.RaftAddr)
		if err == nil || !strings.Contains(err.Error(), "409") {
			t.Errorf("%s: %v, want a 409 refusal", tc.name, err)
		}
	}
	if n.Removed() || !n.Live() || n.NotReady() != "" {
		t.Fatalf("refused notices changed the server: removed %v, live %v, not ready %q", n.Removed(), n.Live(), n.NotReady())
	}
	if _, err := os.Stat(filepath.Join(n.cfg.DataDir, removedFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused notices marked the data dir: %v", err)
	}
}

// reachableAt dials raftAddr through n's stream layer, as a join's
// reachability check does.
func reachableAt(n *Node, raftAddr string) error {
	conn, err := n.layer.Dial(raft.ServerAddress(raftAddr), time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}

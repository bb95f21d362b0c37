package membership

import (
	"errors"
	"slices"
	"testing"

	"github.com/linkraft/linkraft/cluster/wire"
)

const (
	n1 = "10.0.0.1:7000"
	n2 = "10.0.0.2:7000"
	n3 = "10.0.0.3:7000"
)

// TestAddServerRefusals: which joins an operator's AddServer refuses, and
// what the others change. A refused join changes nothing.
func TestAddServerRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		setup    func(f *fixture)
		id, addr string
		nonVoter bool
		want     error    // nil: accepted
		changes  []string // the configuration changes made
	}{
		{name: "no id", id: "", addr: n3, want: ErrInvalidServer},
		{name: "no port", id: "n3", addr: "10.0.0.3", want: ErrInvalidServer},
		{name: "not the leader", setup: func(f *fixture) { f.raft.follower = true }, id: "n3", addr: n3, want: ErrNoLeader},
		{name: "a voter again", id: "n2", addr: n2},
		{name: "a voter as a non-voter", id: "n2", addr: n2, nonVoter: true, want: ErrServerConflict},
		{name: "a learner again as a voter", setup: func(f *fixture) { f.raft.servers[1] = nonvoter("n2", n2) }, id: "n2", addr: n2},
		{name: "a replica as a voter", setup: func(f *fixture) {
			f.raft.servers[1] = nonvoter("n2", n2)
			f.peers.run("n2", n2, wire.WantsNonvoter, "inc-n2")
		}, id: "n2", addr: n2, want: ErrServerConflict},
		{name: "a known id at another address", id: "n2", addr: n3, want: ErrServerConflict},
		{name: "another id at a known address", id: "n3", addr: n2, want: ErrServerConflict},
		{name: "a server that says it is another", setup: func(f *fixture) { f.peers.run("n4", n3, wire.WantsVoter, "") },
			id: "n3", addr: n3, want: ErrInvalidServer},
		{name: "a server of another cluster", setup: func(f *fixture) {
			f.peers.run("n3", n3, wire.WantsVoter, "")
			f.peers.running[n3] = wire.NodeInfo{ID: "n3", Cluster: "c2", Wants: wire.WantsVoter}
		}, id: "n3", addr: n3, want: ErrOtherCluster},
		{name: "a server that does not answer", id: "n3", addr: n3, want: ErrUnreachable},
		{name: "a build older than the state", setup: func(f *fixture) {
			f.peers.run("n3", n3, wire.WantsVoter, "")
			f.peers.running[n3] = wire.NodeInfo{ID: "n3", EntryLevel: 1, Wants: wire.WantsVoter}
			f.state.level = 5
		}, id: "n3", addr: n3, want: ErrInvalidServer},
		{name: "a removed server on its data dir", setup: func(f *fixture) {
			f.peers.run("n3", n3, wire.WantsVoter, "old")
			f.state.removed["n3"] = "old"
		}, id: "n3", addr: n3, want: ErrRemovedServer},
		{name: "a removed server that says no data dir", setup: func(f *fixture) {
			f.peers.run("n3", n3, wire.WantsVoter, "")
			f.state.removed["n3"] = "old"
		}, id: "n3", addr: n3, want: ErrRemovedServer},
		{name: "a removed server on a new data dir", setup: func(f *fixture) {
			f.peers.run("n3", n3, wire.WantsVoter, "new")
			f.state.removed["n3"] = "old"
		}, id: "n3", addr: n3, changes: []string{"non-voter n3 " + n3}},
		{name: "a new voter joins as a learner", setup: func(f *fixture) { f.peers.run("n3", n3, wire.WantsVoter, "") },
			id: "n3", addr: n3, changes: []string{"non-voter n3 " + n3}},
		{name: "a build before learners joins as a voter", setup: func(f *fixture) { f.peers.run("n3", n3, "", "") },
			id: "n3", addr: n3, changes: []string{"voter n3 " + n3}},
		{name: "a new non-voter", setup: func(f *fixture) { f.peers.run("n3", n3, wire.WantsVoter, "") },
			id: "n3", addr: n3, nonVoter: true, changes: []string{"non-voter n3 " + n3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(voter("n1", n1), voter("n2", n2))
			if c.setup != nil {
				c.setup(f)
			}
			_, wasRemoved := f.state.Removed(c.id)
			err := f.AddServer(c.id, c.addr, "", c.nonVoter, "key1")
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("AddServer: %v, want %v", err, c.want)
			}
			if got := f.raft.made(); !slices.Equal(got, c.changes) {
				t.Errorf("changes %q, want %q", got, c.changes)
			}
			if _, removed := f.state.Removed(c.id); wasRemoved && removed == (err == nil) {
				t.Errorf("removal record kept: %v, after the join answered %v", removed, err)
			}
			if errors.Is(err, ErrRemovedServer) && !errors.Is(err, ErrServerConflict) {
				t.Errorf("refusal %v is no conflict", err)
			}
		})
	}
}

// TestNonvoterJoinTellsTheServerFirst: a server that asks to vote, joined
// as a non-voter, is told to remain one before it is added.
func TestNonvoterJoinTellsTheServerFirst(t *testing.T) {
	t.Parallel()
	f := newFixture(voter("n1", n1))
	f.peers.run("n3", n3, wire.WantsVoter, "")
	if err := f.AddServer("n3", n3, "", true, ""); err != nil {
		t.Fatal(err)
	}
	if got, want := f.peers.toldAll(), []string{"non-voter n3"}; !slices.Equal(got, want) {
		t.Errorf("told %q, want %q", got, want)
	}
}

// TestPromoteRefusals: a promotion needs a non-voter of the configuration,
// not recorded as removed, that answers.
func TestPromoteRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		setup   func(f *fixture)
		id      string
		want    error
		changes []string
	}{
		{name: "not the leader", setup: func(f *fixture) { f.raft.follower = true }, id: "n3", want: ErrNoLeader},
		{name: "an unknown id", id: "n9", want: ErrUnknownServer},
		{name: "a voter", id: "n2", want: ErrAlreadyVoter},
		{name: "a removed server", setup: func(f *fixture) { f.state.removed["n3"] = "" }, id: "n3", want: ErrRemovedServer},
		{name: "one that does not answer", setup: func(f *fixture) { delete(f.peers.running, n3) }, id: "n3", want: ErrUnreachable},
		{name: "a non-voter", id: "n3", changes: []string{"voter n3 " + n3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(voter("n1", n1), voter("n2", n2), nonvoter("n3", n3))
			if c.setup != nil {
				c.setup(f)
			}
			err := f.Promote(c.id, "")
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("Promote: %v, want %v", err, c.want)
			}
			if got := f.raft.made(); !slices.Equal(got, c.changes) {
				t.Errorf("changes %q, want %q", got, c.changes)
			}
		})
	}
}

// TestRemoveServerRefusals: the last voter stays; a removal for good is
// recorded (before the change for a server that answers, after it for
// one that does not); a leave is not.
func TestRemoveServerRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		servers []string // "v:id" a voter, "n:id" a non-voter
		setup   func(f *fixture)
		id      string
		leave   bool
		want    error
		changes []string
		record  bool // the removal is recorded
	}{
		{name: "not the leader", setup: func(f *fixture) { f.raft.follower = true }, id: "n2", want: ErrNoLeader},
		{name: "an unknown id", id: "n9", want: ErrUnknownServer},
		{name: "the last voter", servers: []string{"v:n1", "n:n3"}, id: "n1", want: ErrLastVoter},
		{name: "a non-voter beside the last voter", servers: []string{"v:n1", "n:n3"}, id: "n3",
			changes: []string{"remove n3"}, record: true},
		{name: "a voter", id: "n2", changes: []string{"remove n2"}, record: true},
		{name: "a voter that does not answer", setup: func(f *fixture) { delete(f.peers.running, n2) }, id: "n2",
			changes: []string{"remove n2"}, record: true},
		{name: "a leave", id: "n2", leave: true, changes: []string{"remove n2"}},
	}
	addrs := map[string]string{"n1": n1, "n2": n2, "n3": n3}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			servers := []string{"v:n1", "v:n2"}
			if c.servers != nil {
				servers = c.servers
			}
			f := newFixture()
			for _, s := range servers {
				id := s[2:]
				if s[0] == 'v' {
					f.raft.servers = append(f.raft.servers, voter(id, addrs[id]))
				} else {
					f.raft.servers = append(f.raft.servers, nonvoter(id, addrs[id]))
				}
				f.peers.run(id, addrs[id], wire.WantsVoter, "inc-"+id)
			}
			if c.setup != nil {
				c.setup(f)
			}
			var err error
			if c.leave {
				err = f.Leave(c.id)
			} else {
				err = f.RemoveServer(c.id, "key1")
			}
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("remove: %v, want %v", err, c.want)
			}
			if got := f.raft.made(); !slices.Equal(got, c.changes) {
				t.Errorf("changes %q, want %q", got, c.changes)
			}
			if _, recorded := f.state.Removed(c.id); recorded != c.record {
				t.Errorf("recorded %v, want %v", recorded, c.record)
			}
		})
	}
}

// TestTransferLeadershipRefusals: leadership goes only to another voter.
func TestTransferLeadershipRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(voter("n1", n1), nonvoter("n3", n3))
	if err := f.TransferLeadership(); !errors.Is(err, ErrNoTransferTarget) {
		t.Fatalf("transfer with only a non-voter besides: %v, want ErrNoTransferTarget", err)
	}
	f = newFixture(voter("n1", n1), voter("n2", n2))
	f.raft.follower = true
	if err := f.TransferLeadership(); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("transfer by a follower: %v, want ErrNoLeader", err)
	}
	f.raft.follower = false
	if err := f.TransferLeadership(); err != nil {
		t.Fatal(err)
	}
	if got := f.raft.made(); !slices.Equal(got, []string{"transfer"}) {
		t.Errorf("changes %q", got)
	}
}

package membership

import (
	"slices"
	"testing"

	"github.com/linkraft/linkraft/cluster/wire"
)

// TestReconcileAddsOnlyWhomItMay: reconciliation adds a live member that
// answers (a replica as a non-voter, a server as a learner), and never one
// that leaves, belongs to another cluster, holds another server's address,
// does not answer, or was removed; a removed one on its data dir is told.
func TestReconcileAddsOnlyWhomItMay(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		member  Member
		setup   func(f *fixture)
		changes []string
		told    []string
	}{
		{name: "a server", member: Member{ID: "n3", RaftAddr: n3}, changes: []string{"non-voter n3 " + n3}},
		{name: "a replica", member: Member{ID: "n3", RaftAddr: n3, Replica: true},
			setup:   func(f *fixture) { f.peers.run("n3", n3, wire.WantsNonvoter, "") },
			changes: []string{"non-voter n3 " + n3}},
		{name: "one leaving", member: Member{ID: "n3", RaftAddr: n3, Leaving: true}},
		{name: "of another cluster", member: Member{ID: "n3", RaftAddr: n3, Cluster: "c2"}},
		{name: "at another server's address", member: Member{ID: "n3", RaftAddr: n2}},
		{name: "one that does not answer", member: Member{ID: "n3", RaftAddr: n3},
			setup: func(f *fixture) { delete(f.peers.running, n3) }},
		{name: "a removed server on a new data dir", member: Member{ID: "n3", RaftAddr: n3, Inc: "new"},
			setup: func(f *fixture) { f.state.removed["n3"] = "old" }},
		{name: "a removed server on its data dir", member: Member{ID: "n3", RaftAddr: n3, Inc: "old"},
			setup: func(f *fixture) { f.state.removed["n3"] = "old" }, told: []string{"removed n3 old"}},
		// The configuration change may cut the server off before it
		// learns the record's entry is committed: only this notice tells it.
		{name: "a server this leader removed, still running", member: Member{ID: "n3", RaftAddr: n3, Inc: "old"},
			setup: func(f *fixture) { f.state.removed["n3"] = "old"; f.gossip.MarkRemoved("n3") },
			told:  []string{"removed n3 old"}},
		{name: "a server this leader removed without a record", member: Member{ID: "n3", RaftAddr: n3, Inc: "old"},
			setup: func(f *fixture) { f.gossip.MarkRemoved("n3") }},
		{name: "a known server moved", member: Member{ID: "n2", RaftAddr: n3}, changes: []string{"voter n2 " + n3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(voter("n1", n1), voter("n2", n2))
			f.peers.run(c.member.ID, n3, wire.WantsVoter, c.member.Inc)
			if c.setup != nil {
				c.setup(f)
			}
			f.gossip.members = []Member{{ID: "n1", RaftAddr: n1}, {ID: "n2", RaftAddr: n2}, c.member}
			if c.member.ID == "n2" {
				f.gossip.members = f.gossip.members[:2]
				f.gossip.members[1] = c.member
			}
			f.Reconcile()
			if got := f.raft.made(); !slices.Equal(got, c.changes) {
				t.Errorf("changes %q, want %q", got, c.changes)
			}
			if got := f.peers.toldAll(); !slices.Equal(got, c.told) {
				t.Errorf("told %q, want %q", got, c.told)
			}
		})
	}
}

// TestReconcileFinishesARecordedRemoval: a server of the configuration
// that a removal record names is removed, whether gossip lists it or not;
// one that announced a leave is removed unrecorded.
func TestReconcileFinishesARecordedRemoval(t *testing.T) {
	t.Parallel()
	f := newFixture(voter("n1", n1), voter("n2", n2), voter("n3", n3))
	f.state.removed["n2"] = "inc-n2"
	f.gossip.members = []Member{{ID: "n1", RaftAddr: n1}, {ID: "n2", RaftAddr: n2, Inc: "inc-n2"}}
	f.gossip.left = []string{"n3"}
	f.Reconcile()
	if got, want := f.raft.made(), []string{"remove n2", "remove n3"}; !slices.Equal(got, want) {
		t.Errorf("changes %q, want %q", got, want)
	}
	if _, recorded := f.state.Removed("n3"); recorded {
		t.Error("a leave was recorded as a removal")
	}
}

// TestPromoterPromotesOnlyCaughtUpLearners: one learner a round, the first
// within PromoteMaxLag of the leader's applied index; never a replica, a
// learner that did not say what it applied, or a removed one.
func TestPromoterPromotesOnlyCaughtUpLearners(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(f *fixture)
		want  string
	}{
		{name: "caught up", setup: func(f *fixture) { f.peers.applied["n3"] = 1000 - PromoteMaxLag }, want: "n3"},
		{name: "behind", setup: func(f *fixture) { f.peers.applied["n3"] = 1000 - PromoteMaxLag - 1 }},
		{name: "silent about what it applied"},
		{name: "a replica", setup: func(f *fixture) {
			f.peers.applied["n3"] = 1000
			f.peers.run("n3", n3, wire.WantsNonvoter, "")
		}},
		{name: "removed", setup: func(f *fixture) {
			f.peers.applied["n3"] = 1000
			f.state.removed["n3"] = ""
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(voter("n1", n1), nonvoter("n3", n3))
			if c.setup != nil {
				c.setup(f)
			}
			if got := f.Promoter().Once(); got != c.want {
				t.Errorf("promoted %q, want %q", got, c.want)
			}
			var changes []string
			if c.want != "" {
				changes = []string{"voter n3 " + n3}
			}
			if got := f.raft.made(); !slices.Equal(got, changes) {
				t.Errorf("changes %q, want %q", got, changes)
			}
		})
	}
}

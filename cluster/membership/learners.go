package membership

import (
	"context"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/cluster/wire"
)

// Learners, as etcd's: a server that joins to vote is added as a non-voter
// first, so the join is answered once that configuration change commits
// (the voters alone commit it), and the leader promotes it once it has
// caught up (a Consul-style leader duty, Promoter). Until then the quorum
// is the voters' it was: a learner that is slow, or dies, blocks nothing.
//
// Which non-voters are learners is the servers' own word: each says in
// GET node the suffrage it asks for (wire.NodeInfo.Wants), a voter unless
// it runs with --read-replica or an operator added it as a non-voter (then
// the leader tells it so first, POST non-voter, and it keeps that in its
// data dir). Every leader asks, so a new one finishes what the last began,
// and no replicated record can disagree with the server it describes.

const (
	// promoteInterval is how often the leader looks for learners that
	// have caught up.
	promoteInterval = 500 * time.Millisecond
	// PromoteMaxLag is how many entries a learner's applied index may
	// trail the leader's and still be promoted: a learner that keeps up
	// with the log is within a few, one still installing the state is
	// the whole state behind. Consul's autopilot allows 250 trailing logs.
	PromoteMaxLag = 256
	// AskTimeout bounds each question the promotion and a join ask a
	// learner.
	AskTimeout = time.Second
)

// joinServer adds a server that is not in the configuration yet: a voter
// as a learner (a non-voter the promotion duty makes a voter once caught
// up), a non-voter as one that remains so. A server of a build before
// learners says nothing of its suffrage and would never be promoted: it is
// added as a voter at once, as before.
func (m *Membership) joinServer(id, raftAddr string, nonVoter bool) error {
	wants, answered := m.askWants(raftAddr)
	switch {
	case !nonVoter && answered && wants == "":
		return m.raftAddServer(id, raftAddr, false)
	case nonVoter && wants != wire.WantsNonvoter:
		// Told before it is added: a non-voter that asks to vote is a
		// learner to any leader. One that did not say (it did not answer
		// just now) is told too: it may ask to vote once it answers.
		if err := m.peers.TellNonvoter(id, raftAddr); err != nil {
			return err
		}
	}
	if err := m.raftAddServer(id, raftAddr, true); err != nil {
		return err
	}
	if !nonVoter {
		m.log.Info("server joined as a learner: promoted to voter once it has caught up", "id", id)
	}
	return nil
}

// askWants asks the server at raftAddr which suffrage it asks for; answered
// is false when it did not answer.
func (m *Membership) askWants(raftAddr string) (wants string, answered bool) {
	info, err := m.peers.NodeInfo(raftAddr, AskTimeout)
	if err != nil {
		return "", false
	}
	return info.Wants, true
}

// Promoter is the leader duty that makes caught-up learners voters.
type Promoter struct {
	servers func() ([]raft.Server, error)
	// learners and applied ask the non-voters which are learners and
	// what each has applied; own is the leader's applied index.
	learners func(ctx context.Context, servers []raft.Server) map[raft.ServerID]bool
	applied  func(ctx context.Context, servers []raft.Server) map[string]uint64
	own      func() uint64
	// promote makes one server a voter (Membership.Promote: it must
	// answer at its Raft address first).
	promote func(id string) error
	log     *slog.Logger
}

// Promoter is this server's promotion duty.
func (m *Membership) Promoter() Promoter {
	return Promoter{servers: m.Configuration, learners: m.peers.Learners, applied: m.peers.AppliedIndexes,
		own: m.applied, log: m.log, promote: func(id string) error { return m.Promote(id, "") }}
}

// Run promotes every promoteInterval until stop.
func (p Promoter) Run(stop <-chan struct{}) {
	tick := time.NewTicker(promoteInterval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			p.Once()
		}
	}
}

// Once promotes at most one learner that has caught up, and reports which.
// One at a time: each promotion changes the quorum, and the next is
// decided on the configuration it left. A learner is promoted only when it
// answered just now, within PromoteMaxLag of the leader's applied index
// (sampled after its answer, so the lag is never understated): a voter
// that cannot acknowledge would weaken the quorum it joins.
func (p Promoter) Once() string {
	servers, err := p.servers()
	if err != nil {
		return ""
	}
	var nonvoters []raft.Server
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			nonvoters = append(nonvoters, s)
		}
	}
	if len(nonvoters) == 0 {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), AskTimeout)
	defer cancel()
	learners := p.learners(ctx, nonvoters)
	if len(learners) == 0 {
		return ""
	}
	applied := p.applied(ctx, nonvoters)
	leader := p.own()
	for _, s := range nonvoters {
		index, ok := applied[string(s.ID)]
		if !learners[s.ID] || !ok || lagOf(leader, index) > PromoteMaxLag {
			continue
		}
		if err := p.promote(string(s.ID)); err != nil {
			p.log.Warn("promoting a learner that caught up failed; the next round retries", "id", s.ID, "err", err)
			return ""
		}
		p.log.Info("learner caught up: promoted to voter", "id", s.ID, "applied", index, "leader_applied", leader)
		return string(s.ID)
	}
	return ""
}

// lagOf is how many entries applied trails leader's.
func lagOf(leader, applied uint64) uint64 {
	if applied >= leader {
		return 0
	}
	return leader - applied
}

package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/internal/ownfile"
	"github.com/linkraft/linkraft/cluster/wire"
)

// Learners, as etcd's: a server that joins to vote is added as a non-voter
// first, so the join is answered once that configuration change commits
// (the voters alone commit it), and the leader promotes it once it has
// caught up (a Consul-style leader duty). Until then the quorum is the
// voters' it was: a learner that is slow, or dies, blocks nothing.
//
// Which non-voters are learners is the servers' own word: each says in
// GET node the suffrage it asks for (wire.NodeInfo.Wants), a voter unless
// it runs with --read-replica or an operator added it as a non-voter (then
// the leader tells it so first, POST non-voter, and it keeps that in its
// data dir). Every leader asks, so a new one finishes what the last began,
// and no replicated record can disagree with the server it describes.

const (
	// nonvoterFile, in the data dir, records that an operator added this
	// server as a non-voter: it asks to remain one across restarts.
	nonvoterFile = "non-voter"
	// promoteInterval is how often the leader looks for learners that
	// have caught up.
	promoteInterval = 500 * time.Millisecond
	// promoteMaxLag is how many entries a learner's applied index may
	// trail the leader's and still be promoted: a learner that keeps up
	// with the log is within a few, one still installing the state is
	// the whole state behind. Consul's autopilot allows 250 trailing logs.
	promoteMaxLag = 256
	// learnerAskTimeout bounds each question the promotion asks a learner.
	learnerAskTimeout = time.Second
)

// loadNonvoter reports whether this server asks to remain a non-voter:
// started with --read-replica, or told so at an operator's join.
func loadNonvoter(cfg Config) (bool, error) {
	if cfg.ReadReplica {
		return true, nil
	}
	_, err := os.Stat(filepath.Join(cfg.DataDir, nonvoterFile))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("read the non-voter mark: %w", err)
}

// wants is the suffrage this server asks for (wire.NodeInfo.Wants).
func (n *Node) wants() string {
	if n.nonvoter.Load() {
		return wire.WantsNonvoter
	}
	return wire.WantsVoter
}

// remainNonvoter makes this server ask to remain a non-voter from now on,
// at the leader's request (POST non-voter): written down first, so a
// restart keeps it, then said over gossip too.
func (n *Node) remainNonvoter(id string) error {
	if id != n.cfg.ID {
		return fmt.Errorf("%w: this server is %q, not %q", ErrInvalidServer, n.cfg.ID, id)
	}
	if n.nonvoter.Load() {
		return nil
	}
	if err := ownfile.Write(filepath.Join(n.cfg.DataDir, nonvoterFile), []byte("added as a non-voter\n")); err != nil {
		return fmt.Errorf("write the non-voter mark: %w", err)
	}
	n.nonvoter.Store(true)
	if n.gossip != nil {
		n.gossip.updateMeta(func(m *memberMeta) { m.Replica = true })
	}
	n.log.Info("added as a non-voter: this server remains one until promoted")
	return nil
}

// tellNonvoter asks the server id at raftAddr to remain a non-voter. A
// build before learners has no such exchange (ErrRefused for its 404);
// it never asks to be promoted either, so that is no error.
func (c *peerClient) tellNonvoter(id, raftAddr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), learnerAskTimeout)
	defer cancel()
	body, err := json.Marshal(wire.NonvoterRequest{V: wire.Version, ID: id})
	if err != nil {
		return fmt.Errorf("encode a non-voter request: %w", err)
	}
	var ack wire.Ack
	err = c.call(ctx, raftAddr, fasthttp.MethodPost, wire.PathNonvoter, body, &ack)
	var status *wire.StatusError
	if errors.As(err, &status) && status.Status == fasthttp.StatusNotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: asking %s to remain a non-voter: %v", ErrUnreachable, id, err)
	}
	return nil
}

// joinServer adds a server that is not in the configuration yet: a voter
// as a learner (a non-voter the promotion duty makes a voter once caught
// up), a non-voter as one that remains so. A server of a build before
// learners says nothing of its suffrage and would never be promoted: it is
// added as a voter at once, as before.
func (n *Node) joinServer(id, raftAddr string, nonVoter bool) error {
	wants, answered := n.askWants(raftAddr)
	switch {
	case !nonVoter && answered && wants == "":
		return n.raftAddServer(id, raftAddr, false)
	case nonVoter && wants != wire.WantsNonvoter:
		// Told before it is added: a non-voter that asks to vote is a
		// learner to any leader. One that did not say (it did not answer
		// just now) is told too: it may ask to vote once it answers.
		if err := n.peers.tellNonvoter(id, raftAddr); err != nil {
			return err
		}
	}
	if err := n.raftAddServer(id, raftAddr, true); err != nil {
		return err
	}
	if !nonVoter {
		n.log.Info("server joined as a learner: promoted to voter once it has caught up", "id", id)
	}
	return nil
}

// askWants asks the server at raftAddr which suffrage it asks for; answered
// is false when it did not answer.
func (n *Node) askWants(raftAddr string) (wants string, answered bool) {
	info, err := n.peers.nodeInfo(raftAddr, learnerAskTimeout)
	if err != nil {
		return "", false
	}
	return info.Wants, true
}

// learners returns which of servers are learners: non-voters that answer
// GET node asking to be voters. Asked concurrently, bounded by ctx; one
// that does not answer is not a learner for now.
func (c *peerClient) learners(ctx context.Context, servers []raft.Server) map[raft.ServerID]bool {
	got := map[raft.ServerID]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range servers {
		if s.Suffrage == raft.Voter || s.ID == c.self {
			continue
		}
		addr := string(c.addrs.resolve(s.ID, s.Address))
		wg.Go(func() {
			var info wire.NodeInfo
			if err := c.call(ctx, addr, fasthttp.MethodGet, wire.PathNode, nil, &info); err != nil {
				return
			}
			if info.ID == string(s.ID) && info.Wants == wire.WantsVoter {
				mu.Lock()
				got[s.ID] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return got
}

// promoter is the leader duty that makes caught-up learners voters.
type promoter struct {
	servers func() ([]raft.Server, error)
	// learners and applied ask the non-voters which are learners and
	// what each has applied; own is the leader's applied index.
	learners func(ctx context.Context, servers []raft.Server) map[raft.ServerID]bool
	applied  func(ctx context.Context, servers []raft.Server) map[string]uint64
	own      func() uint64
	// promote makes one server a voter (Node.Promote: it must answer at
	// its Raft address first).
	promote func(id string) error
	log     *slog.Logger
}

// promoter is this node's promotion duty.
func (n *Node) promoter() promoter {
	return promoter{servers: n.configuration, learners: n.peers.learners, own: n.machine.appliedIndex, log: n.log,
		applied: func(ctx context.Context, servers []raft.Server) map[string]uint64 {
			return n.peers.appliedIndexes(ctx, servers, 0)
		},
		promote: func(id string) error { return n.Promote(id, "") }}
}

// run promotes every promoteInterval until stop.
func (p promoter) run(stop <-chan struct{}) {
	tick := time.NewTicker(promoteInterval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			p.once()
		}
	}
}

// once promotes at most one learner that has caught up, and reports which.
// One at a time: each promotion changes the quorum, and the next is
// decided on the configuration it left. A learner is promoted only when it
// answered just now, within promoteMaxLag of the leader's applied index
// (sampled after its answer, so the lag is never understated): a voter
// that cannot acknowledge would weaken the quorum it joins.
func (p promoter) once() string {
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
	ctx, cancel := context.WithTimeout(context.Background(), learnerAskTimeout)
	defer cancel()
	learners := p.learners(ctx, nonvoters)
	if len(learners) == 0 {
		return ""
	}
	applied := p.applied(ctx, nonvoters)
	leader := p.own()
	for _, s := range nonvoters {
		index, ok := applied[string(s.ID)]
		if !learners[s.ID] || !ok || lagOf(leader, index) > promoteMaxLag {
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

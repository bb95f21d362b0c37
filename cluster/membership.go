package cluster

import (
	"context"
	"io"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/cluster/membership"
	"github.com/linkraft/linkraft/cluster/secure"
	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
)

// Membership errors (package membership's); each leaves the configuration
// unchanged.
var (
	ErrUnknownServer    = membership.ErrUnknownServer
	ErrServerConflict   = membership.ErrServerConflict
	ErrLastVoter        = membership.ErrLastVoter
	ErrNoTransferTarget = membership.ErrNoTransferTarget
	ErrInvalidServer    = membership.ErrInvalidServer
	ErrOtherCluster     = membership.ErrOtherCluster
	ErrUnreachable      = membership.ErrUnreachable
	ErrAlreadyVoter     = membership.ErrAlreadyVoter
	// ErrRemovedServer refuses to join a server an operator removed, on
	// the data dir it was removed with (or one that cannot be told apart
	// from it).
	ErrRemovedServer = membership.ErrRemovedServer
)

// Membership adds, promotes and removes servers and hands leadership over
// (the admin API's membership calls); it acts while this node leads.
func (n *Node) Membership() *membership.Membership { return n.members }

// configuration is the servers of r's latest configuration.
func configuration(r *raft.Raft) ([]raft.Server, error) { return membership.Servers(r) }

// newMembership wires package membership to this node, once Raft and
// gossip are in place.
func newMembership(n *Node) *membership.Membership {
	cfg := membership.Config{
		ID: n.cfg.ID, Incarnation: n.incarnation, WriteTimeout: n.cfg.Writes.Timeout,
		Raft: n.raft, State: n.fsm, Proposer: leaderProposer{n},
		Peers:     memberPeers{peerClient: n.peers, layer: n.layer, addrs: n.addrs},
		RaftError: raftError, Applied: n.machine.appliedIndex, Closing: n.closing, Log: n.log,
	}
	if n.gossip != nil { // a nil *gossip must not become a non-nil Gossip
		cfg.Gossip = gossipView{n.gossip}
	}
	return membership.New(cfg)
}

// leaderProposer writes membership's entries: the leader's own
// (registry, removal records) and audit notes.
type leaderProposer struct{ n *Node }

func (p leaderProposer) Apply(cmd fsm.Command) error {
	_, _, err := p.n.apply(cmd)
	return err
}

func (p leaderProposer) ApplyOwn(cmd fsm.Command, what string) error { return p.n.applyOwn(cmd, what) }

func (p leaderProposer) Propose(ctx context.Context, cmd fsm.Command) error {
	_, err := p.n.Propose(ctx, cmd, ProposeOptions{})
	return err
}

// memberPeers is the protocol's client, the stream layer and the address
// book as membership asks the other servers.
type memberPeers struct {
	*peerClient
	layer *secure.StreamLayer
	addrs *addressBook
}

func (p memberPeers) NodeInfo(raftAddr string, timeout time.Duration) (wire.NodeInfo, error) {
	return p.nodeInfo(raftAddr, timeout)
}

func (p memberPeers) Dial(raftAddr string, timeout time.Duration) (io.Closer, error) {
	return p.layer.Dial(raft.ServerAddress(raftAddr), timeout)
}

func (p memberPeers) TellNonvoter(id, raftAddr string) error { return p.tellNonvoter(id, raftAddr) }

func (p memberPeers) TellRemoved(id, incarnation, raftAddr string) error {
	return p.tellRemoved(id, incarnation, raftAddr)
}

func (p memberPeers) Learners(ctx context.Context, servers []raft.Server) map[raft.ServerID]bool {
	return p.learners(ctx, servers)
}

func (p memberPeers) AppliedIndexes(ctx context.Context, servers []raft.Server) map[string]uint64 {
	return p.appliedIndexes(ctx, servers, 0)
}

func (p memberPeers) Resolve(id raft.ServerID, configured raft.ServerAddress) raft.ServerAddress {
	return p.addrs.resolve(id, configured)
}

func (p memberPeers) Claimed(id raft.ServerID) (string, bool) { return p.addrs.claimed(id) }

// gossipView is gossip as membership reads it.
type gossipView struct{ g *gossip }

func (v gossipView) Members() []membership.Member        { return v.g.members() }
func (v gossipView) MarkRemoved(id string)               { v.g.markRemoved(id) }
func (v gossipView) WasRemoved(m membership.Member) bool { return v.g.wasRemoved(m) }
func (v gossipView) FirstRefusal(id, inc string) bool    { return v.g.firstRefusal(id, inc) }
func (v gossipView) TakeLeft() []string                  { return v.g.takeLeft() }

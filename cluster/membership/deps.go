package membership

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
)

// Raft is the part of hashicorp/raft that membership changes need;
// *raft.Raft satisfies it.
type Raft interface {
	State() raft.RaftState
	GetConfiguration() raft.ConfigurationFuture
	AddVoter(id raft.ServerID, address raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	AddNonvoter(id raft.ServerID, address raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	RemoveServer(id raft.ServerID, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	LeadershipTransfer() raft.Future
}

// State is what membership reads of the replicated state; *fsm.FSM
// satisfies it.
type State interface {
	ClusterID() string
	// Level is the entry level the state needs of a server; Raised the
	// level the cluster is raised to.
	Level() int
	Raised() int
	// Removed is the removal record of server id: its incarnation, "" when
	// unknown.
	Removed(id string) (incarnation string, ok bool)
	ServerHTTP(id string) (string, bool)
}

// Proposer writes the leader's entries.
type Proposer interface {
	// Apply hands one of the leader's own commands to Raft, unchecked, and
	// waits for it to be applied.
	Apply(cmd fsm.Command) error
	// ApplyOwn is Apply that also returns the state machine's refusal, as
	// an error naming what.
	ApplyOwn(cmd fsm.Command, what string) error
	// Propose proposes a command as any other writer does (its level
	// checked, in a ready term).
	Propose(ctx context.Context, cmd fsm.Command) error
}

// Peers asks the other servers, through the node-to-node protocol and the
// cluster port.
type Peers interface {
	// NodeInfo asks the server at raftAddr who it is (GET node).
	NodeInfo(raftAddr string, timeout time.Duration) (wire.NodeInfo, error)
	// Dial connects to the server at raftAddr through the stream layer,
	// whose handshake also proves it holds the cluster key.
	Dial(raftAddr string, timeout time.Duration) (io.Closer, error)
	// TellNonvoter asks server id to remain a non-voter (POST non-voter);
	// TellRemoved tells it that it was removed on the data dir of
	// incarnation (POST removed).
	TellNonvoter(id, raftAddr string) error
	TellRemoved(id, incarnation, raftAddr string) error
	// Learners returns which of servers are learners: non-voters that ask
	// to vote. AppliedIndexes what each other server has applied; one that
	// did not answer is absent from either.
	Learners(ctx context.Context, servers []raft.Server) map[raft.ServerID]bool
	AppliedIndexes(ctx context.Context, servers []raft.Server) map[string]uint64
	// Resolve is where server id is now: what gossip says, else
	// configured. Claimed is the address a live member claims for id.
	Resolve(id raft.ServerID, configured raft.ServerAddress) raft.ServerAddress
	Claimed(id raft.ServerID) (string, bool)
}

// Member is what a node tells the others about itself over gossip.
// memberlist limits it to 512 bytes; ids and addresses are short.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft"`
	HTTPAddr string `json:"http"`
	Expect   int    `json:"expect"`
	HasState bool   `json:"state"`             // has Raft state: bootstrapped or joined
	Cluster  string `json:"cluster,omitempty"` // cluster id, once initialised
	// Replica asks to be added as a non-voter (--read-replica, or added as
	// one by an operator); such a member is not one of the servers that
	// bootstrap a cluster.
	Replica bool `json:"replica,omitempty"`
	// Level is the entry level the member's build applies (levels.go in package cluster);
	// builds before levels send none.
	Level int `json:"level,omitempty"`
	// Leaving announces a graceful leave before the node goes: memberlist's
	// NotifyLeave cannot tell a leave from a death (the state it passes is
	// not updated), but it passes the node's last metadata.
	Leaving bool `json:"leaving,omitempty"`
	// Boot is random per process start: until the cluster keeps removals
	// in its state, a server removed from the configuration while running
	// is not added back until it restarts (Gossip.MarkRemoved).
	Boot string `json:"boot"`
	// Inc is the incarnation of the member's data dir (removed.go); builds
	// before removal records send none.
	Inc string `json:"inc,omitempty"`
}

// Gossip is what membership reads of discovery.
type Gossip interface {
	// Members are the live members.
	Members() []Member
	// MarkRemoved remembers that the running process of id was removed;
	// WasRemoved reports whether m is such a process.
	MarkRemoved(id string)
	WasRemoved(m Member) bool
	// FirstRefusal reports whether member id of incarnation inc is kept
	// out by a removal record for the first time.
	FirstRefusal(id, inc string) bool
	// TakeLeft returns and forgets the ids of members that announced a
	// leave.
	TakeLeft() []string
}

// Config is what a Membership needs.
type Config struct {
	// ID is this server's; Incarnation its data dir's (removed.go).
	ID          string
	Incarnation string
	// WriteTimeout bounds each configuration change and the wait for a
	// joining server's answer.
	WriteTimeout time.Duration
	Raft         Raft
	State        State
	Proposer     Proposer
	Peers        Peers
	Gossip       Gossip // nil without discovery
	// RaftError turns Raft's errors into the node's (ErrNoLeader for a
	// lost leadership).
	RaftError func(error) error
	// Applied is this server's applied index.
	Applied func() uint64
	// Closing ends the waits of a stopping node.
	Closing <-chan struct{}
	Log     *slog.Logger
}

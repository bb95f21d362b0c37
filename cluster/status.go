package cluster

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/cluster/membership"
	"github.com/linkraft/linkraft/cluster/wire"
)

// Server is one member of the Raft configuration as an operator sees it.
type Server struct {
	ID          string    `json:"id"`
	RaftAddr    string    `json:"raft_addr"`
	HTTPAddr    string    `json:"http_addr,omitempty"`
	Suffrage    string    `json:"suffrage"`
	Leader      bool      `json:"leader"`
	Reachable   bool      `json:"reachable"`
	LastContact time.Time `json:"last_contact,omitzero"`
	// AppliedIndex is the last index the server's state machine applied,
	// and ReplicationLag how many entries that is behind the leader's
	// (0 for the leader). Each is present only when the server (and, for
	// the lag, the leader) answered.
	AppliedIndex   *uint64 `json:"applied_index,omitempty"`
	ReplicationLag *uint64 `json:"replication_lag,omitempty"`
	// CatchingUp marks a learner: a non-voter that joined to vote and is
	// receiving the state; the leader promotes it once it has caught up.
	// A read replica is a non-voter without it.
	CatchingUp bool `json:"catching_up,omitempty"`
}

// Local is this node's own view, from its Raft alone: what health,
// metrics and logs read, cheaply, as often as they like.
type Local struct {
	ID string `json:"node_id"`
	// HTTPAddr is this node's HTTP address as the other nodes reach it.
	HTTPAddr string `json:"http_addr"`
	// Role is "leader", "follower", "candidate" or "shutdown".
	Role string `json:"role"`
	// LeaderID and LeaderAddr name the current leader and its Raft
	// address, empty when none is known.
	LeaderID     string `json:"leader"`
	LeaderAddr   string `json:"leader_raft_addr"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"` // the last entry the state machine applied
}

// Status describes this node's view of the cluster: its own, and the
// configuration's servers as it reached them.
type Status struct {
	Local
	// Level is the level the cluster was raised to (fsm.RaiseCommand):
	// the rules its state follows; 0 before any raise.
	Level   int      `json:"level"`
	Servers []Server `json:"servers"`
}

// Local reports this node's own view.
func (n *Node) Local() Local {
	leaderAddr, leaderID := n.raft.LeaderWithID()
	return Local{
		ID: n.cfg.ID, HTTPAddr: n.cfg.HTTPAddr, Role: roleOf(raftState(n)),
		LeaderID: string(leaderID), LeaderAddr: string(leaderAddr),
		Term: n.raft.CurrentTerm(), CommitIndex: n.raft.CommitIndex(), AppliedIndex: n.machine.appliedIndex(),
	}
}

func roleOf(state raft.RaftState) string {
	switch state {
	case raft.Leader:
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	}
	return "shutdown"
}

// Status reports this node's view of the cluster: roles, indexes and the
// configuration's servers. Each other server is asked what it has applied
// on the cluster port (concurrently, briefly): "reachable" means it
// answered this node now, last_contact is the time of that answer, and the
// index with the leader's gives its replication lag; each non-voter is
// asked whether it is a learner.
func (n *Node) Status() (Status, error) {
	st := Status{Local: n.Local(), Level: n.fsm.Raised()}
	leaderID := raft.ServerID(st.LeaderID)
	servers, err := configuration(n.raft)
	if err != nil {
		return st, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var learners map[raft.ServerID]bool
	asked := make(chan struct{})
	go func() {
		defer close(asked)
		learners = n.peers.learners(ctx, servers)
	}()
	applied := n.peers.appliedIndexes(ctx, servers, 0)
	answered := time.Now().UTC()
	<-asked
	var g membership.Gossip
	if n.gossip != nil { // a nil *gossip must not become a non-nil Gossip
		g = gossipView{n.gossip}
	}
	st.Servers = make([]Server, len(servers))
	for i, s := range servers {
		srv := &st.Servers[i]
		*srv = Server{
			ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: s.Suffrage.String(),
			Leader: s.ID == leaderID, CatchingUp: learners[s.ID],
		}
		srv.HTTPAddr, _ = membership.HTTPAddrOf(n.fsm, g, string(s.ID))
		if s.ID == raft.ServerID(n.cfg.ID) {
			srv.HTTPAddr = n.cfg.HTTPAddr
			srv.Reachable, srv.LastContact = true, time.Now().UTC()
			srv.AppliedIndex = ptr(n.machine.appliedIndex())
			srv.CatchingUp = s.Suffrage != raft.Voter && n.standing.wants() == wire.WantsVoter
		} else if index, ok := applied[string(s.ID)]; ok {
			srv.Reachable, srv.LastContact, srv.AppliedIndex = true, answered, ptr(index)
		}
	}
	setLags(st.Servers)
	return st, nil
}

// setLags sets each server's replication lag from its applied index and
// the leader's, when both are known.
func setLags(servers []Server) {
	var leader *uint64
	for _, s := range servers {
		if s.Leader {
			leader = s.AppliedIndex
		}
	}
	if leader == nil {
		return
	}
	for i := range servers {
		if s := &servers[i]; s.AppliedIndex != nil {
			s.ReplicationLag = ptr(lagOf(*leader, *s.AppliedIndex))
		}
	}
}

func ptr[T any](v T) *T { return &v }

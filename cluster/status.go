package cluster

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
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
}

// Status describes this node's view of the cluster.
type Status struct {
	ID           string   `json:"node_id"`
	Role         string   `json:"role"`
	LeaderID     string   `json:"leader"`
	LeaderAddr   string   `json:"leader_raft_addr"`
	Term         uint64   `json:"term"`
	CommitIndex  uint64   `json:"commit_index"`
	AppliedIndex uint64   `json:"applied_index"`
	Servers      []Server `json:"servers"`
}

// Role is "leader", "follower", "candidate" or "shutdown".
func (n *Node) Role() string {
	switch n.raft.State() {
	case raft.Leader:
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	}
	return "shutdown"
}

// Leader returns the current leader's id, empty when none is known.
func (n *Node) Leader() string {
	_, id := n.raft.LeaderWithID()
	return string(id)
}

// HTTPAddr is this node's HTTP address as the other nodes reach it.
func (n *Node) HTTPAddr() string { return n.cfg.HTTPAddr }

// AppliedIndex is the index of the last log entry the FSM has applied.
func (n *Node) AppliedIndex() uint64 { return n.appliedIndex() }

// Term is the current Raft term.
func (n *Node) Term() uint64 { return n.raft.CurrentTerm() }

// CommitIndex is the last log index known committed.
func (n *Node) CommitIndex() uint64 { return n.raft.CommitIndex() }

// Status reports this node's view of the cluster: roles, indexes and the
// configuration's servers. Each other server is asked what it has applied
// over its HTTP listener (concurrently, briefly): "reachable" means it
// answered this node now, last_contact is the time of that answer, and the
// index with the leader's gives its replication lag.
func (n *Node) Status() (Status, error) {
	leaderAddr, leaderID := n.raft.LeaderWithID()
	st := Status{
		ID: n.cfg.ID, Role: n.Role(), LeaderID: string(leaderID), LeaderAddr: string(leaderAddr),
		Term: n.raft.CurrentTerm(), CommitIndex: n.raft.CommitIndex(), AppliedIndex: n.appliedIndex(),
	}
	servers, err := n.configuration()
	if err != nil {
		return st, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	applied := n.appliedIndexes(ctx, servers, 0)
	answered := time.Now().UTC()
	st.Servers = make([]Server, len(servers))
	for i, s := range servers {
		srv := &st.Servers[i]
		*srv = Server{
			ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: s.Suffrage.String(),
			Leader: s.ID == leaderID,
		}
		srv.HTTPAddr, _ = n.httpAddrOf(string(s.ID))
		if s.ID == raft.ServerID(n.cfg.ID) {
			srv.Reachable, srv.LastContact = true, time.Now().UTC()
			srv.AppliedIndex = ptr(n.appliedIndex())
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

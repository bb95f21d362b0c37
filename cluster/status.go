package cluster

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// Server is one member of the Raft configuration as an operator sees it.
type Server struct {
	ID          string    `json:"id"`
	RaftAddr    string    `json:"raft_addr"`
	Suffrage    string    `json:"suffrage"`
	Leader      bool      `json:"leader"`
	Reachable   bool      `json:"reachable"`
	LastContact time.Time `json:"last_contact,omitzero"`
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

// AppliedIndex is the last log index applied to the FSM.
func (n *Node) AppliedIndex() uint64 { return n.raft.AppliedIndex() }

// Term is the current Raft term.
func (n *Node) Term() uint64 { return n.raft.CurrentTerm() }

// CommitIndex is the last log index known committed.
func (n *Node) CommitIndex() uint64 { return n.raft.CommitIndex() }

// Status reports this node's view of the cluster: roles, indexes and the
// configuration's servers. A server's reachability is known only to the
// leader; other nodes report the leader and themselves as reachable.
func (n *Node) Status() (Status, error) {
	leaderAddr, leaderID := n.raft.LeaderWithID()
	st := Status{
		ID: n.cfg.ID, Role: n.Role(), LeaderID: string(leaderID), LeaderAddr: string(leaderAddr),
		Term: n.raft.CurrentTerm(), CommitIndex: n.raft.CommitIndex(), AppliedIndex: n.raft.AppliedIndex(),
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return st, fmt.Errorf("read configuration: %w", err)
	}
	for _, s := range f.Configuration().Servers {
		srv := Server{
			ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: s.Suffrage.String(),
			Leader: s.ID == leaderID,
		}
		switch {
		case s.ID == raft.ServerID(n.cfg.ID):
			srv.Reachable, srv.LastContact = true, time.Now().UTC()
		case srv.Leader:
			srv.LastContact = n.raft.LastContact().UTC()
			srv.Reachable = time.Since(srv.LastContact) < 5*time.Second
		}
		st.Servers = append(st.Servers, srv)
	}
	return st, nil
}

// Backup writes a consistent copy of the whole state to w.
func (n *Node) Backup(w io.Writer) error {
	if err := n.fsm.WriteBackup(w); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

// Restore makes the whole cluster take the state in a backup. The backup is
// verified completely before anything changes; a corrupt one returns an
// error wrapping fsm.ErrCorruptSnapshot and leaves the cluster as it was.
func (n *Node) Restore(backup []byte) error {
	if _, err := fsm.ReadSnapshot(bytes.NewReader(backup)); err != nil {
		return err
	}
	if !n.IsLeader() {
		return ErrNoLeader
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: int64(len(backup))}
	if err := n.raft.Restore(meta, bytes.NewReader(backup), n.cfg.WriteTimeout); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

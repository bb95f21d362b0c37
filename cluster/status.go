package cluster

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
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
// configuration's servers. Each other server is probed at its HTTP health
// endpoint (concurrently, briefly), so "reachable" means reachable from
// this node now and last_contact is the time of that answer.
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
	st.Servers = make([]Server, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		srv := &st.Servers[i]
		*srv = Server{
			ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: s.Suffrage.String(),
			Leader: s.ID == leaderID,
		}
		srv.HTTPAddr, _ = n.httpAddrOf(s.ID)
		if s.ID == raft.ServerID(n.cfg.ID) {
			srv.Reachable, srv.LastContact = true, time.Now().UTC()
			continue
		}
		if srv.HTTPAddr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok := n.health(srv.HTTPAddr, 500*time.Millisecond); ok {
				srv.Reachable, srv.LastContact = true, time.Now().UTC()
			}
		}()
	}
	wg.Wait()
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
		return fmt.Errorf("restore: %w", raftError(err))
	}
	// The backup may come from another cluster and lack this leader's
	// address; recording it also gives every FSM a known applied index
	// again, which read-after-write waits on.
	if _, err := n.apply(fsm.EncodeServer(fsm.ServerCommand{ID: n.cfg.ID, HTTPAddr: n.cfg.HTTPAddr})); err != nil {
		return fmt.Errorf("restore: record leader address: %w", err)
	}
	return nil
}

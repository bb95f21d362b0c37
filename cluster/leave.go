package cluster

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
)

// Leaving is a server's own graceful exit (--leave-on-terminate): it
// announces the leave and is removed from the configuration, and rejoins
// when it starts again. Removing a server is the leader's side of it
// (membership.Membership.Leave); an operator's removal (RemoveServer) is
// for good (removed.go).

// handOffLeadership transfers leadership before a leader leaves, so the
// cluster does not wait for an election.
func (s *standing) handOffLeadership() {
	n := s.n
	if !n.IsLeader() || n.members.OtherVoters() == 0 {
		return
	}
	if err := n.members.TransferLeadership(); err != nil {
		n.log.Warn("leadership transfer before leaving failed", "err", err)
		return
	}
	n.log.Info("handed leadership over before leaving", "leader", n.Local().LeaderID)
}

// leave announces the leave over gossip and has the leader remove this
// node (directly when it still leads). The leader answers once the
// removal is committed; when it did not answer, leave waits, bounded by
// the write timeout, until the removal is visible here. The last voter
// stays, and a server an operator removed has nothing to leave.
func (s *standing) leave() {
	n := s.n
	if n.Removed() {
		return
	}
	if n.members.OtherVoters() == 0 {
		n.log.Info("last voter: staying in the configuration")
		return
	}
	if n.gossip != nil {
		if err := n.gossip.announceLeave(n.cfg.Writes.Timeout); err != nil {
			n.log.Warn("leaving gossip", "err", err)
		}
	}
	err := s.askRemoval()
	if err == nil {
		n.log.Info("left the cluster")
		return
	}
	n.log.Warn("asking the leader to remove this node", "err", err)
	if s.awaitLeft(n.cfg.Writes.Timeout) {
		n.log.Info("left the cluster")
		return
	}
	n.log.Warn("still in the Raft configuration after leaving; the leader will remove it when it sees the leave")
}

// awaitLeft waits until this node's configuration no longer lists it, or
// timeout passes, and reports which. Raft has no event for a configuration
// entry a follower appends (its observations of peers are the leader's),
// but a leader stops sending to a server it removed: that server's
// heartbeat times out and Raft reports it without a leader (a leader
// observation, leaderWatch.changed); an entry it learns is committed is
// announced by the applied broadcast. Each wakes a look.
func (s *standing) awaitLeft(timeout time.Duration) bool {
	n := s.n
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		applied := n.machine.applied.wait()
		leaders := n.leadership.changed.wait()
		if servers, err := configuration(n.raft); err == nil && !hasServer(servers, raft.ServerID(n.cfg.ID)) {
			return true
		}
		select {
		case <-deadline.C:
			return false
		case <-applied:
		case <-leaders:
		}
	}
}

// askRemoval has the leader remove this node, or removes it directly when
// this node still leads, retrying until the write timeout.
func (s *standing) askRemoval() error {
	n := s.n
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Writes.Timeout)
	defer cancel()
	body, err := json.Marshal(wire.LeaveRequest{V: wire.Version, ID: n.cfg.ID})
	if err != nil {
		return err
	}
	return n.leadership.withLeader(ctx, 100*time.Millisecond, func(to leaderTarget) (bool, error) {
		if to.self {
			err := n.members.Leave(n.cfg.ID)
			return err == nil, err
		}
		var answer wire.Ack
		err := n.peers.call(ctx, to.addr, fasthttp.MethodPost, wire.PathLeave, body, &answer)
		return err == nil, err
	})
}

// hasServer reports whether id is one of servers.
func hasServer(servers []raft.Server, id raft.ServerID) bool {
	return slices.ContainsFunc(servers, func(s raft.Server) bool { return s.ID == id })
}

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
// announces the leave and is removed from the configuration. Removing a
// server (RemoveServer) is the leader's side of it, also open to operators.

// handOffLeadership transfers leadership before a leader leaves, so the
// cluster does not wait for an election.
func (n *Node) handOffLeadership() {
	if !n.IsLeader() || n.otherVoters() == 0 {
		return
	}
	if err := n.TransferLeadership(); err != nil {
		n.log.Warn("leadership transfer before leaving failed", "err", err)
		return
	}
	n.log.Info("handed leadership over before leaving", "leader", n.Local().LeaderID)
}

// leave announces the leave over gossip and has the leader remove this
// node (directly when it still leads). It waits, bounded by the write
// timeout, until the removal is visible here. The last voter stays.
func (n *Node) leave() {
	if n.otherVoters() == 0 {
		n.log.Info("last voter: staying in the configuration")
		return
	}
	if n.gossip != nil {
		if err := n.gossip.announceLeave(n.cfg.WriteTimeout); err != nil {
			n.log.Warn("leaving gossip", "err", err)
		}
	}
	if err := n.askRemoval(); err != nil {
		n.log.Warn("asking the leader to remove this node", "err", err)
	}
	// Raft reports no event for a configuration change on a follower; this
	// runs once, at shutdown.
	deadline := time.Now().Add(n.cfg.WriteTimeout)
	for time.Now().Before(deadline) {
		if servers, err := n.configuration(); err == nil && !hasServer(servers, raft.ServerID(n.cfg.ID)) {
			n.log.Info("left the cluster")
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.log.Warn("still in the Raft configuration after leaving; the leader will remove it when it sees the leave")
}

// askRemoval has the leader remove this node, or removes it directly when
// this node still leads, retrying until the write timeout.
func (n *Node) askRemoval() error {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.WriteTimeout)
	defer cancel()
	body, err := json.Marshal(wire.LeaveRequest{V: wire.Version, ID: n.cfg.ID})
	if err != nil {
		return err
	}
	return n.leadership.withLeader(ctx, 100*time.Millisecond, func(to leaderTarget) (bool, error) {
		if to.self {
			err := n.RemoveServer(n.cfg.ID, "")
			return err == nil, err
		}
		var answer wire.Ack
		err := n.peers.call(ctx, to.addr, fasthttp.MethodPost, wire.PathLeave, body, &answer)
		return err == nil, err
	})
}

// otherVoters counts the voters besides this node: none when the
// configuration cannot be read, so that nothing waits for a voter that
// may not exist.
func (n *Node) otherVoters() int {
	servers, err := n.configuration()
	if err != nil {
		return 0
	}
	others := 0
	for _, s := range servers {
		if s.Suffrage == raft.Voter && s.ID != raft.ServerID(n.cfg.ID) {
			others++
		}
	}
	return others
}

// hasServer reports whether id is one of servers.
func hasServer(servers []raft.Server, id raft.ServerID) bool {
	return slices.ContainsFunc(servers, func(s raft.Server) bool { return s.ID == id })
}

package cluster

import "github.com/hashicorp/raft"

// Why a node cannot serve its cluster's links, as /health reports it.
const (
	NotReadyShuttingDown = "shutting_down" // Close has begun or Raft has stopped
	NotReadyNotMember    = "not_member"    // not in the Raft configuration (yet): waiting to be added or to bootstrap
	NotReadyNoLeader     = "no_leader"     // no leader known: an election, or cut off from the majority
	NotReadyCatchingUp   = "catching_up"   // no cluster state applied yet, or the leader confirmed entries not applied here
)

// NotReady says why this node cannot serve this cluster's links, or ""
// when it can. A node can serve them when it is in the latest Raft
// configuration (a voter or not), knows a leader (or is it), and has
// applied the cluster's state: a node outside the configuration or without
// a cluster id has no links at all and would answer 404 to every code.
// Checks run from the most to the least fundamental, so the reason names
// what must change first.
func (n *Node) NotReady() string {
	select {
	case <-n.closing:
		return NotReadyShuttingDown
	default:
	}
	if n.raft.State() == raft.Shutdown {
		return NotReadyShuttingDown
	}
	// An unreadable configuration (Raft shutting down) counts as not a
	// member.
	if servers, err := n.configuration(); err != nil || !hasServer(servers, raft.ServerID(n.cfg.ID)) {
		return NotReadyNotMember
	}
	if _, id := n.raft.LeaderWithID(); id == "" {
		return NotReadyNoLeader
	}
	if n.fsm.ClusterID() == "" || n.Behind() {
		return NotReadyCatchingUp
	}
	return ""
}

// Live reports whether Raft is still running: false only once it has shut
// down, which a process that serves HTTP never recovers from.
func (n *Node) Live() bool { return n.raft.State() != raft.Shutdown }

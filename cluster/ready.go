package cluster

import (
	"errors"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/cluster/membership"
)

// Why a node must get no traffic (/health), or cannot take a create now
// (/health/writes, which also gives every reason /health gives).
const (
	NotReadyShuttingDown = "shutting_down" // Close has begun or Raft has stopped (or the server drains, see httpd)
	NotReadyRestoring    = "restoring"     // started with --restore-from and without the cluster's state: awaiting the restore at start
	NotReadyRemoved      = "removed"       // an operator removed it from the cluster: it takes no further part (removed.go)
	NotReadyNotMember    = "not_member"    // not in the Raft configuration: waiting to be added or to bootstrap
	NotReadyStarting     = "starting"      // a member without the cluster's state yet: nothing to serve
	NotReadyCatchingUp   = "catching_up"   // a learner more than promoteMaxLag entries behind the leader
	NotReadyNoLeader     = "no_leader"     // writes only: no leader known (an election, or cut off from the majority)
)

// readiness is what a node knows of itself that decides whether it takes
// traffic and writes.
type readiness struct {
	closing, restoring, removed bool
	// member: in the latest Raft configuration, as a voter or not.
	member bool
	// hasState: the cluster's state is applied here (it has a cluster id).
	hasState bool
	// learner: a non-voter that joined to vote, not yet promoted.
	learner bool
	// lag is how many entries this node is known to trail the leader.
	lag         uint64
	leaderKnown bool
}

// notReady is why the node must get no traffic, "" when it serves
// redirects from its own state. A leader is not needed: redirects are
// served from the local state, and a miss or a stale hit is checked with
// the leader when there is one, so a node cut off from the majority
// still answers every code it holds. A voter or a read replica that is
// behind serves too (its misses ask the leader); a learner far behind is
// new and holds little of the state. Checks run from the most to the
// least fundamental, so the reason names what must change first.
func (r readiness) notReady() string {
	switch {
	case r.closing:
		return NotReadyShuttingDown
	case r.restoring:
		return NotReadyRestoring
	case r.removed:
		return NotReadyRemoved
	case !r.member:
		return NotReadyNotMember
	case !r.hasState:
		return NotReadyStarting
	case r.learner && r.lag > membership.PromoteMaxLag:
		return NotReadyCatchingUp
	}
	return ""
}

// writesUnavailable is why a create sent to this node now would be
// refused, "" when it would be accepted: a node that must get no traffic
// takes no creates either, and a create needs a leader to commit it.
func (r readiness) writesUnavailable() string {
	if why := r.notReady(); why != "" {
		return why
	}
	if !r.leaderKnown {
		return NotReadyNoLeader
	}
	return ""
}

// NotReady says why this node must get no traffic, or "" when it serves
// redirects from its own state, with or without a leader (readiness, which
// /health reports).
func (n *Node) NotReady() string { return readinessOf(n).notReady() }

// WritesUnavailable says why a create through this node would be refused
// now, or "" when it would be accepted (/health/writes).
func (n *Node) WritesUnavailable() string { return readinessOf(n).writesUnavailable() }

// readiness gathers what NotReady and WritesUnavailable decide from; each
// read is an atomic load or a copy of Raft's latest configuration, cheap
// enough for probes every second.
func readinessOf(n *Node) readiness {
	var r readiness
	// A removed server has shut its Raft down on purpose (removed.go): it
	// is out of the cluster, not stopping.
	removed := n.Removed()
	r.removed = removed
	r.closing = isClosed(n.closing) || raftState(n) == raft.Shutdown && !removed
	// An unreadable configuration (Raft shutting down) counts as not a
	// member.
	if servers, err := configuration(n.raft); err == nil && !removed {
		for _, s := range servers {
			if s.ID == raft.ServerID(n.cfg.ID) {
				r.member = true
				r.learner = s.Suffrage != raft.Voter && !n.standing.nonvoter.Load()
			}
		}
	}
	r.hasState = n.fsm.ClusterID() != ""
	// With --restore-from, a node without the cluster's state waits for
	// the restore at start (or, joining a cluster that has state, for it).
	r.restoring = n.cfg.Backups.RestoreFrom != "" && !r.hasState
	// What the leader said it applied (a miss, a delete's visibility
	// wait), or the commit index Raft heard of: whichever is further.
	applied := n.machine.appliedIndex()
	if ahead := max(n.machine.leaderIndex.Load(), n.raft.CommitIndex()); ahead > applied {
		r.lag = ahead - applied
	}
	_, id := n.raft.LeaderWithID()
	r.leaderKnown = id != ""
	return r
}

// Drain prepares the node for a stop while it still serves: a leader
// hands leadership to another voter, so the cluster elects its next leader
// while this one still answers, rather than only noticing it is gone
// after an election timeout. A follower, or a leader alone, has nothing to
// hand over.
func (n *Node) Drain() {
	if !n.IsLeader() {
		return
	}
	switch err := n.members.TransferLeadership(); {
	case err == nil:
		n.log.Info("handed leadership over before stopping", "leader", n.Local().LeaderID)
	case errors.Is(err, ErrNoLeader), errors.Is(err, ErrNoTransferTarget):
		// Lost leadership meanwhile, or no other voter: nothing to do.
	default:
		n.log.Warn("leadership transfer before stopping failed; the cluster elects once this node is gone", "err", err)
	}
}

// Live reports whether Raft is still running: false only once it has shut
// down, which a process that serves HTTP never recovers from. A removed
// server shut its Raft down on purpose and is alive until it closes:
// restarting it would not bring it back.
func (n *Node) Live() bool {
	if n.Removed() {
		return !isClosed(n.closing)
	}
	return raftState(n) != raft.Shutdown
}

// isClosed reports whether closing is closed (for a node's: whether Close
// has begun).
func isClosed(closing <-chan struct{}) bool {
	select {
	case <-closing:
		return true
	default:
		return false
	}
}

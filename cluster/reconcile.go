package cluster

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// runDiscovery keeps this node's gossip metadata current and drives
// bootstrap-expect until a cluster exists. It wakes on gossip changes
// (bootstrap), on applied entries while the metadata still lacks Raft
// state or the cluster id, and on every restore (which may bring another
// cluster's id). Membership itself is the leader's: see leaderLoop.
func (n *Node) runDiscovery(bootstrapping bool) {
	if n.gossip == nil {
		return // a data dir removed from its cluster starts no gossip (removed.go)
	}
	var retry <-chan time.Time
	for {
		members := n.gossip.changed.wait()
		restored := n.machine.restored.wait()
		var applied <-chan struct{}
		if !n.refreshMeta() {
			applied = n.machine.applied.wait()
		}
		if bootstrapping {
			bootstrapping, retry = n.tryBootstrap()
		}
		select {
		case <-n.closing:
			return
		case <-members:
		case <-restored:
		case <-applied:
		case <-retry:
		}
	}
}

// refreshMeta advertises whether this node has Raft state and which
// cluster it belongs to, and reports whether both are known.
func (n *Node) refreshMeta() bool {
	cluster := n.fsm.ClusterID()
	hasState := n.raft.LastIndex() > 0
	n.gossip.updateMeta(func(m *memberMeta) {
		m.HasState = m.HasState || hasState
		m.Cluster = cluster
	})
	return hasState && cluster != ""
}

// tryBootstrap implements --bootstrap-expect the way Consul does: bootstrap
// only a node without Raft state, only when exactly the expected number of
// servers have met over gossip, all agree on the expected number, and none
// of them already belongs to a cluster. Read replicas are not counted (nor
// does a replica ever run this). Every one of them then bootstraps
// the same configuration (sorted by id), so exactly one cluster forms.
// It reports whether it still has to bootstrap, and when to try again
// after a failure; otherwise the next gossip change decides.
func (n *Node) tryBootstrap() (pending bool, retry <-chan time.Time) {
	if n.raft.LastIndex() > 0 {
		return false, nil // a leader has added us meanwhile
	}
	members := n.gossip.members()
	servers := make([]raft.Server, 0, len(members))
	for _, m := range members {
		switch {
		case m.HasState:
			n.log.Info("a cluster already exists; waiting for its leader to add this node", "member", m.ID)
			return false, nil
		case m.Replica:
			// A replica waits for a cluster to add it: it is neither one of
			// the expected servers nor asked to agree on their number.
			continue
		case m.Expect != n.cfg.BootstrapExpect:
			n.log.Error("members disagree on --bootstrap-expect; not bootstrapping",
				"member", m.ID, "theirs", m.Expect, "ours", n.cfg.BootstrapExpect)
			return true, nil
		}
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.RaftAddr)})
	}
	if len(servers) != n.cfg.BootstrapExpect {
		return true, nil
	}
	slices.SortFunc(servers, func(a, b raft.Server) int { return cmp.Compare(a.ID, b.ID) })
	for i := 1; i < len(servers); i++ {
		if servers[i].ID == servers[i-1].ID {
			n.log.Error("two members share one id; not bootstrapping", "id", servers[i].ID)
			return true, nil
		}
	}
	err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		n.log.Error("bootstrap failed; retrying", "err", err)
		return true, time.After(time.Second)
	}
	n.gossip.updateMeta(func(m *memberMeta) { m.HasState = true })
	n.log.Info("bootstrapped cluster", "servers", len(servers))
	return false, nil
}

// reconcile brings the Raft configuration in line with gossip: live members
// are added, as learners (promoted to voters once caught up, learners.go)
// or, for read replicas, as non-voters, except servers an operator removed
// (removed.go), whose removal it finishes if an earlier leader recorded it
// but did not change the configuration. Leader only.
func (n *Node) reconcile() {
	servers, err := n.configuration()
	if err != nil {
		n.log.Warn("reconcile: read configuration", "err", err)
		return
	}
	byID := make(map[raft.ServerID]raft.Server, len(servers))
	for _, s := range servers {
		byID[s.ID] = s
	}
	cluster := n.fsm.ClusterID()
	alive := map[string]bool{}
	for _, m := range n.gossip.members() {
		alive[m.ID] = true
		if m.Leaving || n.gossip.wasRemoved(m) || n.keepsOut(m) {
			continue
		}
		if m.Cluster != "" && cluster != "" && m.Cluster != cluster {
			n.log.Warn("gossip member belongs to another cluster; not adding it", "member", m.ID)
			continue
		}
		if s, ok := byID[raft.ServerID(m.ID)]; ok && s.Address == raft.ServerAddress(m.RaftAddr) {
			n.recordMemberHTTPAddr(m)
			continue
		}
		if taken := addressHolder(servers, m.RaftAddr); taken != "" && taken != raft.ServerID(m.ID) {
			// Raft refuses two servers at one address. When the holder
			// itself now advertises another address, the address is stale:
			// the holder's update frees it, on this pass or a later one
			// (servers that swapped addresses stay as they are; the
			// transport dials them where gossip says, see addresses.go).
			if moved, ok := n.addrs.claimed(taken); ok && moved != m.RaftAddr {
				n.log.Debug("reconcile: a server's new raft address is still another server's old one; waiting for that one to move", "member", m.ID, "holder", taken)
			} else {
				n.log.Warn("gossip member advertises another server's raft address; not adding it", "member", m.ID, "holder", taken)
			}
			continue
		}
		// Gossip still lists a process that stopped moments ago (it is
		// "suspect" for a few seconds), such as a server another leader
		// has just removed: add only a server that answers.
		if err := reachable(n.layer, m.RaftAddr, time.Second); err != nil {
			n.log.Debug("reconcile: gossip member does not answer on its raft address; not adding it", "member", m.ID, "err", err)
			continue
		}
		// A new server's suffrage is what it asks for; a known server
		// whose address changed keeps its own, so a promoted replica stays
		// a voter even though it still advertises --read-replica. For a
		// known id, AddVoter and AddNonvoter replace the address the
		// configuration holds (hashicorp/raft: same id, new address).
		nonVoter := m.Replica
		s, known := byID[raft.ServerID(m.ID)]
		if known {
			nonVoter = s.Suffrage != raft.Voter
			n.log.Info("server moved: updating its raft address", "id", m.ID, "from", s.Address, "to", m.RaftAddr)
		}
		add := n.raftAddServer
		if !known {
			add = n.joinServer
		}
		if err := add(m.ID, m.RaftAddr, nonVoter); err != nil {
			n.log.Warn("reconcile: add server", "member", m.ID, "non_voter", nonVoter, "err", err)
			continue
		}
		n.recordMemberHTTPAddr(m)
		if !known {
			n.noteMembership(fsm.AuditMemberJoin, m.ID, "")
		}
	}
	n.finishRemovals(servers)
	for _, id := range n.gossip.takeLeft() {
		if _, ok := byID[raft.ServerID(id)]; !ok || alive[id] || id == n.cfg.ID {
			continue
		}
		if err := n.removeServer(id, "", false); err != nil {
			n.log.Warn("reconcile: remove server that left", "member", id, "err", err)
		}
	}
}

// keepsOut reports whether gossip member m is a server an operator
// removed, which no leader adds back whatever data dir it runs on: only an
// operator's join brings it back (AddServer). Such a member is told of its
// removal when it runs on the data dir that was removed (it may have been
// down, or cut off, as the entries that removed it went out); when the
// leader that removed it could not learn its data dir, a member of that id
// that has Raft state is the one removed, and the record is completed with
// its incarnation first (through the log, so that only a current leader's
// view decides).
func (n *Node) keepsOut(m memberMeta) bool {
	inc, removed := n.fsm.Removed(m.ID)
	if !removed || m.ID == n.cfg.ID {
		return false
	}
	if n.gossip.firstRefusal(m.ID, m.Inc) {
		n.log.Info("reconcile: an operator removed this server; not adding it back (to bring it back, join it with an empty data dir)",
			"member", m.ID, "incarnation", m.Inc)
	}
	switch {
	case m.Inc == "":
	case inc == "" && m.HasState:
		if err := n.applyOwn(fsm.ServerRemovalCommand{ID: m.ID, Incarnation: m.Inc}, "removal record"); err != nil {
			n.log.Warn("reconcile: completing a removal record", "member", m.ID, "err", err)
		}
	case inc == m.Inc:
		if err := n.peers.tellRemoved(m.ID, m.Inc, m.RaftAddr); err != nil {
			n.log.Debug("reconcile: telling a removed server", "member", m.ID, "err", err)
		} else {
			n.log.Info("reconcile: told a removed server that still runs that it was removed", "member", m.ID)
		}
	}
	return true
}

// finishRemovals removes the servers of the configuration (servers, read
// before the records) that a removal record names: a leader that recorded
// a removal lost leadership before it changed the configuration.
func (n *Node) finishRemovals(servers []raft.Server) {
	for _, s := range servers {
		id := string(s.ID)
		if _, removed := n.fsm.Removed(id); !removed || id == n.cfg.ID {
			continue
		}
		switch err := n.removeServer(id, "", false); {
		case err == nil:
			n.log.Info("reconcile: finished the removal of a server an earlier leader recorded", "id", id)
		case errors.Is(err, ErrUnknownServer):
			// The removal that wrote the record has finished meanwhile.
		default:
			n.log.Warn("reconcile: finishing a removal", "id", id, "err", err)
		}
	}
}

func (n *Node) recordMemberHTTPAddr(m memberMeta) {
	if err := n.recordHTTPAddr(m.ID, m.HTTPAddr); err != nil {
		n.log.Warn("reconcile: record HTTP address", "member", m.ID, "err", err)
	}
}

// addressHolder returns the id of the server at addr, if any.
func addressHolder(servers []raft.Server, addr string) raft.ServerID {
	for _, s := range servers {
		if s.Address == raft.ServerAddress(addr) {
			return s.ID
		}
	}
	return ""
}

package membership

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// Reconcile brings the Raft configuration in line with gossip: live
// members are added, as learners (promoted to voters once caught up,
// learners.go) or, for read replicas, as non-voters, except servers an
// operator removed (removed.go), whose removal it finishes if an earlier
// leader recorded it but did not change the configuration. Leader only,
// with gossip.
func (m *Membership) Reconcile() {
	servers, err := m.Configuration()
	if err != nil {
		m.log.Warn("reconcile: read configuration", "err", err)
		return
	}
	byID := make(map[raft.ServerID]raft.Server, len(servers))
	for _, s := range servers {
		byID[s.ID] = s
	}
	cluster := m.state.ClusterID()
	alive := map[string]bool{}
	for _, g := range m.gossip.Members() {
		alive[g.ID] = true
		m.reconcileMember(g, cluster, servers, byID)
	}
	m.finishRemovals(servers)
	for _, id := range m.gossip.TakeLeft() {
		if _, ok := byID[raft.ServerID(id)]; !ok || alive[id] || id == m.id {
			continue
		}
		if err := m.removeServer(id, "", false); err != nil {
			m.log.Warn("reconcile: remove server that left", "member", id, "err", err)
		}
	}
}

// reconcileMember adds live member g, or updates its address, unless it
// leaves, was removed, belongs to another cluster, advertises another
// server's address or does not answer. cluster is this cluster's id,
// servers the configuration, byID the same by id.
func (m *Membership) reconcileMember(g Member, cluster string, servers []raft.Server, byID map[raft.ServerID]raft.Server) {
	// keepsOut first: it tells a removed server that still runs, which a
	// removal by this very leader (WasRemoved) may have cut off before the
	// server learnt that the record's entry was committed.
	if g.Leaving || m.keepsOut(g) || m.gossip.WasRemoved(g) {
		return
	}
	if g.Cluster != "" && cluster != "" && g.Cluster != cluster {
		m.log.Warn("gossip member belongs to another cluster; not adding it", "member", g.ID)
		return
	}
	if s, ok := byID[raft.ServerID(g.ID)]; ok && s.Address == raft.ServerAddress(g.RaftAddr) {
		m.recordMemberHTTPAddr(g)
		return
	}
	if taken := addressHolder(servers, g.RaftAddr); taken != "" && taken != raft.ServerID(g.ID) {
		// Raft refuses two servers at one address. When the holder
		// itself now advertises another address, the address is stale:
		// the holder's update frees it, on this pass or a later one
		// (servers that swapped addresses stay as they are; the
		// transport dials them where gossip says, see addresses.go in
		// package cluster).
		if moved, ok := m.peers.Claimed(taken); ok && moved != g.RaftAddr {
			m.log.Debug("reconcile: a server's new raft address is still another server's old one; waiting for that one to move", "member", g.ID, "holder", taken)
		} else {
			m.log.Warn("gossip member advertises another server's raft address; not adding it", "member", g.ID, "holder", taken)
		}
		return
	}
	// Gossip still lists a process that stopped moments ago (it is
	// "suspect" for a few seconds), such as a server another leader
	// has just removed: add only a server that answers.
	if err := reachable(m.peers, g.RaftAddr, time.Second); err != nil {
		m.log.Debug("reconcile: gossip member does not answer on its raft address; not adding it", "member", g.ID, "err", err)
		return
	}
	// A new server's suffrage is what it asks for; a known server
	// whose address changed keeps its own, so a promoted replica stays
	// a voter even though it still advertises --read-replica. For a
	// known id, AddVoter and AddNonvoter replace the address the
	// configuration holds (hashicorp/raft: same id, new address).
	nonVoter := g.Replica
	s, known := byID[raft.ServerID(g.ID)]
	if known {
		nonVoter = s.Suffrage != raft.Voter
		m.log.Info("server moved: updating its raft address", "id", g.ID, "from", s.Address, "to", g.RaftAddr)
	}
	add := m.raftAddServer
	if !known {
		add = m.joinServer
	}
	if err := add(g.ID, g.RaftAddr, nonVoter); err != nil {
		m.log.Warn("reconcile: add server", "member", g.ID, "non_voter", nonVoter, "err", err)
		return
	}
	m.recordMemberHTTPAddr(g)
	if !known {
		m.noteMembership(fsm.AuditMemberJoin, g.ID, "")
	}
}

// keepsOut reports whether gossip member g is a server an operator
// removed, which no leader adds back whatever data dir it runs on: only an
// operator's join brings it back (AddServer). Such a member is told of its
// removal when it runs on the data dir that was removed (it may have been
// down, or cut off, as the entries that removed it went out); when the
// leader that removed it could not learn its data dir, a member of that id
// that has Raft state is the one removed, and the record is completed with
// its incarnation first (through the log, so that only a current leader's
// view decides).
func (m *Membership) keepsOut(g Member) bool {
	inc, removed := m.state.Removed(g.ID)
	if !removed || g.ID == m.id {
		return false
	}
	if m.gossip.FirstRefusal(g.ID, g.Inc) {
		m.log.Info("reconcile: an operator removed this server; not adding it back (to bring it back, join it with an empty data dir)",
			"member", g.ID, "incarnation", g.Inc)
	}
	switch {
	case g.Inc == "":
	case inc == "" && g.HasState:
		if err := m.proposer.ApplyOwn(fsm.ServerRemovalCommand{ID: g.ID, Incarnation: g.Inc}, "removal record"); err != nil {
			m.log.Warn("reconcile: completing a removal record", "member", g.ID, "err", err)
		}
	case inc == g.Inc:
		if err := m.peers.TellRemoved(g.ID, g.Inc, g.RaftAddr); err != nil {
			m.log.Debug("reconcile: telling a removed server", "member", g.ID, "err", err)
		} else {
			m.log.Info("reconcile: told a removed server that still runs that it was removed", "member", g.ID)
		}
	}
	return true
}

// finishRemovals removes the servers of the configuration (servers, read
// before the records) that a removal record names: a leader that recorded
// a removal lost leadership before it changed the configuration.
func (m *Membership) finishRemovals(servers []raft.Server) {
	for _, s := range servers {
		id := string(s.ID)
		if _, removed := m.state.Removed(id); !removed || id == m.id {
			continue
		}
		switch err := m.removeServer(id, "", false); {
		case err == nil:
			m.log.Info("reconcile: finished the removal of a server an earlier leader recorded", "id", id)
		case errors.Is(err, ErrUnknownServer):
			// The removal that wrote the record has finished meanwhile.
		default:
			m.log.Warn("reconcile: finishing a removal", "id", id, "err", err)
		}
	}
}

func (m *Membership) recordMemberHTTPAddr(g Member) {
	if err := m.RecordHTTPAddr(g.ID, g.HTTPAddr); err != nil {
		m.log.Warn("reconcile: record HTTP address", "member", g.ID, "err", err)
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

package cluster

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

const reconcileInterval = 2 * time.Second

// runMembership keeps this node's gossip metadata current and, while this
// node leads, makes the Raft configuration follow gossip: members that
// appear are added as voters, members that left gracefully are removed.
// Members that merely die are never removed: a partition must not shrink
// the cluster. It also drives bootstrap-expect until a cluster exists.
func (n *Node) runMembership(bootstrapping bool) {
	defer n.wg.Done()
	t := time.NewTicker(reconcileInterval)
	defer t.Stop()
	for {
		if bootstrapping {
			bootstrapping = !n.tryBootstrap()
		}
		n.gossip.updateMeta(func(m *memberMeta) {
			m.HasState = m.HasState || n.raft.LastIndex() > 0
			m.Cluster = n.fsm.ClusterID()
		})
		if n.IsLeader() {
			n.reconcile()
		} else {
			n.gossip.takeLeft() // only a leader acts on leaves; drop stale ones
		}
		wait := t.C
		if bootstrapping {
			wait = time.After(250 * time.Millisecond)
		}
		select {
		case <-n.closing:
			return
		case <-n.gossip.events:
		case <-wait:
		}
	}
}

// tryBootstrap implements --bootstrap-expect the way Consul does: bootstrap
// only a node without Raft state, only when exactly the expected number of
// servers have met over gossip, all agree on the expected number, and none
// of them already belongs to a cluster. Every one of them then bootstraps
// the same configuration (sorted by id), so exactly one cluster forms.
// It reports true once there is nothing left to do.
func (n *Node) tryBootstrap() bool {
	if n.raft.LastIndex() > 0 {
		return true // a leader has added us meanwhile
	}
	members := n.gossip.members()
	servers := make([]raft.Server, 0, len(members))
	for _, m := range members {
		switch {
		case m.HasState:
			n.log.Info("a cluster already exists; waiting for its leader to add this node", "member", m.ID)
			return true
		case m.Expect != n.cfg.BootstrapExpect:
			n.log.Error("members disagree on --bootstrap-expect; not bootstrapping",
				"member", m.ID, "theirs", m.Expect, "ours", n.cfg.BootstrapExpect)
			return false
		}
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.RaftAddr)})
	}
	if len(servers) != n.cfg.BootstrapExpect {
		return false
	}
	slices.SortFunc(servers, func(a, b raft.Server) int { return cmp.Compare(a.ID, b.ID) })
	for i := 1; i < len(servers); i++ {
		if servers[i].ID == servers[i-1].ID {
			n.log.Error("two members share one id; not bootstrapping", "id", servers[i].ID)
			return false
		}
	}
	err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		n.log.Error("bootstrap failed", "err", err)
		return false
	}
	n.gossip.updateMeta(func(m *memberMeta) { m.HasState = true })
	n.log.Info("bootstrapped cluster", "servers", len(servers))
	return true
}

// reconcile brings the Raft configuration in line with gossip. Leader only.
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
		if m.Leaving || n.gossip.departedMember(m) {
			continue
		}
		if m.Cluster != "" && cluster != "" && m.Cluster != cluster {
			n.log.Warn("gossip member belongs to another cluster; not adding it", "member", m.ID)
			continue
		}
		if s, ok := byID[raft.ServerID(m.ID)]; ok && s.Address == raft.ServerAddress(m.RaftAddr) {
			n.recordHTTPAddr(m.ID, m.HTTPAddr)
			continue
		}
		if taken := addressHolder(servers, m.RaftAddr); taken != "" && taken != raft.ServerID(m.ID) {
			n.log.Warn("gossip member advertises another server's raft address; not adding it", "member", m.ID, "holder", taken)
			continue
		}
		if err := n.addVoter(m.ID, m.RaftAddr); err != nil {
			n.log.Warn("reconcile: add voter", "member", m.ID, "err", err)
			continue
		}
		n.recordHTTPAddr(m.ID, m.HTTPAddr)
	}
	for _, id := range n.gossip.takeLeft() {
		if _, ok := byID[raft.ServerID(id)]; !ok || alive[id] || id == n.cfg.ID {
			continue
		}
		if err := n.Leave(id); err != nil {
			n.log.Warn("reconcile: remove server that left", "member", id, "err", err)
		}
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

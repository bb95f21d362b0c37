package cluster

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// runDiscovery keeps this node's gossip metadata current and drives
// bootstrap-expect until a cluster exists. It wakes on gossip changes
// (bootstrap), on applied entries while the metadata still lacks Raft
// state or the cluster id, and on every restore (which may bring another
// cluster's id). Membership itself is the leader's: see leaderLoop.
func (g *gossip) runDiscovery(bootstrapping bool) {
	n := g.n
	var retry <-chan time.Time
	for {
		members := g.changed.wait()
		restored := n.machine.restored.wait()
		var applied <-chan struct{}
		if !g.refreshMeta() {
			applied = n.machine.applied.wait()
		}
		if bootstrapping {
			bootstrapping, retry = g.tryBootstrap()
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
func (g *gossip) refreshMeta() bool {
	n := g.n
	cluster := n.fsm.ClusterID()
	hasState := n.raft.LastIndex() > 0
	g.updateMeta(func(m *memberMeta) {
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
func (g *gossip) tryBootstrap() (pending bool, retry <-chan time.Time) {
	n := g.n
	if n.raft.LastIndex() > 0 {
		return false, nil // a leader has added us meanwhile
	}
	members := g.members()
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
		case m.Expect != n.cfg.Discovery.BootstrapExpect:
			n.log.Error("members disagree on --bootstrap-expect; not bootstrapping",
				"member", m.ID, "theirs", m.Expect, "ours", n.cfg.Discovery.BootstrapExpect)
			return true, nil
		}
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.RaftAddr)})
	}
	if len(servers) != n.cfg.Discovery.BootstrapExpect {
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
	g.updateMeta(func(m *memberMeta) { m.HasState = true })
	n.log.Info("bootstrapped cluster", "servers", len(servers))
	return false, nil
}

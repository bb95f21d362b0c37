package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/cluster/membership"
	"github.com/linkraft/linkraft/fsm"
)

// memberMeta is what a node tells the others about itself over gossip
// (membership.Member: membership reads it).
type memberMeta = membership.Member

// gossip is this node's memberlist membership and what it has learnt.
type gossip struct {
	n       *Node
	list    *memberlist.Memberlist
	changed broadcast // a member joined, left, died or changed its metadata
	seeds   *seedResolver
	// addr is this member's advertised gossip address, read once at start:
	// memberlist's LocalNode points into state that UpdateNode rewrites,
	// so reading it later races with a metadata change.
	addr string

	mu      sync.Mutex
	left    map[string]struct{} // ids of members that announced their leave
	removed map[string]string   // id → boot of servers removed while running
	// refused is, by id, the incarnation of a gossip member a removal
	// record last kept out: logged once each.
	refused map[string]string
	meta    memberMeta // what NodeMeta returns
	// live holds a copy of every live member by name, as the event
	// delegate reports them: memberlist's Members returns pointers into its
	// own state, which it rewrites under its lock when a member's metadata
	// changes, so reading what it returns races with gossip.
	live map[string]memberlist.Node
	// gone holds, by member name, the members memberlist reported gone
	// (for linkraft_gossip_members): memberlist forgets a dead member
	// after a while and never says that a member is suspected.
	gone map[string]goneMember
}

// States of a gossip member as linkraft_gossip_members reports them.
const (
	memberAlive = "alive"
	memberDead  = "dead"
	memberLeft  = "left"
)

// goneMember is a member that died or left, and when.
type goneMember struct {
	state string // memberDead or memberLeft
	at    time.Time
}

// goneRetention is how long a member that is gone and not a server of the
// Raft configuration still counts as dead or left; a server of the
// configuration counts for as long as it is gone.
const goneRetention = 5 * time.Minute

// startGossip creates n's memberlist and starts joining the seeds.
func startGossip(n *Node, hasState bool) error {
	host, portStr, err := net.SplitHostPort(n.cfg.GossipAddr)
	if err != nil {
		return fmt.Errorf("gossip address %q: %w", n.cfg.GossipAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("gossip port %q: %w", portStr, err)
	}
	g := &gossip{
		n:       n,
		left:    map[string]struct{}{},
		removed: map[string]string{},
		refused: map[string]string{},
		gone:    map[string]goneMember{},
		live:    map[string]memberlist.Node{},
		meta: memberMeta{
			ID: n.cfg.ID, RaftAddr: string(n.transport.LocalAddr()), HTTPAddr: n.cfg.HTTPAddr,
			Expect: n.cfg.Discovery.BootstrapExpect, HasState: hasState, Cluster: n.fsm.ClusterID(),
			Replica: n.standing.nonvoter.Load(), Boot: randomHex(8), Level: fsm.EntryLevel, Inc: n.incarnation,
		},
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = n.cfg.ID
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertisePort = port
	if adv := advertiseHost(n.cfg.Advertise); adv != "" {
		ip, err := advertiseIP(adv)
		if err != nil {
			return err
		}
		mc.AdvertiseAddr = ip
	}
	mc.Delegate = g
	mc.Events = g
	// A node that comes back at another address (a recreated pod) keeps
	// its name, its id. memberlist refuses a known name at a new address
	// unless the old entry has left or has been dead this long; its default,
	// 0, means never, until the dead entry is forgotten some 30 s or more
	// later. Any positive time lets the new address in once the old one is
	// declared dead, which already took failed probes from every member.
	mc.DeadNodeReclaimTime = time.Millisecond
	// memberlist prefixes its lines with their level ("[WARN] memberlist:
	// ..."); the adapter logs each at that level.
	mc.Logger = NewHCLogger(n.log, "memberlist", hclog.Trace).StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	// Gossip is encrypted and authenticated; plaintext packets are dropped.
	mc.SecretKey = n.cfg.Key.GossipKey()
	list, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("start gossip: %w", err)
	}
	g.list, g.addr = list, list.LocalNode().Address()
	g.seeds = newSeedResolver(n.cfg.Discovery.Resolver, n.log, n.cfg.Discovery.Seeds, portStr, n.cfg.GossipAddr, g.addr)
	n.gossip = g
	n.spawn(g.keepJoined)
	return nil
}

// advertiseHost is the host part of --advertise, which may carry a port.
func advertiseHost(advertise string) string {
	if host, _, err := net.SplitHostPort(advertise); err == nil {
		return host
	}
	return advertise
}

// advertiseIP is the IP memberlist advertises for --advertise's host.
// memberlist takes only an IP, while a container's --advertise is its
// service name (compose, Kubernetes): a name is resolved once, at start, as
// the Raft transport resolves the same host (advertiseAddr).
func advertiseIP(host string) (string, error) {
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
		return ip.String(), nil
	}
	addr, err := net.ResolveIPAddr("ip", host)
	if err != nil {
		return "", fmt.Errorf("advertise host %q: %w", host, err)
	}
	return addr.IP.String(), nil
}

// Rejoin rounds back off from rejoinMin to rejoinMax while a member stays
// missing, and start over at rejoinMin once none is.
const (
	rejoinMin = time.Second
	rejoinMax = 15 * time.Second
)

// keepJoined keeps this node in one gossip pool with the rest of its
// cluster, as Serf's reconnect loop and Consul's retry_join do. memberlist
// alone stops gossiping to a member it declared dead after about 30 s and
// never looks for it again, so a node that was away longer, or restarted
// while its seeds were down, would stay alone for good: its leader would
// not see the servers that join through it, nor the leaves announced there.
// Every round joins what is missing: --join seeds that are not live
// members, and servers of the Raft configuration that are not live in
// gossip, whose gossip address is asked over the node-to-node protocol.
func (g *gossip) keepJoined() {
	// Lookups of --join names end when the node closes.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-g.n.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	wait := rejoinMin
	for {
		if g.n.Removed() {
			return // it left gossip, for good (removed.go)
		}
		if missing := g.missing(ctx); len(missing) == 0 {
			wait = rejoinMin
		} else {
			if joined, err := g.list.Join(missing); err != nil {
				g.n.log.Debug("gossip rejoin", "tried", missing, "reached", joined, "err", err)
			} else {
				g.n.log.Info("joined gossip", "addresses", missing, "members", g.list.NumMembers())
			}
			wait = min(2*wait, rejoinMax)
		}
		select {
		case <-g.n.closing:
			return
		case <-time.After(wait):
		}
	}
}

// missing returns the gossip addresses to join: servers of the Raft
// configuration not live in gossip, seeds that are not live members, and,
// while this server knows no leader, every live member.
// A round that joins resolves the --join names again, since they may point
// elsewhere now; a round with nothing to join (every second while the pool
// is whole) reuses their last answer for up to rejoinMax, rather than asking
// DNS every second for good.
func (g *gossip) missing(ctx context.Context) []string {
	liveAddrs, liveIDs := map[string]bool{}, map[string]bool{}
	for _, node := range g.liveMembers() {
		liveAddrs[node.Address()] = true
		if m, ok := parseMeta(&node); ok {
			liveIDs[m.ID] = true
		}
	}
	out := g.missingServers(liveIDs)
	if g.leaderless() {
		// This node may have come back at another address while the
		// others still remember its old one: memberlist refuses the new
		// address until the old is declared dead, and after that only this
		// node's own push-pull (every 30 s) would tell them, and its Raft
		// would not hear from a leader that long. A join is a push-pull:
		// rounds while no leader is known push this node's state to every
		// live member, and one after the old entry's death lets it in.
		for _, node := range g.liveMembers() {
			if addr := node.Address(); node.Name != g.n.cfg.ID && !slices.Contains(out, addr) {
				out = append(out, addr)
			}
		}
	}
	maxAge := rejoinMax
	if len(out) > 0 {
		maxAge = 0
	}
	for {
		seeds, fresh := g.seeds.addrs(ctx, maxAge)
		missing := slices.DeleteFunc(slices.Clone(seeds), func(addr string) bool {
			return liveAddrs[addr] || slices.Contains(out, addr)
		})
		if len(missing) == 0 || fresh {
			return append(out, missing...)
		}
		maxAge = 0 // the last answer leaves something to join: ask again
	}
}

// missingServers returns the gossip addresses of the servers of the Raft
// configuration that are not live in gossip, as far as they answer.
func (g *gossip) missingServers(liveIDs map[string]bool) []string {
	servers, err := configuration(g.n.raft)
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range servers {
		if liveIDs[string(s.ID)] || string(s.ID) == g.n.cfg.ID {
			continue
		}
		if addr, ok := g.gossipAddrOf(string(s.ID), string(s.Address)); ok && !slices.Contains(out, addr) {
			out = append(out, addr)
		}
	}
	return out
}

// leaderless reports whether this node is a server of a cluster (it has
// Raft state) that knows no leader.
func (g *gossip) leaderless() bool {
	_, id := g.n.raft.LeaderWithID()
	return id == "" && g.n.raft.LastIndex() > 0
}

// gossipAddrOf asks the server id at raftAddr for its gossip address.
func (g *gossip) gossipAddrOf(id, raftAddr string) (string, bool) {
	info, err := g.n.peers.nodeInfo(raftAddr, time.Second)
	if err != nil || info.ID != id || info.GossipAddr == "" {
		return "", false
	}
	return info.GossipAddr, true
}

// advertised is this node's gossip address as the others reach it.
func (g *gossip) advertised() string { return g.addr }

// NodeMeta implements memberlist.Delegate.
func (g *gossip) NodeMeta(limit int) []byte {
	g.mu.Lock()
	b, _ := json.Marshal(g.meta)
	g.mu.Unlock()
	if len(b) > limit {
		g.n.log.Error("gossip metadata too large; ids or addresses too long", "bytes", len(b), "limit", limit)
		return nil
	}
	return b
}

func (g *gossip) NotifyMsg([]byte)                           {}
func (g *gossip) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (g *gossip) LocalState(join bool) []byte                { return nil }
func (g *gossip) MergeRemoteState(buf []byte, join bool)     {}

// NotifyJoin, NotifyLeave and NotifyUpdate run under memberlist's lock: they
// only record and signal, never block.
func (g *gossip) NotifyJoin(node *memberlist.Node)   { g.alive(node) }
func (g *gossip) NotifyUpdate(node *memberlist.Node) { g.alive(node) }
func (g *gossip) NotifyLeave(node *memberlist.Node) {
	// Only a node that announced its leave is recorded; a crash or a
	// partition must not shrink the Raft configuration.
	meta, ok := parseMeta(node)
	leaving := ok && meta.Leaving
	g.mu.Lock()
	if leaving {
		g.left[meta.ID] = struct{}{}
	}
	state := memberDead
	if leaving {
		state = memberLeft
	}
	g.gone[node.Name] = goneMember{state: state, at: time.Now()}
	delete(g.live, node.Name)
	g.mu.Unlock()
	g.n.addrs.forget(node.Name)
	g.changed.notify()
}

func (g *gossip) alive(node *memberlist.Node) {
	c := *node
	c.Addr, c.Meta = slices.Clone(node.Addr), slices.Clone(node.Meta)
	m, ok := parseMeta(&c)
	if ok {
		g.n.levels.heard(raft.ServerID(m.ID), max(m.Level, fsm.LevelKeys))
	}
	// A member's claim of where its Raft listens is believed for its own
	// name only: memberlist keeps one live member per name, while the id in
	// the metadata is whatever the member wrote (addresses.go says why a
	// claim is believed at all).
	if ok && m.ID == node.Name {
		g.n.addrs.claim(m.ID, m.RaftAddr, m.Cluster)
	} else {
		g.n.addrs.forget(node.Name)
	}
	g.mu.Lock()
	delete(g.gone, node.Name)
	g.live[node.Name] = c
	g.mu.Unlock()
	g.changed.notify()
}

// liveMembers returns a copy of every live member, this node included
// (memberlist's live members: suspects among them).
func (g *gossip) liveMembers() []memberlist.Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]memberlist.Node, 0, len(g.live))
	for _, node := range g.live {
		out = append(out, node)
	}
	return out
}

// memberStates counts the members by state: alive (memberlist's live
// members, suspects among them), dead and left (see gone).
func (g *gossip) memberStates() map[string]int {
	live := g.liveMembers()
	counts := map[string]int{memberAlive: len(live)}
	isLive := make(map[string]bool, len(live))
	for _, node := range live {
		isLive[node.Name] = true
	}
	inConfig := map[string]bool{}
	if servers, err := configuration(g.n.raft); err == nil {
		for _, s := range servers {
			inConfig[string(s.ID)] = true
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, m := range g.gone {
		if isLive[name] || (!inConfig[name] && time.Since(m.at) > goneRetention) {
			delete(g.gone, name)
			continue
		}
		counts[m.state]++
	}
	return counts
}

func parseMeta(node *memberlist.Node) (memberMeta, bool) {
	var m memberMeta
	if err := json.Unmarshal(node.Meta, &m); err != nil || m.ID == "" || m.RaftAddr == "" {
		return m, false
	}
	return m, true
}

// members returns the metadata of every live member, this node included.
func (g *gossip) members() []memberMeta {
	var out []memberMeta
	for _, node := range g.liveMembers() {
		if m, ok := parseMeta(&node); ok {
			out = append(out, m)
		}
	}
	return out
}

// updateMeta changes what this node advertises and pushes it out.
func (g *gossip) updateMeta(change func(*memberMeta)) {
	g.mu.Lock()
	before := g.meta
	change(&g.meta)
	changed := before != g.meta
	g.mu.Unlock()
	if changed && !g.n.Removed() { // a removed server's memberlist has stopped
		if err := g.list.UpdateNode(time.Second); err != nil {
			g.n.log.Warn("gossip metadata update", "err", err)
		}
	}
}

// markRemoved remembers that the running process of id was removed, so
// reconciliation does not add it back until it restarts. Once the cluster
// is raised to fsm.LevelRemovals an operator's removal is also in the
// replicated state, which every leader reads (removed.go); this memory is
// the removing leader's alone.
func (g *gossip) markRemoved(id string) {
	for _, m := range g.members() {
		if m.ID == id {
			g.mu.Lock()
			g.removed[id] = m.Boot
			g.mu.Unlock()
		}
	}
}

// wasRemoved reports whether m is a process that was removed.
func (g *gossip) wasRemoved(m memberMeta) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	boot, ok := g.removed[m.ID]
	if ok && boot != m.Boot {
		delete(g.removed, m.ID) // restarted since: it may join again
		return false
	}
	return ok
}

// firstRefusal reports whether the member id of incarnation inc is kept
// out by a removal record for the first time (since the last other one).
func (g *gossip) firstRefusal(id, inc string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if last, ok := g.refused[id]; ok && last == inc {
		return false
	}
	g.refused[id] = inc
	return true
}

// leaveRemoved leaves gossip for good: this server was removed, and the
// others need not see it (keepJoined stops too). Its memberlist stops
// with it, so that nothing it still sends contradicts a server of its id
// that an operator starts on a new data dir.
func (g *gossip) leaveRemoved(timeout time.Duration) {
	if err := g.list.Leave(timeout); err != nil {
		g.n.log.Warn("leaving gossip after the removal", "err", err)
	}
	if err := g.list.Shutdown(); err != nil {
		g.n.log.Warn("stopping gossip after the removal", "err", err)
	}
}

// takeLeft returns and forgets the ids of members that announced a leave.
func (g *gossip) takeLeft() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	ids := make([]string, 0, len(g.left))
	for id := range g.left {
		ids = append(ids, id)
	}
	clear(g.left)
	return ids
}

// announceLeave says in this node's metadata that it is leaving, then
// leaves gossip.
func (g *gossip) announceLeave(timeout time.Duration) error {
	g.updateMeta(func(m *memberMeta) { m.Leaving = true })
	if err := g.list.Leave(timeout); err != nil {
		return fmt.Errorf("gossip leave: %w", err)
	}
	return nil
}

func (g *gossip) shutdown() error { return g.list.Shutdown() }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

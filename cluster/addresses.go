package cluster

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// addressBook says where each server of the Raft configuration is now.
// The configuration keeps the address a server had when it was added; a
// server that comes back elsewhere (a recreated pod or container with the
// same id and volume) announces its new Raft address over gossip, and the
// transport dials that one (raft.ServerAddressProvider, as Consul does), so
// a cluster whose every member moved at once still finds a quorum. The
// leader's reconciliation (membership.Membership.Reconcile) then writes
// the new address into the configuration.
//
// What is believed: the Raft address a live gossip member advertises for
// its own id. Gossip is authenticated with the cluster key, so only a
// holder of the key can make a claim, and a holder of the key can do
// anything a member does anyway. Even so a claim is only where to dial: an
// answer counts for a server only if that server answered (checkedTransport),
// so a wrong claim makes a server unreachable, never counted twice.
type addressBook struct {
	// self and selfAddr are this node's id and advertised Raft address,
	// set before the transport starts: Raft stamps its own address on
	// every RPC through the provider, and the configuration may still
	// hold an old one.
	self     raft.ServerID
	selfAddr raft.ServerAddress
	// cluster is this node's cluster id ("" until known): a member of
	// another cluster is not believed about this one's servers.
	cluster func() string
	// raft is set once Raft runs; the configuration is the fallback.
	raft atomic.Pointer[raft.Raft]

	mu     sync.RWMutex
	claims map[raft.ServerID]addrClaim
}

// addrClaim is what a live gossip member advertises about itself.
type addrClaim struct {
	raft    string
	cluster string
}

func newAddressBook(cluster func() string) *addressBook {
	return &addressBook{cluster: cluster, claims: map[raft.ServerID]addrClaim{}}
}

// claim records the Raft address that the live member id advertises; an
// address that is not host:port is no claim.
func (b *addressBook) claim(id, raftAddr, cluster string) {
	if _, _, err := net.SplitHostPort(raftAddr); err != nil || id == "" {
		b.forget(id)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.claims[raft.ServerID(id)] = addrClaim{raft: raftAddr, cluster: cluster}
}

// forget drops the claim of a member that is no longer live.
func (b *addressBook) forget(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.claims, raft.ServerID(id))
}

// claimed returns the address gossip believes for id, if any: not one that
// another live member claims too (believed for neither), nor one a member
// of another cluster claims.
func (b *addressBook) claimed(id raft.ServerID) (string, bool) {
	c, ok := b.claimOf(id)
	if !ok {
		return "", false
	}
	if c.cluster != "" {
		if ours := b.cluster(); ours != "" && ours != c.cluster {
			return "", false
		}
	}
	return c.raft, true
}

// claimOf is id's claim, unless another live member claims its address.
func (b *addressBook) claimOf(id raft.ServerID) (addrClaim, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	c, ok := b.claims[id]
	for other, o := range b.claims {
		if ok && other != id && o.raft == c.raft {
			return addrClaim{}, false
		}
	}
	return c, ok
}

// resolve returns where to reach server id now: what gossip believes, or
// else configured, the configuration's address.
func (b *addressBook) resolve(id raft.ServerID, configured raft.ServerAddress) raft.ServerAddress {
	if id == b.self && b.selfAddr != "" {
		return b.selfAddr
	}
	if addr, ok := b.claimed(id); ok {
		return raft.ServerAddress(addr)
	}
	return configured
}

// errNoAddress means neither gossip nor the configuration names the server;
// the transport then dials the address Raft passed it.
var errNoAddress = errors.New("no address known")

// ServerAddr implements raft.ServerAddressProvider: the transport asks it
// before every RPC. The provider is not told the configuration's address,
// and an error makes the transport log a warning each time, so the
// fallback is looked up here, in the configuration Raft holds in memory.
func (b *addressBook) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if addr := b.resolve(id, ""); addr != "" {
		return addr, nil
	}
	if r := b.raft.Load(); r != nil {
		for _, s := range r.GetConfiguration().Configuration().Servers {
			if s.ID == id {
				return s.Address, nil
			}
		}
	}
	return "", fmt.Errorf("server %s: %w", id, errNoAddress)
}

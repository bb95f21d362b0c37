package cluster

import (
	"context"
	"time"
)

// visibilityWait bounds how long a delete waits for the other servers to
// apply it. A server applies a committed entry within Raft's commit timeout
// (50 ms) when it is reachable; one that does not answer in this time is
// cut off or far behind and is excused: it catches up later.
const visibilityWait = 500 * time.Millisecond

// awaitServers returns once every other server of the configuration —
// voters and non-voters (read replicas) alike — has applied index, or has
// not answered within visibilityWait. Deletes use it so that no node that
// reaches the leader still redirects a code after its delete was
// acknowledged; a replica serves redirects like any node, so it is waited
// for too. Deletes are rare enough to pay a round trip for it.
func (n *Node) awaitServers(index uint64) {
	// Followers learn that an entry committed from the next append the
	// leader sends, which an idle leader sends only after its commit
	// timeout; a barrier entry is such an append, sent at once. Its own
	// outcome does not matter.
	n.raft.Barrier(visibilityWait)
	servers, err := configuration(n.raft)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), visibilityWait+100*time.Millisecond)
	defer cancel()
	applied := n.peers.appliedIndexes(ctx, servers, index)
	for _, s := range servers {
		if string(s.ID) != n.cfg.ID && applied[string(s.ID)] < index {
			n.log.Debug("a server has not applied a delete yet; excused", "id", s.ID, "suffrage", s.Suffrage, "index", index)
		}
	}
}

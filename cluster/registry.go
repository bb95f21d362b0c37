package cluster

import (
	"fmt"

	"github.com/linkraft/linkraft/fsm"
)

// The HTTP-address registry: where each server's HTTP listener is, for
// operators' views of the cluster (Status). The replicated state is the
// record (fsm.ServerCommand; a leader
// writes its own address as it takes office and those of servers it adds);
// gossip metadata fills in servers the record does not have yet.

// httpAddrOf returns the HTTP address of another server: the replicated
// record's, else what its gossip metadata says (g may be nil).
func httpAddrOf(f *fsm.FSM, g *gossip, id string) (string, bool) {
	if addr, ok := f.ServerHTTP(id); ok {
		return addr, true
	}
	if g != nil {
		for _, m := range g.members() {
			if m.ID == id && m.HTTPAddr != "" {
				return m.HTTPAddr, true
			}
		}
	}
	return "", false
}

// recordHTTPAddr replicates a server's HTTP address when it changed; an
// empty address forgets the server. Leader only.
func (n *Node) recordHTTPAddr(id, addr string) error {
	if cur, ok := n.fsm.ServerHTTP(id); ok && cur == addr || addr == "" && !ok {
		return nil
	}
	if _, _, err := n.apply(fsm.ServerCommand{ID: id, HTTPAddr: addr}); err != nil {
		return fmt.Errorf("record HTTP address of %s: %w", id, err)
	}
	return nil
}

package membership

import (
	"fmt"

	"github.com/linkraft/linkraft/fsm"
)

// The HTTP-address registry: where each server's HTTP listener is, for
// operators' views of the cluster (Status in package cluster). The
// replicated state is the record (fsm.ServerCommand; a leader writes its
// own address as it takes office and those of servers it adds); gossip
// metadata fills in servers the record does not have yet.

// HTTPAddrOf returns the HTTP address of another server: the replicated
// record's, else what its gossip metadata says (g may be nil).
func HTTPAddrOf(state State, g Gossip, id string) (string, bool) {
	if addr, ok := state.ServerHTTP(id); ok {
		return addr, true
	}
	if g != nil {
		for _, m := range g.Members() {
			if m.ID == id && m.HTTPAddr != "" {
				return m.HTTPAddr, true
			}
		}
	}
	return "", false
}

// RecordHTTPAddr replicates a server's HTTP address when it changed; an
// empty address forgets the server. Leader only.
func (m *Membership) RecordHTTPAddr(id, addr string) error {
	if cur, ok := m.state.ServerHTTP(id); ok && cur == addr || addr == "" && !ok {
		return nil
	}
	if err := m.proposer.Apply(fsm.ServerCommand{ID: id, HTTPAddr: addr}); err != nil {
		return fmt.Errorf("record HTTP address of %s: %w", id, err)
	}
	return nil
}

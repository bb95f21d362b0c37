package membership

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// The leader's side of a removal for good; DESIGN.md in package cluster
// (Membership, removal) gives the whole, and removed.go there the removed
// server's side.

// noticeTimeout bounds the asking of a server's incarnation for its
// removal record.
const noticeTimeout = time.Second

// ErrRemovedServer refuses to join a server an operator removed, on the
// data dir it was removed with (or one that cannot be told apart from it).
var ErrRemovedServer = fmt.Errorf("%w: the server was removed from the cluster", ErrServerConflict)

// incarnationOf is the incarnation of server id (at raftAddr in the
// configuration) as gossip or the server itself says, "" when neither
// does: it is down, or of a build before incarnations.
func (m *Membership) incarnationOf(id string, raftAddr raft.ServerAddress) string {
	if id == m.id {
		return m.incarnation
	}
	if m.gossip != nil {
		for _, g := range m.gossip.Members() {
			if g.ID == id && g.Inc != "" {
				return g.Inc
			}
		}
	}
	info, err := m.askNode(string(m.peers.Resolve(raft.ServerID(id), raftAddr)), noticeTimeout)
	if err != nil || info.ID != id {
		return ""
	}
	return info.Incarnation
}

// recordRemoval writes an operator's removal of server id down in the
// replicated state, once the cluster is raised to fsm.LevelRemovals (older
// builds cannot apply it). Leader only.
func (m *Membership) recordRemoval(id string, raftAddr raft.ServerAddress) error {
	if m.state.Raised() < fsm.LevelRemovals {
		return nil
	}
	inc := m.incarnationOf(id, raftAddr)
	if err := m.proposer.ApplyOwn(fsm.ServerRemovalCommand{ID: id, Incarnation: inc}, "removal record"); err != nil {
		return fmt.Errorf("record the removal of %s: %w", id, err)
	}
	m.log.Info("removal recorded: no leader adds this server back", "id", id, "incarnation", inc)
	return nil
}

// joinerIncarnation is the incarnation of the data dir that the server at
// raftAddr, joined as the removed server id, says it runs on: "" when it
// says none (a build before removal records) or does not answer within
// the write timeout. Only the server's own answer counts, never gossip's,
// which may still list the removed process that ran at that address
// moments ago. It waits for that answer: an operator joins a server right
// after starting it, and the first ask may meet the connection to the
// process that was removed there (askNode).
func (m *Membership) joinerIncarnation(id, raftAddr string) (string, error) {
	info, err := m.askNode(raftAddr, m.writeTimeout)
	switch {
	case err != nil:
		m.log.Warn("a removed server joined again does not say which data dir it runs on", "id", id, "raft_addr", raftAddr, "err", err)
		return "", nil
	case info.ID != id:
		return "", fmt.Errorf("%w: the server at %s is %q, not %q", ErrInvalidServer, raftAddr, info.ID, id)
	}
	return info.Incarnation, nil
}

// admitRemoved decides an operator's join of server id, which was removed
// (with incarnation removedInc, "" when unknown): the server at the
// address runs on incarnation joiner. A new data dir is let in, and the
// record forgotten first, so that no leader finishes the old removal on
// the server just joined; the data dir that was removed, or one that does
// not say which it is, is refused. Leader only.
func (m *Membership) admitRemoved(id, removedInc, joiner string) error {
	switch {
	case joiner == "":
		return fmt.Errorf("%w: %s does not say which data dir it runs on (it did not answer at its Raft address, "+
			"or its build is older than removal records), so it cannot be told apart from the data dir it was removed with: "+
			"make sure it runs this build, started on an empty data dir, and join it again", ErrRemovedServer, id)
	case joiner == removedInc:
		return fmt.Errorf("%w: %s still runs on the data dir it was removed with: stop it, empty its data dir, "+
			"start it and join it again", ErrRemovedServer, id)
	}
	if err := m.proposer.ApplyOwn(fsm.ServerRemovalCommand{ID: id, Forget: true}, "forget a removal"); err != nil {
		return fmt.Errorf("join %s: %w", id, err)
	}
	m.log.Info("an operator joins a removed server on a new data dir: its removal is forgotten", "id", id, "incarnation", joiner)
	return nil
}

package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
)

// Membership errors; each leaves the configuration unchanged.
var (
	// ErrNoLeader: this server does not lead (package cluster's
	// ErrNoLeader is this one).
	ErrNoLeader         = errors.New("no leader available")
	ErrUnknownServer    = errors.New("no server with that id in the cluster")
	ErrServerConflict   = errors.New("id or address already belongs to another server")
	ErrLastVoter        = errors.New("refusing to remove the last voter: the cluster would have no members")
	ErrNoTransferTarget = errors.New("no other voter to hand leadership to")
	ErrInvalidServer    = errors.New("invalid server")
	ErrOtherCluster     = errors.New("server belongs to another cluster")
	ErrUnreachable      = errors.New("cannot reach the server's raft address")
	ErrAlreadyVoter     = errors.New("the server is already a voter")
)

// errClosed ends a wait of a node that stops.
var errClosed = errors.New("node is shutting down")

// Membership makes this server's changes to the configuration while it
// leads, and runs the membership duties of a leader.
type Membership struct {
	id, incarnation string
	writeTimeout    time.Duration
	raft            Raft
	state           State
	proposer        Proposer
	peers           Peers
	gossip          Gossip
	raftError       func(error) error
	applied         func() uint64
	closing         <-chan struct{}
	log             *slog.Logger
	// changing is held by a promotion and a removal from their reading of
	// the configuration to its change: a promotion decided on the
	// configuration before a removal would add the removed server back.
	changing sync.Mutex
}

// New returns the membership of the server cfg describes.
func New(cfg Config) *Membership {
	return &Membership{id: cfg.ID, incarnation: cfg.Incarnation, writeTimeout: cfg.WriteTimeout,
		raft: cfg.Raft, state: cfg.State, proposer: cfg.Proposer, peers: cfg.Peers, gossip: cfg.Gossip,
		raftError: cfg.RaftError, applied: cfg.Applied, closing: cfg.Closing, log: cfg.Log}
}

func (m *Membership) isLeader() bool { return m.raft.State() == raft.Leader }

// Configuration is the servers of the latest configuration.
func (m *Membership) Configuration() ([]raft.Server, error) { return Servers(m.raft) }

// Servers is r's latest configuration.
func Servers(r Raft) ([]raft.Server, error) {
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	return f.Configuration().Servers, nil
}

// AddServer adds a server, for an operator (the admin join): as a voter,
// which joins as a learner and is promoted once it has caught up
// (learners.go), so the call returns once the change is committed, not
// once the server holds the state; or with nonVoter as a non-voter (a read
// replica, which never counts towards the quorum). The same id, address
// and suffrage again is a no-op (a learner not yet promoted counts as the
// voter it will be); an id or address already used by another server is
// refused, and so is a known server with the other suffrage (a replica
// becomes a voter through Promote; a voter is never demoted), and a server
// that reports (over gossip, or asked at its Raft address) a different id
// or another cluster.
// httpAddr, when given, is recorded for operators' views (Status).
// Servers that gossip are added by reconciliation instead (reconcile.go);
// package cluster's Config.GossipSeeds is how a node finds those.
func (m *Membership) AddServer(id, raftAddr, httpAddr string, nonVoter bool, by string) error {
	if id == "" {
		return fmt.Errorf("%w: id is required", ErrInvalidServer)
	}
	if _, _, err := net.SplitHostPort(raftAddr); err != nil {
		return fmt.Errorf("%w: raft_addr %q is not host:port", ErrInvalidServer, raftAddr)
	}
	if !m.isLeader() {
		return ErrNoLeader
	}
	servers, err := m.Configuration()
	if err != nil {
		return err
	}
	if known, err := m.joinKnown(servers, id, raftAddr, nonVoter); known {
		return err
	}
	if err := m.checkJoiner(id, raftAddr); err != nil {
		return err
	}
	if err := m.joinServer(id, raftAddr, nonVoter); err != nil {
		return err
	}
	if err := m.RecordHTTPAddr(id, httpAddr); err != nil {
		m.log.Warn("recording a joined server's HTTP address", "err", err)
	}
	m.noteMembership(fsm.AuditMemberJoin, id, by)
	return nil
}

// joinKnown decides a join against the configuration's servers: known
// reports that the id or the address is in it already, with the join's
// outcome (nil: nothing more to do).
func (m *Membership) joinKnown(servers []raft.Server, id, raftAddr string, nonVoter bool) (known bool, err error) {
	for _, s := range servers {
		sameID, sameAddr := s.ID == raft.ServerID(id), s.Address == raft.ServerAddress(raftAddr)
		switch {
		case sameID && sameAddr && s.Suffrage == raft.Voter && !nonVoter:
			return true, nil
		case sameID && sameAddr && s.Suffrage == raft.Voter:
			return true, fmt.Errorf("%w: %s is a voter, and a voter is never made a non-voter", ErrServerConflict, s.ID)
		case sameID && sameAddr && nonVoter:
			// A learner asked for as a non-voter now remains one.
			if wants, _ := m.askWants(raftAddr); wants == wire.WantsVoter {
				return true, m.peers.TellNonvoter(id, raftAddr)
			}
			return true, nil
		case sameID && sameAddr:
			if wants, _ := m.askWants(raftAddr); wants == wire.WantsVoter {
				return true, nil // a learner: the leader promotes it once it has caught up
			}
			return true, fmt.Errorf("%w: %s is a non-voter: promote it instead", ErrServerConflict, s.ID)
		case sameID || sameAddr:
			return true, fmt.Errorf("%w: %s at %s", ErrServerConflict, s.ID, s.Address)
		}
	}
	return false, nil
}

// checkJoiner refuses a server new to the configuration that says it is
// another server or of another cluster, does not complete a handshake, or
// was removed on the data dir it runs on (removed.go).
func (m *Membership) checkJoiner(id, raftAddr string) error {
	if who, identified := m.identify(raftAddr); identified {
		if who.ID != id {
			return fmt.Errorf("%w: the server at %s is %q, not %q", ErrInvalidServer, raftAddr, who.ID, id)
		}
		if who.Cluster != "" && who.Cluster != m.state.ClusterID() {
			return fmt.Errorf("%w: %s reports cluster %s", ErrOtherCluster, id, who.Cluster)
		}
	}
	if err := reachable(m.peers, raftAddr, 2*time.Second); err != nil {
		return err
	}
	if removedInc, removed := m.state.Removed(id); removed {
		joiner, err := m.joinerIncarnation(id, raftAddr)
		if err != nil {
			return err
		}
		if err := m.admitRemoved(id, removedInc, joiner); err != nil {
			return err
		}
	}
	return nil
}

// reachable checks that a server's Raft address completes a handshake
// through the stream layer, which also proves it holds the cluster key. A
// voter that cannot be reached would count towards the quorum without ever
// acknowledging: adding one to a one-node cluster stops all writes.
func reachable(peers Peers, raftAddr string, timeout time.Duration) error {
	conn, err := peers.Dial(raftAddr, timeout)
	if err != nil {
		return fmt.Errorf("%w %s (is it running, with the same --cluster-key?): %v", ErrUnreachable, raftAddr, err)
	}
	return conn.Close()
}

// raftAddServer adds a voter or a non-voter or, for a known id, updates
// its address. Raft keeps a known voter a voter even through AddNonvoter;
// AddVoter on a known non-voter promotes it.
func (m *Membership) raftAddServer(id, raftAddr string, nonVoter bool) error {
	if err := canApplyState(m.peers, raftAddr, m.state.Level()); err != nil {
		return err
	}
	add, kind := m.raft.AddVoter, "voter"
	if nonVoter {
		add, kind = m.raft.AddNonvoter, "non-voter"
	}
	if err := add(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, m.writeTimeout).Error(); err != nil {
		return fmt.Errorf("add %s %s: %w", kind, id, m.raftError(err))
	}
	m.log.Info("server joined", "id", id, "raft_addr", raftAddr, "suffrage", kind)
	return nil
}

// canApplyState refuses a server whose build could not apply the entries
// this cluster's state already holds (levels.go in package cluster); a
// server that does not answer is left to the reachability checks.
func canApplyState(peers Peers, raftAddr string, stateLevel int) error {
	info, err := peers.NodeInfo(raftAddr, 2*time.Second)
	if err != nil {
		return nil
	}
	if got, need := max(info.EntryLevel, fsm.LevelKeys), stateLevel; got < need {
		return fmt.Errorf("%w: %s runs an older build (entry level %d) than this cluster's state needs (%d): upgrade it first", ErrInvalidServer, info.ID, got, need)
	}
	return nil
}

// Promote makes a non-voter (a read replica, or a learner before the
// leader does) a voter, at the address the configuration has for it. It
// must answer at that address first: a voter that cannot be reached counts
// towards the quorum without acknowledging.
func (m *Membership) Promote(id, by string) error {
	if !m.isLeader() {
		return ErrNoLeader
	}
	m.changing.Lock()
	defer m.changing.Unlock()
	servers, err := m.Configuration()
	if err != nil {
		return err
	}
	i := slices.IndexFunc(servers, func(s raft.Server) bool { return s.ID == raft.ServerID(id) })
	switch {
	case i < 0:
		return ErrUnknownServer
	case servers[i].Suffrage == raft.Voter:
		return ErrAlreadyVoter
	}
	if _, removed := m.state.Removed(id); removed {
		// An earlier leader recorded the removal and lost leadership
		// before it changed the configuration; reconciliation finishes it.
		return fmt.Errorf("%w: %s is being removed", ErrRemovedServer, id)
	}
	addr := string(servers[i].Address)
	if err := reachable(m.peers, addr, 2*time.Second); err != nil {
		return err
	}
	if err := m.raftAddServer(id, addr, false); err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	m.noteMembership(fsm.AuditMemberPromote, id, by)
	return nil
}

// identifyWait bounds how long identify waits for the server itself to
// answer: a dial that times out takes as long.
const identifyWait = 2 * time.Second

// identify asks gossip, then the server itself at its Raft address, who
// the server at raftAddr is and which cluster it belongs to.
func (m *Membership) identify(raftAddr string) (wire.NodeInfo, bool) {
	if m.gossip != nil {
		for _, g := range m.gossip.Members() {
			if g.RaftAddr == raftAddr {
				return wire.NodeInfo{ID: g.ID, Cluster: g.Cluster, Incarnation: g.Inc}, true
			}
		}
	}
	info, err := m.askNode(raftAddr, identifyWait)
	return info, err == nil && info.ID != ""
}

// askNode asks the server at raftAddr who it is (GET node), again until
// it answers or wait has passed. The first answer may fail at once
// although the server runs: the connection the protocol's client reuses
// can be one the process that ran there before has closed (a server
// restarted at its address, on a new data dir after a removal), and the
// client sends nothing twice on its own. The next ask dials afresh; later
// ones wait for a server whose cluster port does not answer yet.
func (m *Membership) askNode(raftAddr string, wait time.Duration) (wire.NodeInfo, error) {
	deadline := time.Now().Add(wait)
	var pause time.Duration // none before the first ask again: see above
	for {
		info, err := m.peers.NodeInfo(raftAddr, max(time.Until(deadline), askNodeMin))
		if err == nil || !time.Now().Add(pause).Before(deadline) {
			return info, err
		}
		select {
		case <-m.closing:
			return info, fmt.Errorf("ask %s who it is: %w", raftAddr, errClosed)
		case <-time.After(pause):
		}
		pause = min(max(2*pause, 50*time.Millisecond), time.Second)
	}
}

// askNodeMin is the least time askNode gives one ask: the last one, as
// the wait ends, still gets a server that answers in time.
const askNodeMin = 200 * time.Millisecond

// RemoveServer takes a server out of the configuration for an operator,
// for good: the removal is recorded (removed.go), so no leader adds the
// server back, and the server stops taking part once it learns of it. The
// last voter cannot be removed. by is the key that asked.
func (m *Membership) RemoveServer(id, by string) error { return m.removeServer(id, by, true) }

// Leave takes a server that leaves as it stops out of the configuration,
// unrecorded: it rejoins when it starts again.
func (m *Membership) Leave(id string) error { return m.removeServer(id, "", false) }

// removeServer takes a server out of the configuration; record keeps it
// out (an operator's removal). A server leaving as it stops, or gossip
// seeing it go, is not recorded (by is ""): it rejoins when it starts
// again.
func (m *Membership) removeServer(id, by string, record bool) error {
	if !m.isLeader() {
		return ErrNoLeader
	}
	m.changing.Lock()
	defer m.changing.Unlock()
	servers, err := m.Configuration()
	if err != nil {
		return err
	}
	var found *raft.Server
	voters := 0
	for i, s := range servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
		if s.ID == raft.ServerID(id) {
			found = &servers[i]
		}
	}
	switch {
	case found == nil:
		return ErrUnknownServer
	case found.Suffrage == raft.Voter && voters == 1:
		return ErrLastVoter
	}
	// Gossip may still see the server alive (it is leaving, or an operator
	// removed a running server): do not add this process back.
	if m.gossip != nil {
		m.gossip.MarkRemoved(id)
	}
	// A server that answers is recorded first: a leader that loses
	// leadership between the two entries leaves a record the next one
	// finishes (reconcile.go), never a running removed server that no
	// record keeps out. One that does not answer is recorded after: the
	// record commits under the quorum of the configuration it is in, which
	// the new configuration may have when the old one, counting the dead
	// server, has not; and the reachability check keeps a dead server out
	// meanwhile.
	first := record && reachable(m.peers, string(m.peers.Resolve(found.ID, found.Address)), time.Second) == nil
	if first {
		if err := m.recordRemoval(id, found.Address); err != nil {
			return fmt.Errorf("remove server %s: %w", id, err)
		}
	}
	if err := m.raft.RemoveServer(found.ID, 0, m.writeTimeout).Error(); err != nil {
		return fmt.Errorf("remove server %s: %w", id, m.raftError(err))
	}
	if record && !first {
		if err := m.recordRemoval(id, found.Address); err != nil {
			return fmt.Errorf("server %s is out of the configuration, but its removal was not recorded "+
				"(a leader may add it back should it start again on its data dir): %w", id, err)
		}
	}
	if m.isLeader() { // a leader that removed itself has stepped down
		if err := m.RecordHTTPAddr(id, ""); err != nil {
			m.log.Warn("forgetting a removed server's HTTP address", "err", err)
		}
		m.noteMembership(fsm.AuditMemberLeave, id, by)
	}
	m.log.Info("server removed", "id", id)
	return nil
}

// TransferLeadership hands leadership to another voter.
func (m *Membership) TransferLeadership() error {
	if !m.isLeader() {
		return ErrNoLeader
	}
	if m.OtherVoters() == 0 {
		return ErrNoTransferTarget
	}
	if err := m.raft.LeadershipTransfer().Error(); err != nil {
		return fmt.Errorf("leadership transfer: %w", m.raftError(err))
	}
	return nil
}

// OtherVoters counts the voters besides this server: none when the
// configuration cannot be read, so that nothing waits for a voter that
// may not exist.
func (m *Membership) OtherVoters() int {
	servers, err := m.Configuration()
	if err != nil {
		return 0
	}
	others := 0
	for _, s := range servers {
		if s.Suffrage == raft.Voter && s.ID != raft.ServerID(m.id) {
			others++
		}
	}
	return others
}

// noteMembership records a change of the configuration in the audit log
// (fsm.AuditNoteCommand), once the cluster is raised to fsm.LevelBounds:
// older builds cannot apply the note. The change is made by then, so a
// note that fails is only logged.
func (m *Membership) noteMembership(action fsm.AuditAction, id, by string) {
	if m.state.Raised() < fsm.LevelBounds {
		return
	}
	note := fsm.AuditNoteCommand{Entry: fsm.AuditEntry{At: time.Now().UnixMilli(), KeyID: by, Action: action, Subject: id}}
	if err := m.proposer.Propose(context.Background(), note); err != nil {
		m.log.Warn("audit log: membership change not recorded", "action", action.String(), "server", id, "err", err)
	}
}

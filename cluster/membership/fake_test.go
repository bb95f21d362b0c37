package membership

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
)

// The fakes of membership's dependencies: a configuration in memory, a
// state of removal records and HTTP addresses, peers that answer from a
// table. Each configuration change a fake Raft makes is recorded.

// future is a Raft future that is already done.
type future struct {
	err error
	cfg raft.Configuration
}

func (f future) Error() error                      { return f.err }
func (f future) Index() uint64                     { return 0 }
func (f future) Configuration() raft.Configuration { return f.cfg }

// fakeRaft is a configuration this server leads (unless follower).
type fakeRaft struct {
	mu       sync.Mutex
	follower bool
	servers  []raft.Server
	changes  []string // "voter id addr", "non-voter id addr", "remove id", "transfer"
}

func (r *fakeRaft) State() raft.RaftState {
	if r.follower {
		return raft.Follower
	}
	return raft.Leader
}

func (r *fakeRaft) GetConfiguration() raft.ConfigurationFuture {
	r.mu.Lock()
	defer r.mu.Unlock()
	return future{cfg: raft.Configuration{Servers: slices.Clone(r.servers)}}
}

func (r *fakeRaft) add(kind string, suffrage raft.ServerSuffrage, id raft.ServerID, addr raft.ServerAddress) raft.IndexFuture {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, fmt.Sprintf("%s %s %s", kind, id, addr))
	i := slices.IndexFunc(r.servers, func(s raft.Server) bool { return s.ID == id })
	switch {
	case i < 0:
		r.servers = append(r.servers, raft.Server{Suffrage: suffrage, ID: id, Address: addr})
	case suffrage == raft.Voter: // as hashicorp/raft: a voter stays one
		r.servers[i].Suffrage, r.servers[i].Address = suffrage, addr
	default:
		r.servers[i].Address = addr
	}
	return future{}
}

func (r *fakeRaft) AddVoter(id raft.ServerID, addr raft.ServerAddress, _ uint64, _ time.Duration) raft.IndexFuture {
	return r.add("voter", raft.Voter, id, addr)
}

func (r *fakeRaft) AddNonvoter(id raft.ServerID, addr raft.ServerAddress, _ uint64, _ time.Duration) raft.IndexFuture {
	return r.add("non-voter", raft.Nonvoter, id, addr)
}

func (r *fakeRaft) RemoveServer(id raft.ServerID, _ uint64, _ time.Duration) raft.IndexFuture {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, "remove "+string(id))
	r.servers = slices.DeleteFunc(r.servers, func(s raft.Server) bool { return s.ID == id })
	return future{}
}

func (r *fakeRaft) LeadershipTransfer() raft.Future {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, "transfer")
	return future{}
}

func (r *fakeRaft) made() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.changes)
}

// fakeState is the replicated state membership reads, and its proposer
// applies the commands membership writes to it.
type fakeState struct {
	mu      sync.Mutex
	cluster string
	level   int
	raised  int
	removed map[string]string
	http    map[string]string
	notes   []fsm.AuditNoteCommand
}

func newFakeState() *fakeState {
	return &fakeState{cluster: "c1", level: fsm.LevelKeys, raised: fsm.EntryLevel,
		removed: map[string]string{}, http: map[string]string{}}
}

func (s *fakeState) ClusterID() string { return s.cluster }
func (s *fakeState) Level() int        { return s.level }
func (s *fakeState) Raised() int       { return s.raised }

func (s *fakeState) Removed(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	inc, ok := s.removed[id]
	return inc, ok
}

func (s *fakeState) ServerHTTP(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	addr, ok := s.http[id]
	return addr, ok
}

func (s *fakeState) Apply(cmd fsm.Command) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch c := cmd.(type) {
	case fsm.ServerRemovalCommand:
		if c.Forget {
			delete(s.removed, c.ID)
		} else {
			s.removed[c.ID] = c.Incarnation
		}
	case fsm.ServerCommand:
		if c.HTTPAddr == "" {
			delete(s.http, c.ID)
		} else {
			s.http[c.ID] = c.HTTPAddr
		}
	case fsm.AuditNoteCommand:
		s.notes = append(s.notes, c)
	default:
		return fmt.Errorf("fake state: unexpected %T", cmd)
	}
	return nil
}

func (s *fakeState) ApplyOwn(cmd fsm.Command, what string) error {
	if err := s.Apply(cmd); err != nil {
		return fmt.Errorf("apply %s: %w", what, err)
	}
	return nil
}

func (s *fakeState) Propose(_ context.Context, cmd fsm.Command) error { return s.Apply(cmd) }

// fakePeers answers from a table of the servers that run, by Raft
// address.
type fakePeers struct {
	mu      sync.Mutex
	running map[string]wire.NodeInfo // what each answers to GET node
	// silent servers complete a handshake but do not answer GET node.
	silent  map[string]bool
	applied map[string]uint64
	told    []string // "non-voter id", "removed id inc"
}

func newFakePeers() *fakePeers {
	return &fakePeers{running: map[string]wire.NodeInfo{}, silent: map[string]bool{}, applied: map[string]uint64{}}
}

// run makes server id answer at addr, asking for suffrage wants, on the
// data dir inc.
func (p *fakePeers) run(id, addr, wants, inc string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[addr] = wire.NodeInfo{ID: id, Cluster: "c1", EntryLevel: fsm.EntryLevel, Wants: wants, Incarnation: inc}
}

func (p *fakePeers) NodeInfo(raftAddr string, _ time.Duration) (wire.NodeInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	info, ok := p.running[raftAddr]
	if !ok || p.silent[raftAddr] {
		return wire.NodeInfo{}, errors.New("no answer")
	}
	return info, nil
}

func (p *fakePeers) Dial(raftAddr string, _ time.Duration) (io.Closer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.running[raftAddr]; !ok {
		return nil, errors.New("connection refused")
	}
	return io.NopCloser(nil), nil
}

func (p *fakePeers) TellNonvoter(id, raftAddr string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.told = append(p.told, "non-voter "+id)
	if info, ok := p.running[raftAddr]; ok {
		info.Wants = wire.WantsNonvoter
		p.running[raftAddr] = info
	}
	return nil
}

func (p *fakePeers) TellRemoved(id, incarnation, _ string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.told = append(p.told, "removed "+id+" "+incarnation)
	return nil
}

func (p *fakePeers) Learners(_ context.Context, servers []raft.Server) map[raft.ServerID]bool {
	got := map[raft.ServerID]bool{}
	for _, s := range servers {
		if info, err := p.NodeInfo(string(s.Address), 0); err == nil && s.Suffrage != raft.Voter && info.Wants == wire.WantsVoter {
			got[s.ID] = true
		}
	}
	return got
}

func (p *fakePeers) AppliedIndexes(_ context.Context, servers []raft.Server) map[string]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	got := map[string]uint64{}
	for _, s := range servers {
		if index, ok := p.applied[string(s.ID)]; ok {
			got[string(s.ID)] = index
		}
	}
	return got
}

func (p *fakePeers) Resolve(_ raft.ServerID, configured raft.ServerAddress) raft.ServerAddress {
	return configured
}

func (p *fakePeers) Claimed(raft.ServerID) (string, bool) { return "", false }

func (p *fakePeers) toldAll() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.told)
}

// fakeGossip is a list of live members, and those this leader removed.
type fakeGossip struct {
	mu      sync.Mutex
	members []Member
	left    []string
	removed map[string]bool
}

func (g *fakeGossip) Members() []Member {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.members)
}

func (g *fakeGossip) MarkRemoved(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removed == nil {
		g.removed = map[string]bool{}
	}
	g.removed[id] = true
}

func (g *fakeGossip) WasRemoved(m Member) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.removed[m.ID]
}

func (g *fakeGossip) FirstRefusal(string, string) bool { return true }

func (g *fakeGossip) TakeLeft() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	left := g.left
	g.left = nil
	return left
}

// fixture is a Membership of leader n1 over fakes.
type fixture struct {
	*Membership
	raft   *fakeRaft
	state  *fakeState
	peers  *fakePeers
	gossip *fakeGossip
}

// newFixture leads a configuration of servers (n1 among them, at
// 10.0.0.1:7000), each running and answering as a voter would.
func newFixture(servers ...raft.Server) *fixture {
	f := &fixture{raft: &fakeRaft{servers: servers}, state: newFakeState(), peers: newFakePeers(), gossip: &fakeGossip{}}
	for _, s := range servers {
		f.peers.run(string(s.ID), string(s.Address), wire.WantsVoter, "inc-"+string(s.ID))
	}
	f.Membership = New(Config{
		ID: "n1", Incarnation: "inc-n1", WriteTimeout: 200 * time.Millisecond,
		Raft: f.raft, State: f.state, Proposer: f.state, Peers: f.peers, Gossip: f.gossip,
		RaftError: func(err error) error { return err }, Applied: func() uint64 { return 1000 },
		Closing: make(chan struct{}), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	return f
}

func voter(id, addr string) raft.Server {
	return raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)}
}

func nonvoter(id, addr string) raft.Server {
	return raft.Server{Suffrage: raft.Nonvoter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)}
}

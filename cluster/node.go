package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/valyala/fasthttp"
	"go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/cluster/secure"
	"github.com/linkraft/linkraft/fsm"
)

// Config is what a node needs to start. Zero durations take defaults.
type Config struct {
	ID         string
	DataDir    string
	RaftAddr   string // address the Raft transport binds
	GossipAddr string // address memberlist binds; empty: no discovery
	HTTPAddr   string // this node's HTTP address as the other nodes reach it
	Advertise  string // host other nodes reach this one at; default: the bind addresses'
	Join       []string
	// BootstrapExpect is the number of servers that bootstrap a new cluster
	// together. With 1 (or 0) and no Join seeds, a node bootstraps alone on
	// first start; with Join seeds it waits to be added to a cluster.
	BootstrapExpect int
	// Key authenticates and encrypts Raft and gossip traffic and signs
	// internal requests; nil means a trusted network.
	Key                *secure.Key
	LeaveOnTerminate   bool
	WriteTimeout       time.Duration
	ClickFlushInterval time.Duration
	// ExpiredRetention is how long an expired link keeps answering 410
	// before the leader purges it (after which its code answers 404).
	ExpiredRetention time.Duration
	Logger           *slog.Logger
	RaftLogLevel     string
}

func (c *Config) setDefaults() {
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 5 * time.Second
	}
	if c.ClickFlushInterval <= 0 {
		c.ClickFlushInterval = time.Second
	}
	if c.ExpiredRetention <= 0 {
		c.ExpiredRetention = 24 * time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RaftLogLevel == "" {
		c.RaftLogLevel = "warn"
	}
}

// Errors of the write path. Each means "try again later" to a client.
var (
	ErrNoLeader = errors.New("no leader available")
	ErrTimeout  = errors.New("write not confirmed in time; it may still be applied")
	ErrClosed   = errors.New("node is shutting down")
)

// Node is one running member: Raft, its stores, and the write machinery.
type Node struct {
	cfg       Config
	log       *slog.Logger
	fsm       *fsm.FSM
	raft      *raft.Raft
	layer     *secure.StreamLayer
	transport *raft.NetworkTransport
	store     *raftboltdb.BoltStore

	creates chan *createCall
	clicks  *clickCounter

	gossip     *gossip
	peers      peers
	readRounds *roundBatcher
	readyTerm  atomic.Uint64 // term in which this leader's barrier completed

	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// Open starts a node on its data dir. On first start with BootstrapExpect
// of at most 1 and no Join seeds it bootstraps a single-voter cluster; with
// a larger BootstrapExpect it bootstraps together with its gossip peers
// (see DESIGN.md); later starts recover from the data dir.
func Open(cfg Config, f *fsm.FSM) (*Node, error) {
	cfg.setDefaults()
	if cfg.ID == "" {
		return nil, errors.New("open node: empty id")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("open node: data dir: %w", err)
	}
	n := &Node{
		cfg:     cfg,
		log:     cfg.Logger,
		fsm:     f,
		creates: make(chan *createCall, maxCreateBatch*4),
		closing: make(chan struct{}),
	}
	n.readRounds = &roundBatcher{fn: n.fetchReadIndex}
	hasState, err := n.openRaft()
	if err != nil {
		return nil, err
	}
	n.clicks = newClickCounter(cfg.ID, f)
	if cfg.GossipAddr != "" {
		if err := n.startGossip(hasState); err != nil {
			n.shutdownRaft()
			return nil, err
		}
		n.wg.Add(1)
		go n.runMembership(!hasState && cfg.BootstrapExpect > 1)
	}
	n.wg.Add(3)
	go n.runCreateBatcher()
	go n.runClickFlusher()
	go n.runLeaderDuties()
	return n, nil
}

// openRaft starts Raft and reports whether the data dir held Raft state.
func (n *Node) openRaft() (bool, error) {
	dir := n.cfg.DataDir
	hlog := hclog.New(&hclog.LoggerOptions{
		Name: "raft", Level: hclog.LevelFromString(n.cfg.RaftLogLevel), Output: os.Stderr,
	})
	store, err := raftboltdb.New(raftboltdb.Options{
		Path: filepath.Join(dir, "raft.db"),
		// Skipping the freelist sync makes each append cheaper; bolt rebuilds
		// the freelist on open instead.
		BoltOptions: &bbolt.Options{Timeout: time.Second, NoFreelistSync: true},
	})
	if err != nil {
		return false, fmt.Errorf("open raft store (is another linkraft using %s?): %w", dir, err)
	}
	logs, err := raft.NewLogCache(1024, store)
	if err != nil {
		store.Close()
		return false, fmt.Errorf("open log cache: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hlog)
	if err != nil {
		store.Close()
		return false, fmt.Errorf("open snapshot store: %w", err)
	}
	advertise, err := advertiseAddr(n.cfg.RaftAddr, n.cfg.Advertise)
	if err != nil {
		store.Close()
		return false, err
	}
	layer, err := secure.NewStreamLayer(n.cfg.RaftAddr, advertise, n.cfg.Key)
	if err != nil {
		store.Close()
		return false, fmt.Errorf("open raft transport: %w", err)
	}
	transport := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: layer, MaxPool: 3, Timeout: 10 * time.Second, Logger: hlog,
	})

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.ID)
	rc.Logger = hlog
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	// Half the library's 1 s defaults: a follower notices a dead leader
	// after 0.5-1 s instead of 1-2 s. Heartbeats go out every 50 ms on
	// their own goroutines, so a busy disk does not cause false elections
	// on a LAN; the lease must not exceed the heartbeat timeout.
	rc.HeartbeatTimeout = 500 * time.Millisecond
	rc.ElectionTimeout = 500 * time.Millisecond
	rc.LeaderLeaseTimeout = 500 * time.Millisecond
	r, err := raft.NewRaft(rc, n.fsm, logs, store, snaps, transport)
	if err != nil {
		transport.Close()
		store.Close()
		return false, fmt.Errorf("start raft: %w", err)
	}
	n.raft, n.layer, n.transport, n.store = r, layer, transport, store

	hasState, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		n.shutdownRaft()
		return false, fmt.Errorf("inspect raft state: %w", err)
	}
	if !hasState && n.cfg.BootstrapExpect <= 1 && len(n.cfg.Join) == 0 {
		cfg := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: rc.LocalID, Address: transport.LocalAddr(),
		}}}
		if err := r.BootstrapCluster(cfg).Error(); err != nil {
			n.shutdownRaft()
			return false, fmt.Errorf("bootstrap: %w", err)
		}
		n.log.Info("bootstrapped a single-voter cluster", "id", n.cfg.ID, "raft_addr", transport.LocalAddr())
		hasState = true
	}
	return hasState, nil
}

// advertiseAddr returns the address other nodes dial: advertise's host with
// bind's port when advertise has no port. Raft refuses unspecified addresses.
func advertiseAddr(bind, advertise string) (*net.TCPAddr, error) {
	_, port, err := net.SplitHostPort(bind)
	if err != nil {
		return nil, fmt.Errorf("raft address %q: %w", bind, err)
	}
	addr := bind
	if advertise != "" {
		addr = advertise
		if _, _, err := net.SplitHostPort(advertise); err != nil {
			addr = net.JoinHostPort(advertise, port)
		}
	}
	tcp, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("advertise address %q: %w", addr, err)
	}
	if tcp.IP == nil || tcp.IP.IsUnspecified() {
		return nil, fmt.Errorf("raft address %q is not reachable by other nodes: set --advertise", addr)
	}
	return tcp, nil
}

// FSM is the state this node applies; read it directly.
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// ID is this node's server ID.
func (n *Node) ID() string { return n.cfg.ID }

// IsLeader reports whether this node currently leads.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Close flushes pending clicks (bounded by the write timeout), stops the
// background work and shuts Raft down. With LeaveOnTerminate a leader first
// hands leadership to another voter, and the node leaves the cluster after
// flushing. Safe to call more than once.
func (n *Node) Close() error {
	var err error
	n.closeOnce.Do(func() {
		if n.cfg.LeaveOnTerminate {
			n.handOffLeadership()
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.WriteTimeout)
		if ferr := n.FlushClicks(ctx); ferr != nil {
			n.log.Warn("final click flush failed", "err", ferr)
		}
		cancel()
		if n.cfg.LeaveOnTerminate {
			n.leaveCluster()
		}
		close(n.closing)
		n.wg.Wait()
		if n.gossip != nil {
			if gerr := n.gossip.shutdown(); gerr != nil {
				n.log.Warn("gossip shutdown", "err", gerr)
			}
		}
		err = n.shutdownRaft()
	})
	return err
}

// otherVoters counts the voters besides this node.
func (n *Node) otherVoters() int {
	servers, err := n.configuration()
	if err != nil {
		return 0
	}
	others := 0
	for _, s := range servers {
		if s.Suffrage == raft.Voter && s.ID != raft.ServerID(n.cfg.ID) {
			others++
		}
	}
	return others
}

func (n *Node) handOffLeadership() {
	if !n.IsLeader() || n.otherVoters() == 0 {
		return
	}
	if err := n.TransferLeadership(); err != nil {
		n.log.Warn("leadership transfer before leaving failed", "err", err)
		return
	}
	n.log.Info("handed leadership over before leaving", "leader", n.Leader())
}

// leaveCluster announces the leave over gossip and has the leader remove
// this node (askRemoval; directly when it still leads). It waits, bounded
// by the write timeout, until the removal is visible here.
func (n *Node) leaveCluster() {
	if n.otherVoters() == 0 {
		n.log.Info("last voter: staying in the configuration")
		return
	}
	if n.gossip != nil {
		if err := n.gossip.leave(n.cfg.WriteTimeout); err != nil {
			n.log.Warn("leaving gossip", "err", err)
		}
	}
	if err := n.askRemoval(); err != nil {
		n.log.Warn("asking the leader to remove this node", "err", err)
	}
	deadline := time.Now().Add(n.cfg.WriteTimeout)
	for time.Now().Before(deadline) {
		if !n.inConfiguration() {
			n.log.Info("left the cluster")
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.log.Warn("still in the Raft configuration after leaving; the leader will remove it when it sees the leave")
}

// askRemoval has the leader remove this node, or removes it directly when
// this node still leads, retrying until the write timeout.
func (n *Node) askRemoval() error {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.WriteTimeout)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"id": n.cfg.ID})
	return n.retry(ctx, 100*time.Millisecond, func() (bool, error) {
		var answer struct{}
		err := n.callLeader(ctx, fasthttp.MethodPost, LeavePath, body, &answer)
		if errors.Is(err, ErrLeaderIsSelf) {
			err = n.Leave(n.cfg.ID)
		}
		return err == nil, err
	})
}

func (n *Node) inConfiguration() bool {
	servers, err := n.configuration()
	if err != nil {
		return true
	}
	for _, s := range servers {
		if s.ID == raft.ServerID(n.cfg.ID) {
			return true
		}
	}
	return false
}

func (n *Node) shutdownRaft() error {
	var errs []error
	if err := n.raft.Shutdown().Error(); err != nil {
		errs = append(errs, fmt.Errorf("raft shutdown: %w", err))
	}
	if err := n.transport.Close(); err != nil {
		errs = append(errs, fmt.Errorf("transport close: %w", err))
	}
	if err := n.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("store close: %w", err))
	}
	return errors.Join(errs...)
}

// retry calls try until it reports done and returns try's error. Between
// tries it waits every; when ctx ends it returns the last error, and when
// the node closes, ErrClosed. Every caller waits on something beyond this
// node (a leader, a peer), so each gives up at its own deadline.
func (n *Node) retry(ctx context.Context, every time.Duration, try func() (done bool, err error)) error {
	for {
		done, err := try()
		if done {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-n.closing:
			return ErrClosed
		case <-time.After(every):
		}
	}
}

// waitLeader blocks until this node leads with an initialised FSM, or ctx
// ends. Writes that reach a follower are forwarded by httpd before they get
// here; this covers a leader that is still being elected or initialised.
func (n *Node) waitLeader(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if n.IsLeader() && n.fsm.Initialized() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ErrNoLeader
		case <-n.closing:
			return ErrClosed
		case <-t.C:
		}
	}
}

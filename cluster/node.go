package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/fsm"
)

// Config is what a node needs to start. Zero durations take defaults.
type Config struct {
	ID        string
	DataDir   string
	RaftAddr  string // address the Raft transport binds
	Advertise string // host (or host:port) other nodes reach this one at; default RaftAddr's
	// BootstrapExpect is the number of voters to bootstrap with; 1 (or 0)
	// bootstraps this node alone on first start.
	BootstrapExpect    int
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

// Errors of the write path. Both mean "try again later" to a client.
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
	transport *raft.NetworkTransport
	store     *raftboltdb.BoltStore

	creates chan *createCall
	clicks  *clickCounter

	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// Open starts a node on its data dir. On first start with BootstrapExpect
// of at most 1 it bootstraps a single-voter cluster; later starts recover
// from the data dir.
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
	if err := n.openRaft(); err != nil {
		return nil, err
	}
	n.clicks = newClickCounter(cfg.ID, f)
	n.wg.Add(3)
	go n.runCreateBatcher()
	go n.runClickFlusher()
	go n.runLeaderDuties()
	return n, nil
}

func (n *Node) openRaft() error {
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
		return fmt.Errorf("open raft store: %w", err)
	}
	logs, err := raft.NewLogCache(1024, store)
	if err != nil {
		store.Close()
		return fmt.Errorf("open log cache: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hlog)
	if err != nil {
		store.Close()
		return fmt.Errorf("open snapshot store: %w", err)
	}
	advertise, err := advertiseAddr(n.cfg.RaftAddr, n.cfg.Advertise)
	if err != nil {
		store.Close()
		return err
	}
	transport, err := raft.NewTCPTransportWithLogger(n.cfg.RaftAddr, advertise, 3, 10*time.Second, hlog)
	if err != nil {
		store.Close()
		return fmt.Errorf("open raft transport: %w", err)
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.ID)
	rc.Logger = hlog
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	r, err := raft.NewRaft(rc, n.fsm, logs, store, snaps, transport)
	if err != nil {
		transport.Close()
		store.Close()
		return fmt.Errorf("start raft: %w", err)
	}
	n.raft, n.transport, n.store = r, transport, store

	hasState, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		n.shutdownRaft()
		return fmt.Errorf("inspect raft state: %w", err)
	}
	if !hasState && n.cfg.BootstrapExpect <= 1 {
		cfg := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: rc.LocalID, Address: transport.LocalAddr(),
		}}}
		if err := r.BootstrapCluster(cfg).Error(); err != nil {
			n.shutdownRaft()
			return fmt.Errorf("bootstrap: %w", err)
		}
		n.log.Info("bootstrapped a single-voter cluster", "id", n.cfg.ID, "raft_addr", transport.LocalAddr())
	}
	return nil
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
// background work and shuts Raft down. Safe to call more than once.
func (n *Node) Close() error {
	var err error
	n.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.WriteTimeout)
		if ferr := n.FlushClicks(ctx); ferr != nil {
			n.log.Warn("final click flush failed", "err", ferr)
		}
		cancel()
		close(n.closing)
		n.wg.Wait()
		err = n.shutdownRaft()
	})
	return err
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

// waitLeader blocks until this node leads with an initialised FSM, or ctx
// ends. Forwarding to another leader comes with multi-node clusters.
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

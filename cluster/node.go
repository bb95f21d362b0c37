package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/cluster/backups"
	"github.com/linkraft/linkraft/cluster/certs"
	"github.com/linkraft/linkraft/cluster/clicks"
	"github.com/linkraft/linkraft/cluster/duties"
	"github.com/linkraft/linkraft/cluster/membership"
	"github.com/linkraft/linkraft/cluster/secure"
	"github.com/linkraft/linkraft/cluster/webhooks"
	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
)

// Config is what a node needs to start: who it is, where it listens and
// keeps its state, and each subsystem's settings. Zero durations take
// defaults.
type Config struct {
	ID         string
	DataDir    string
	RaftAddr   string // address the Raft transport binds
	GossipAddr string // address memberlist binds; empty: no discovery
	HTTPAddr   string // this node's HTTP address as the other nodes reach it
	Advertise  string // host other nodes reach this one at; default: the bind addresses'
	// Key authenticates and encrypts everything between nodes: Raft and
	// the internal HTTP on its port (mutual TLS), and gossip. Required,
	// loopback included: a process on the same host is a peer only if it
	// holds the key.
	Key    *secure.Key
	Logger *slog.Logger

	Discovery  DiscoveryConfig
	Membership MembershipConfig
	Raft       RaftConfig
	Writes     WriteConfig
	Leader     LeaderConfig
	Backups    BackupConfig
	// ACME, when set, has the leader order and renew the certificates
	// every node serves (certificates.go).
	ACME *ACMEConfig
}

// DiscoveryConfig is how a node finds the others over gossip and forms a
// cluster with them (discovery.go, seeds.go).
type DiscoveryConfig struct {
	// Seeds are gossip addresses of members to join (--join); a node with
	// seeds and no Raft state waits to be added to their cluster. An entry
	// may be a host name: every join attempt resolves it again, through
	// Resolver, and joins all its addresses.
	Seeds    []string
	Resolver Resolver // default: net.DefaultResolver
	// BootstrapExpect is the number of servers that bootstrap a new cluster
	// together. With 1 (or 0) and no Seeds, a node bootstraps alone on
	// first start; with Seeds it waits to be added to a cluster.
	BootstrapExpect int
}

// MembershipConfig is this server's own part in the membership.
type MembershipConfig struct {
	// ReadReplica makes this node a read replica: it advertises so over
	// gossip, the leader adds it as a non-voter (it never counts towards
	// the quorum nor becomes leader), and it never bootstraps a cluster nor
	// counts as one of BootstrapExpect's servers: it waits to be added.
	ReadReplica bool
	// LeaveOnTerminate: Close hands leadership over and leaves the
	// cluster (leave.go).
	LeaveOnTerminate bool
}

// RaftConfig is Raft's settings.
type RaftConfig struct {
	// SnapshotThreshold is how many log entries since the last snapshot
	// make Raft take a new one (0: the library's 8192).
	SnapshotThreshold uint64
	// SnapshotBytes is how many bytes of log entries applied since the
	// last snapshot also make the node take one (0: 64 MiB; see
	// snapshot.go).
	SnapshotBytes int64
	// LogLevel is the level of Raft's and memberlist's logs (default: warn).
	LogLevel string
	// CommitTimeout is how long a leader with nothing new to send waits
	// before it tells followers the commit index (0: the library's 50 ms).
	CommitTimeout time.Duration
}

// WriteConfig is the write path's settings.
type WriteConfig struct {
	// Timeout bounds a write, and the wait for a leader of every request
	// that needs one.
	Timeout time.Duration
	// AllowPrivateTargets lets creates relayed by other nodes point inside
	// the network, as --allow-private-targets lets clients' creates.
	AllowPrivateTargets bool
	// ClickFlushInterval is how often the node's clicks are flushed.
	ClickFlushInterval time.Duration
}

// LeaderConfig is what the leader does on its own (leadership.go).
type LeaderConfig struct {
	// ExpiredRetention is how long an expired link keeps answering 410
	// before the leader purges it (after which its code answers 404).
	ExpiredRetention time.Duration
	// InitialKeyFile is where this node writes the admin API key it
	// creates when it leads a cluster that has no keys (empty: it never
	// creates one; set when the node has no --admin-token).
	InitialKeyFile string
}

// BackupConfig is the scheduled backups and the restore at start
// (backupduty.go).
type BackupConfig struct {
	// Store, when set, receives a backup every Interval from the leader,
	// which keeps Retain of them.
	Store    backups.Store
	Interval time.Duration
	Retain   int
	// RestoreFrom (--restore-from), with RestoreS3 for an s3:// source:
	// the leader of a cluster that has no state yet installs the newest
	// good backup of this source before it takes writes.
	RestoreFrom string
	RestoreS3   backups.S3Options
}

func (c *Config) setDefaults() {
	if c.Writes.Timeout <= 0 {
		c.Writes.Timeout = 5 * time.Second
	}
	if c.Writes.ClickFlushInterval <= 0 {
		c.Writes.ClickFlushInterval = time.Second
	}
	if c.Leader.ExpiredRetention <= 0 {
		c.Leader.ExpiredRetention = 24 * time.Hour
	}
	if c.Raft.SnapshotBytes <= 0 {
		c.Raft.SnapshotBytes = defaultSnapshotBytes
	}
	if c.Discovery.Resolver == nil {
		c.Discovery.Resolver = net.DefaultResolver
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Raft.LogLevel == "" {
		c.Raft.LogLevel = "warn"
	}
}

// Errors of the write path. Each means "try again later" to a client.
var (
	ErrNoLeader = membership.ErrNoLeader // one error: membership refuses with it too
	ErrTimeout  = errors.New("write not confirmed in time; it may still be applied")
	ErrClosed   = errors.New("node is shutting down")
)

// Node is one running member: Raft, its stores, and the write machinery.
type Node struct {
	cfg     Config
	log     *slog.Logger
	fsm     *fsm.FSM
	machine *appliedFSM // fsm as Raft drives it: announces what it applies
	raft    *raft.Raft
	// raftStopped: Raft was shut down (stopRaft). Its own State may read
	// Follower again afterwards, set by an RPC it was still handling.
	raftStopped atomic.Bool
	layer       *secure.StreamLayer
	transport   *raft.NetworkTransport
	store       *boltStore // raft.db: the log and stable store (storepages.go)
	// addrs is where each server is now: what gossip says, else the
	// configuration (addresses.go).
	addrs *addressBook
	// members makes this node's changes to the configuration while it
	// leads, and runs the membership duties (package membership).
	members *membership.Membership

	// creates is the path of a create: the queues of the creates this node
	// proposes and relays, and the commit pusher (write.go, relay.go).
	creates *createPath
	clicks  *clicks.Counter
	// proposals is held for reading while an entry is handed to Raft and
	// for writing by a restore, which must see every change before it
	// merges the current state into the backup (see backup.go).
	proposals sync.RWMutex

	gossip *gossip
	peers  *peerClient
	// service serves HTTP on the Raft port: the node-to-node protocol and
	// the public requests forwarded to this node (service.go).
	service    *peerService
	readRounds *roundBatcher

	// leadership is who leads, and whether this node's term is ready
	// (leaderwatch.go).
	leadership *leaderWatch

	metrics *metrics // see metrics.go
	// hooks delivers the webhooks while this node leads (webhooks.go).
	hooks  *webhooks.Delivery
	levels *entryLevels
	// certs orders certificates while this node leads; nil without ACME.
	certs *certs.Manager
	// backups writes the backups while this node leads; nil without a
	// Backups.Store (backupduty.go).
	backups *backups.Scheduler
	// incarnation is the random id of the data dir, made with it
	// (removed.go).
	incarnation string
	// standing is this server's own side of membership: the suffrage it
	// asks for, its leave, its retirement once removed (removed.go).
	standing *standing

	closing chan struct{}
	// stopping ends when Close begins, before its final flush: background
	// writes give up then instead of holding that flush back.
	stopping     context.Context
	stopStopping context.CancelFunc
	closeOnce    sync.Once
	wg           sync.WaitGroup
}

// Open starts a node on its data dir. On first start with BootstrapExpect
// of at most 1 and no Seeds (Config.Discovery) it bootstraps a single-voter cluster; with
// a larger BootstrapExpect it bootstraps together with its gossip peers
// (see DESIGN.md); later starts recover from the data dir.
func Open(cfg Config, f *fsm.FSM) (*Node, error) {
	cfg.setDefaults()
	if cfg.ID == "" {
		return nil, errors.New("open node: empty id")
	}
	if cfg.Key == nil {
		return nil, errors.New("open node: no cluster key (--cluster-key-file, LINKRAFT_CLUSTER_KEY or --cluster-key; " +
			"without one linkraft serve makes <data-dir>/cluster.key)")
	}
	if err := ownerOnlyDir(cfg.DataDir, cfg.Logger); err != nil {
		return nil, fmt.Errorf("open node: %w", err)
	}
	nonvoter, err := loadNonvoter(cfg)
	if err != nil {
		return nil, fmt.Errorf("open node: %w", err)
	}
	incarnation, err := loadIncarnation(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("open node: %w", err)
	}
	n := newNode(cfg, f)
	n.standing.nonvoter.Store(nonvoter)
	n.incarnation = incarnation
	hasState, err := n.openRaft()
	if err != nil {
		return nil, err
	}
	// Gossip is in place before the cluster port serves and the
	// background work starts: both read n.gossip without a lock. A data
	// dir removed from its cluster starts neither Raft's elections nor
	// gossip (removed.go).
	retired := n.standing.retireIfMarked()
	if cfg.GossipAddr != "" && !retired {
		if err := startGossip(n, hasState); err != nil {
			n.shutdownRaft()
			return nil, err
		}
	}
	n.start()
	if cfg.GossipAddr != "" {
		bootstrapping := !hasState && cfg.Discovery.BootstrapExpect > 1 && !cfg.Membership.ReadReplica
		if n.gossip != nil { // a data dir removed from its cluster starts no gossip (removed.go)
			n.spawn(func() { n.gossip.runDiscovery(bootstrapping) })
		}
	}
	n.spawn(n.standing.watchRemoval)
	return n, nil
}

// newNode assembles a node and what needs no Raft yet.
func newNode(cfg Config, f *fsm.FSM) *Node {
	n := &Node{
		cfg:     cfg,
		log:     cfg.Logger,
		fsm:     f,
		machine: &appliedFSM{FSM: f, volume: newLogVolume(cfg.Raft.SnapshotBytes)},
		metrics: newMetrics(),
		closing: make(chan struct{}),
	}
	n.stopping, n.stopStopping = context.WithCancel(context.Background())
	n.standing = &standing{n: n}
	n.hooks = webhooks.New(f, n.machine.applied.wait, ackProposer{n}, cfg.Logger, cfg.Writes.AllowPrivateTargets)
	n.certs = newCertManager(n, cfg.ACME)
	if cfg.Backups.Store != nil {
		n.backups = backups.New(backups.Config{Store: cfg.Backups.Store, Source: backupSource{n}, Interval: cfg.Backups.Interval,
			Retain: cfg.Backups.Retain, SpoolDir: cfg.DataDir, Logger: cfg.Logger})
	}
	n.addrs = newAddressBook(f.ClusterID)
	n.readRounds = &roundBatcher{fn: n.fetchReadIndex}
	servers := func() ([]raft.Server, error) { return configuration(n.raft) } // once Raft runs
	n.levels = &entryLevels{self: raft.ServerID(cfg.ID), dir: cfg.DataDir, log: cfg.Logger, servers: servers}
	n.levels.load()
	dial := func(addr string, timeout time.Duration) (net.Conn, error) { return n.layer.DialInternal(addr, timeout) }
	n.peers = &peerClient{Client: wire.NewClient(cfg.ID, dial), timeout: cfg.Writes.Timeout,
		self: raft.ServerID(cfg.ID), addrs: n.addrs, log: n.log,
		heard: func(info wire.NodeInfo) { n.levels.heard(raft.ServerID(info.ID), max(info.EntryLevel, fsm.LevelKeys)) }}
	n.levels.ask = askLevel(n.peers, n.addrs)
	return n
}

// start assembles what needs Raft, serves the cluster port and starts the
// background work.
func (n *Node) start() {
	n.leadership = &leaderWatch{raft: n.raft, self: raft.ServerID(n.cfg.ID), closing: n.closing}
	n.creates = &createPath{timeout: n.cfg.Writes.Timeout, allowPrivate: n.cfg.Writes.AllowPrivateTargets, closing: n.closing,
		metrics: n.metrics, leadership: n.leadership, levels: n.levels, peers: n.peers,
		machine: n.machine, apply: n.apply}
	n.creates.newQueues()
	n.clicks = newClickCounter(n)
	n.members = newMembership(n)
	n.service = startPeerService(n) // last of the fields: its handlers read them
	n.spawn(n.leadership.run)
	n.spawn(leaderLoop{n: n, duties: duties.New()}.monitor)
	n.spawn(func() { n.creates.proposer.Run(n.closing) })
	n.spawn(func() { n.creates.relay.Run(n.closing) })
	n.spawn(func() { n.clicks.Run(n.stopping, n.cfg.Writes.ClickFlushInterval) })
	n.spawn(func() { compactor{n.raft, n.store, n.log}.run(n.machine.volume, n.closing) })
	n.spawn(func() { n.levels.watch(n.stopping) })
}

// spawn runs f on a goroutine of its own that Close waits for: every
// goroutine of the node's background work starts here.
func (n *Node) spawn(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// OnLoopback reports whether addr (host:port, or a host alone as
// --advertise may be) names a loopback host. A name other than localhost
// is not resolved here: it may point anywhere.
func OnLoopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// raftRPCTimeout bounds each Raft RPC's I/O and each dial (snapshots get
// more, in proportion to their size). During a partition a connection holds
// unacknowledged bytes that TCP resends on a backoff of seconds, and a dial
// waits on SYN retries; a short bound makes the leader drop such a
// connection and dial afresh, so a follower hears from it within about a
// second of a heal instead of two or three. A LAN is assumed, as the 500 ms
// election timeout already does.
const raftRPCTimeout = time.Second

// openRaft starts Raft and reports whether the data dir held Raft state.
// Whatever it opened before an error is closed on one path, the deferred
// cleanup: Raft with everything under it once it runs, else the transport
// and the store.
func (n *Node) openRaft() (hasState bool, err error) {
	var (
		store     *raftboltdb.BoltStore
		transport *raft.NetworkTransport
	)
	defer func() {
		switch {
		case err == nil:
		case n.raft != nil:
			n.shutdownRaft()
		default:
			if transport != nil {
				transport.Close()
			}
			if store != nil {
				store.Close()
			}
		}
	}()

	dir := n.cfg.DataDir
	hlog := NewHCLogger(n.log, "raft", hclog.LevelFromString(n.cfg.Raft.LogLevel))
	dbPath := filepath.Join(dir, "raft.db")
	store, err = openBoltStore(dbPath, dir)
	if err != nil {
		return false, err
	}
	stable := newBoltStore(store, dbPath)
	logs, err := raft.NewLogCache(1024, stable)
	if err != nil {
		return false, fmt.Errorf("open log cache: %w", err)
	}
	snaps, err := openSnapshots(dir, hlog)
	if err != nil {
		return false, err
	}
	layer, transport, err := openTransport(n.cfg, n.addrs, hlog)
	if err != nil {
		return false, err
	}
	snaps.sendFiles = filesGate(n.levels, &n.addrs.raft, n.stopping)
	n.machine.received = snaps.received
	rc := raftConfig(n.cfg, hlog)
	rc.NoSnapshotRestoreOnStart = resumeState(n.machine, snaps, logs, n.log)
	r, err := raft.NewRaft(rc, n.machine, logs, stable, snaps, checkedTransport{transport})
	if err != nil {
		// A snapshot Raft could not restore is damage an operator repairs.
		if serr := checkSnapshots(snaps); serr != nil {
			return false, damaged(serr, dir)
		}
		return false, fmt.Errorf("start raft: %w", err)
	}
	n.raft, n.layer, n.transport, n.store = r, layer, transport, stable
	n.machine.raftApplied = r.AppliedIndex
	n.addrs.raft.Store(r)
	// The start-up check (verifyLog) read the whole log through bbolt's
	// map; none of it needs to stay in the process.
	compactor{r, stable, n.log}.releasePages()

	hasState, err = raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return false, fmt.Errorf("inspect raft state: %w", err)
	}
	if hasState && n.cfg.Backups.RestoreFrom != "" {
		n.log.Info("--restore-from does nothing here: this node has Raft state", "source", n.cfg.Backups.RestoreFrom)
	}
	if hasState {
		return true, nil
	}
	return bootstrapAlone(r, n.cfg, transport.LocalAddr(), n.log)
}

// openBoltStore checks raft.db at dbPath (in the data dir dir), opens it
// and checks its log.
func openBoltStore(dbPath, dir string) (*raftboltdb.BoltStore, error) {
	if err := checkStore(dbPath); err != nil {
		return nil, damaged(err, dir)
	}
	store, err := raftboltdb.New(raftboltdb.Options{
		Path: dbPath,
		// Skipping the freelist sync makes each append cheaper; bolt rebuilds
		// the freelist on open instead.
		BoltOptions: &bbolt.Options{Timeout: time.Second, NoFreelistSync: true},
	})
	if err != nil {
		return nil, fmt.Errorf("open raft store (is another linkraft using %s?): %w", dir, err)
	}
	if err := verifyLog(store); err != nil {
		store.Close()
		return nil, damaged(err, dir)
	}
	return store, nil
}

// openSnapshots opens the snapshot store of the data dir dir, owner-only.
func openSnapshots(dir string, hlog hclog.Logger) (ownerOnlySnapshots, error) {
	files, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hlog)
	if err != nil {
		return ownerOnlySnapshots{}, fmt.Errorf("open snapshot store: %w", err)
	}
	snapsDir := filepath.Join(dir, "snapshots") // where the store keeps them
	if _, err := ownerOnly(snapsDir); err != nil {
		return ownerOnlySnapshots{}, fmt.Errorf("open snapshot store: %w", err)
	}
	// What a stop cut short holds hard links to engine files, which would
	// stay on disk for good: snapshots never finished, copies of
	// checkpoints being read (ownerOnlySnapshots.Open).
	for _, pattern := range []string{filepath.Join(snapsDir, "*.tmp"), filepath.Join(dir, "referred-*")} {
		left, _ := filepath.Glob(pattern)
		for _, p := range left {
			if err := os.RemoveAll(p); err != nil {
				return ownerOnlySnapshots{}, fmt.Errorf("open snapshot store: %w", err)
			}
		}
	}
	return ownerOnlySnapshots{FileSnapshotStore: files, dir: snapsDir, received: &receivedFiles{}}, nil
}

// openTransport opens the stream layer on the Raft address and Raft's
// transport over it, which dials each server where addrs says.
func openTransport(cfg Config, addrs *addressBook, hlog hclog.Logger) (*secure.StreamLayer, *raft.NetworkTransport, error) {
	advertise, err := advertiseAddr(cfg.RaftAddr, cfg.Advertise)
	if err != nil {
		return nil, nil, err
	}
	layer, err := secure.NewStreamLayer(cfg.RaftAddr, advertise, cfg.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("open raft transport: %w", err)
	}
	// Raft dials each server where gossip says it is now, falling back to
	// the configuration's address (addresses.go). The connection pool is
	// keyed by the address dialled, so a server that moved is dialled
	// afresh; the few idle connections to its old address are never used
	// again and go when the transport closes.
	addrs.self, addrs.selfAddr = raft.ServerID(cfg.ID), raft.ServerAddress(advertise.String())
	transport := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: layer, MaxPool: 3, Timeout: raftRPCTimeout, Logger: hlog,
		ServerAddressProvider: addrs,
	})
	return layer, transport, nil
}

// raftConfig is Raft's configuration for a node of cfg.
func raftConfig(cfg Config, hlog hclog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hlog
	// Per-peer replication metrics only as labels (peer_id), not also as
	// one metric name per peer.
	rc.NoLegacyTelemetry = true
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	if cfg.Raft.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.Raft.SnapshotThreshold
	}
	if cfg.Raft.CommitTimeout > 0 {
		rc.CommitTimeout = cfg.Raft.CommitTimeout
	}
	// The threshold is only looked at this often (the library's default is
	// 120 s); the look is a comparison of two indexes.
	rc.SnapshotInterval = 10 * time.Second
	// Entries kept behind a snapshot for followers slightly behind. The
	// library keeps 10240, which with entries of hundreds of batched
	// creates is millions of links: the log would never shrink after an
	// import, and every start decodes all of it (storecheck.go). A
	// follower further behind installs the snapshot instead (a million
	// links in about a second, docs/BENCHMARKS.md).
	rc.TrailingLogs = 1024
	// Half the library's 1 s defaults: a follower notices a dead leader
	// after 0.5-1 s instead of 1-2 s. Heartbeats go out every 50 ms on
	// their own goroutines, so a busy disk does not cause false elections
	// on a LAN; the lease must not exceed the heartbeat timeout.
	rc.HeartbeatTimeout = 500 * time.Millisecond
	rc.ElectionTimeout = 500 * time.Millisecond
	rc.LeaderLeaseTimeout = 500 * time.Millisecond
	return rc
}

// bootstrapAlone bootstraps a cluster of one on a first start alone, and
// reports whether it did; with peers to expect or seeds to join, or as a
// read replica, the node waits to be added instead.
func bootstrapAlone(r *raft.Raft, cfg Config, addr raft.ServerAddress, log *slog.Logger) (bool, error) {
	if cfg.Discovery.BootstrapExpect > 1 || len(cfg.Discovery.Seeds) > 0 || cfg.Membership.ReadReplica {
		return false, nil
	}
	servers := raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(cfg.ID), Address: addr,
	}}}
	if err := r.BootstrapCluster(servers).Error(); err != nil {
		return false, fmt.Errorf("bootstrap: %w", err)
	}
	log.Info("bootstrapped a single-voter cluster", "id", cfg.ID, "raft_addr", addr)
	return true, nil
}

// damaged says what an operator does about a damaged raft.db.
func damaged(err error, dir string) error {
	return fmt.Errorf("%w; this node cannot start from it. Move %s aside and start the node with an empty data dir: "+
		"a cluster member rejoins and receives the state from the leader (a single node: restore a backup)", err, dir)
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
func (n *Node) IsLeader() bool { return raftState(n) == raft.Leader }

// stopRaft shuts n's Raft down, waiting for its goroutines to end.
func stopRaft(n *Node) error {
	n.raftStopped.Store(true)
	return n.raft.Shutdown().Error()
}

// raftState is n's Raft's state, Shutdown from stopRaft on.
func raftState(n *Node) raft.RaftState {
	if n.raftStopped.Load() {
		return raft.Shutdown
	}
	return n.raft.State()
}

// finalFlushTimeout bounds the last click flush of a stop, so that a node
// without a leader stops well within the few seconds process managers
// grant (foreman: 5 s, Kubernetes: 30 s) and saves its clicks instead.
const finalFlushTimeout = 2 * time.Second

// Close flushes pending clicks (bounded by finalFlushTimeout; what cannot
// be flushed is saved in the data dir for the next start), stops the
// background work and shuts Raft down. With Membership.LeaveOnTerminate a leader first
// hands leadership to another voter, and the node leaves the cluster after
// flushing. Safe to call more than once.
func (n *Node) Close() error {
	var err error
	n.closeOnce.Do(func() {
		n.stopStopping()
		if n.cfg.Membership.LeaveOnTerminate {
			n.standing.handOffLeadership()
		}
		ctx, cancel := context.WithTimeout(context.Background(), min(n.cfg.Writes.Timeout, finalFlushTimeout))
		if ferr := n.clicks.Flush(ctx); ferr != nil {
			if serr := n.clicks.Save(); serr != nil {
				n.log.Error("final click flush failed, and saving the clicks failed too: they are lost", "flush_err", ferr, "err", serr)
			} else {
				n.log.Info("no leader to take the last clicks: saved them for the next start", "err", ferr)
			}
		}
		cancel()
		if n.cfg.Membership.LeaveOnTerminate {
			n.standing.leave()
		}
		close(n.closing)
		n.wg.Wait()
		if n.gossip != nil {
			if gerr := n.gossip.shutdown(); gerr != nil {
				n.log.Warn("gossip shutdown", "err", gerr)
			}
		}
		err = n.shutdownRaft()
		keepState(n.fsm, n.log)
	})
	return err
}

func (n *Node) shutdownRaft() error {
	var errs []error
	if n.service != nil {
		// Requests in flight end with n.closing or the write timeout.
		if err := n.service.shutdown(n.cfg.Writes.Timeout); err != nil {
			errs = append(errs, err)
		}
	}
	if err := stopRaft(n); err != nil {
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

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprometheus "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/cluster/backups"
	"github.com/linkraft/linkraft/cluster/secure"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/httpd"
	"github.com/linkraft/linkraft/httpd/geo"
)

// serveConfig is every flag of "linkraft serve", as flagDefs declares
// them, and what their checks parsed.
type serveConfig struct {
	id, dataDir, httpAddr, raftAddr, gossipAddr, advertise, join string
	bootstrapExpect                                              int
	baseURL                                                      string
	codeLength, redirectStatus                                   int
	writeTimeout, clickFlushInterval, shutdownDrain              time.Duration
	snapshotThreshold                                            uint64
	engineCacheMB, optionCache, recordCache                      int
	allowPrivateTargets, publicCreate                            bool
	adminToken, clusterKey, clusterKeyFile                       string
	leaveOnTerminate, readReplica                                bool
	createRate                                                   float64
	createBurst                                                  int
	maxConnsPerIP                                                int
	trustedProxy, logLevel                                       string
	logFormat                                                    string
	accessLog                                                    bool
	tls                                                          tlsFlags
	backupTo, restoreFrom                                        string
	backupInterval                                               time.Duration
	backupRetain                                                 int
	backupS3                                                     s3Flags
	corsOrigins                                                  string

	key              *secure.Key    // parsed --cluster-key
	keyOnCommandLine bool           // --cluster-key was a flag, not LINKRAFT_CLUSTER_KEY
	trusted          []netip.Prefix // parsed --trusted-proxy
}

const serveUsage = `Usage: linkraft serve [flags]

Run a node. With no flags: a single node, HTTP on 127.0.0.1:8080 (loopback
only), data in ./data,
its cluster key in ./data/cluster.key (made at its first start).
Every flag can also be set as LINKRAFT_<NAME> (--http-addr is
LINKRAFT_HTTP_ADDR); a flag on the command line wins over the environment.

Flags:
`

func parseServeFlags(args []string, stderr io.Writer) (*serveConfig, error) {
	host, _ := os.Hostname()
	c := &serveConfig{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, serveUsage)
		fs.PrintDefaults()
	}
	defs := c.flagDefs(host)
	registerFlags(fs, defs)
	if err := applyEnv(fs); err != nil {
		return nil, err
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) { c.keyOnCommandLine = c.keyOnCommandLine || f.Name == "cluster-key" })
	if err := checkFlags(defs); err != nil {
		return nil, err
	}
	c.baseURL = strings.TrimRight(c.baseURL, "/")
	return c, nil
}

func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, not %q", format)
}

func serve(args []string, stderr io.Writer) int {
	cfg, err := parseServeFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "linkraft serve:", err)
		return 2
	}
	log, err := newLogger(cfg.logLevel, cfg.logFormat, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "linkraft serve:", err)
		return 2
	}
	if err := runNode(cfg, log); err != nil {
		log.Error("linkraft stopped", "err", err)
		return 1
	}
	return 0
}

// runNode starts the node and its HTTP server and runs until SIGINT or
// SIGTERM. Shutdown order: drain (/health 503 while the node still serves,
// for --shutdown-drain; a leader hands leadership over), then stop
// accepting and finish in-flight requests, then flush clicks and stop Raft
// (cluster.Node.Close).
func runNode(cfg *serveConfig, log *slog.Logger) error {
	// From the first moment: a SIGTERM while the node opens (a systemctl
	// stop during a long start) waits for the open and then stops it as
	// any other stop, instead of killing the process halfway.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(stop)
	n, err := openNode(cfg, log)
	if err != nil {
		return err
	}
	defer n.close(log)
	s, err := buildServers(cfg, n, log)
	if err != nil {
		return err
	}
	defer s.https.close()
	defer tuneGC()()
	return serveUntilStopped(cfg, n, s, stop, log)
}

// openedNode is an open cluster member and the HTTP listener it serves
// on, which listens from before cluster.Open.
type openedNode struct {
	node       *cluster.Node
	state      *fsm.FSM // closed after the node, which applies to it until it stops
	ln         net.Listener
	key        *secure.Key
	advertised string               // the HTTP address operators' views show for it (advertisedHTTP)
	registry   *prometheus.Registry // Raft's metrics; httpd adds its own
}

// openNode finds the cluster key, listens on --http-addr and opens the
// node: Raft, gossip, scheduled backups.
func openNode(cfg *serveConfig, log *slog.Logger) (_ *openedNode, err error) {
	key, err := resolveClusterKey(cfg)
	if err != nil {
		return nil, err
	}
	key.log(log, cfg.keyOnCommandLine)
	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return nil, fmt.Errorf("listen http: %w", err)
	}
	defer func() {
		if err != nil {
			ln.Close()
		}
	}()

	// Anything written through the standard library's logger (go-metrics
	// reports its errors there) gets the same format as the rest.
	stdlog.SetFlags(0)
	stdlog.SetOutput(cluster.NewHCLogger(log, "log", hclog.Trace).StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true}))
	registry := prometheus.NewRegistry()
	if err := raftMetrics(registry); err != nil {
		return nil, err
	}

	var backupStore backups.Store
	if cfg.backupTo != "" {
		if backupStore, err = backups.Open(context.Background(), cfg.backupTo, cfg.backupS3.options(0)); err != nil {
			return nil, fmt.Errorf("--backup-to: %w", err)
		}
	}

	httpAdvertise := advertisedHTTP(ln.Addr(), cfg.advertise, cfg.raftAddr)
	acme, err := cfg.tls.acmeConfig()
	if err != nil {
		return nil, err
	}
	state, err := fsm.Open(fsm.Config{Dir: filepath.Join(cfg.dataDir, "engine"), BlockCacheBytes: int64(cfg.engineCacheMB) << 20, OptionCache: cfg.optionCache,
		RecordCache: cfg.recordCache,
		Logf:        func(format string, args ...any) { log.Error("state engine: " + fmt.Sprintf(format, args...)) }})
	if err != nil {
		return nil, err
	}
	node, err := cluster.Open(cluster.Config{
		ID: cfg.id, DataDir: cfg.dataDir, RaftAddr: cfg.raftAddr, GossipAddr: cfg.gossipAddr,
		HTTPAddr: httpAdvertise, Advertise: cfg.advertise, Key: key.key, Logger: log,
		Discovery:  cluster.DiscoveryConfig{Seeds: splitList(cfg.join), BootstrapExpect: cfg.bootstrapExpect},
		Membership: cluster.MembershipConfig{ReadReplica: cfg.readReplica, LeaveOnTerminate: cfg.leaveOnTerminate},
		Raft:       cluster.RaftConfig{SnapshotThreshold: cfg.snapshotThreshold},
		Writes: cluster.WriteConfig{Timeout: cfg.writeTimeout, ClickFlushInterval: cfg.clickFlushInterval,
			AllowPrivateTargets: cfg.allowPrivateTargets},
		Leader: cluster.LeaderConfig{InitialKeyFile: initialKeyFile(cfg)},
		Backups: cluster.BackupConfig{Store: backupStore, Interval: cfg.backupInterval, Retain: cfg.backupRetain,
			RestoreFrom: cfg.restoreFrom, RestoreS3: cfg.backupS3.options(0)},
		ACME: acme,
	}, state)
	if err != nil {
		state.Close()
		return nil, err
	}
	return &openedNode{node: node, state: state, ln: ln, key: key.key, advertised: httpAdvertise, registry: registry}, nil
}

// close stops the node (flushing its clicks) and then its HTTP listener.
func (n *openedNode) close(log *slog.Logger) {
	if err := n.node.Close(); err != nil {
		log.Error("closing node", "err", err)
	}
	n.state.Close()
	n.ln.Close()
}

// nodeServers are the node's HTTP server and, with TLS on, the gate of
// its HTTPS listener.
type nodeServers struct {
	http  *httpd.Server
	https *httpsGate // nil without TLS
}

// buildServers builds the HTTP server of n and, with TLS on, listens on
// --https-addr, so that a taken port fails the start.
func buildServers(cfg *serveConfig, n *openedNode, log *slog.Logger) (*nodeServers, error) {
	countries, err := geo.Load()
	if err != nil {
		return nil, err
	}
	baseURL, guessed, warn := shortURLBase(cfg.baseURL, n.ln.Addr(), n.advertised)
	var serverTLS *httpd.TLS
	var https *httpsGate
	if cfg.tls.enabled() {
		if serverTLS, https, err = cfg.tls.serverTLS(n.node, n.key, cfg.dataDir, log); err != nil {
			return nil, err
		}
		if err := https.listen(); err != nil {
			return nil, err
		}
		if cfg.baseURL == "" {
			baseURL, guessed, warn = cfg.tls.httpsBase(n.advertised), false, false
		}
	}
	switch {
	case warn:
		log.Warn("no --base-url: short URLs name this node's advertised address, not the Host header clients send; "+
			"set --base-url to the address clients use", "short_url_base", baseURL)
	case guessed:
		log.Info("no --base-url: short URLs name this machine's loopback address, which only clients on this machine reach; "+
			"set --base-url to the address clients use to share links beyond it", "short_url_base", baseURL)
	}
	srv := httpd.New(httpd.Config{
		BaseURL: baseURL, RedirectStatus: cfg.redirectStatus,
		CodeLength: cfg.codeLength, AllowPrivateTargets: cfg.allowPrivateTargets,
		AdminToken: cfg.adminToken, PublicCreate: cfg.publicCreate,
		CreateRate: cfg.createRate, CreateBurst: cfg.createBurst, TrustedProxies: cfg.trusted, MaxConnsPerIP: cfg.maxConnsPerIP,
		WriteTimeout: cfg.writeTimeout + 25*time.Second, Version: version, Logger: log,
		AccessLog: cfg.accessLog, Registry: n.registry, Countries: countries, TLS: serverTLS,
		CORSOrigins: splitList(cfg.corsOrigins), SignatureToken: n.key.SignatureToken,
	}, httpd.Of(n.node))
	return &nodeServers{http: srv, https: https}, nil
}

// serveUntilStopped serves on s until SIGINT or SIGTERM, or until a
// listener fails, and then stops serving: drain, then the listeners close
// and the requests in flight finish. Closing the node is left to runNode.
func serveUntilStopped(cfg *serveConfig, n *openedNode, s *nodeServers, stop <-chan os.Signal, log *slog.Logger) error {
	serveErr := make(chan error, 2)
	go func() { serveErr <- s.http.Serve(n.ln) }()
	s.https.serve(s.http.ServeTLS, serveErr, log) // once a handshake for every name can complete
	log.Info("linkraft serving", "id", cfg.id, "http", n.ln.Addr().String(), "raft", cfg.raftAddr, "version", version)

	// Ready now (and SIGTERM already handled gracefully), though Serve may
	// not have reached Accept yet: ln has listened since before
	// cluster.Open and the kernel queues connections until Serve takes
	// them, so a /health probe sent after READY=1 is answered, not refused.
	notifyReady(log, n.ln.Addr().String(), cfg.raftAddr)
	select {
	case sig := <-stop:
		log.Info("shutting down", "signal", sig.String(), "drain", cfg.shutdownDrain)
		notifyStopping(log, "signal "+sig.String())
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	}
	// A stop must not hang: what is acknowledged is on disk, so exiting
	// now is no worse than a crash, which the cluster tolerates. The
	// watchdog covers the drain (a leadership transfer included), the
	// HTTP server's stop and closing the node (deferred in runNode); the
	// process ends when runNode returns.
	var phase atomic.Value
	phase.Store("draining")
	budget := cfg.shutdownDrain + 2*cfg.writeTimeout + 5*time.Second
	time.AfterFunc(budget, func() {
		log.Error("shutdown is taking too long; exiting", "after", budget, "still", phase.Load())
		os.Exit(1)
	})
	if err := drain(s.http, n.node, cfg.shutdownDrain, stop, serveErr, log); err != nil {
		return err
	}
	phase.Store("stopping the HTTP server")
	s.https.close() // an HTTPS port not open yet stays closed
	ctx, cancel := context.WithTimeout(context.Background(), cfg.writeTimeout)
	defer cancel()
	if err := s.http.Shutdown(ctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	phase.Store("flushing clicks and stopping Raft")
	return nil
}

// drain takes the node out of traffic before it stops: /health answers
// 503 shutting_down at once, so load balancers and DNS checks stop
// sending clients here, while the listeners stay open and every request
// that still arrives is served, for d. A leader hands leadership over
// meanwhile, so the cluster elects its next leader while this one still
// answers. A second signal ends the drain early (an operator at a
// terminal); a listener that fails ends it with that error. d == 0: no
// drain at all, the listeners close at once.
func drain(srv *httpd.Server, node *cluster.Node, d time.Duration, stop <-chan os.Signal, serveErr <-chan error, log *slog.Logger) error {
	if d <= 0 {
		return nil
	}
	began := time.Now()
	srv.Drain()
	node.Drain()
	timer := time.NewTimer(max(d-time.Since(began), 0))
	defer timer.Stop()
	select {
	case <-timer.C:
		log.Info("drained: closing the listeners", "after", time.Since(began).Round(time.Millisecond))
	case sig := <-stop:
		log.Info("drain cut short: closing the listeners", "signal", sig.String(), "after", time.Since(began).Round(time.Millisecond))
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	}
	return nil
}

// advertisedHTTP is the HTTP address operators' views show for this node
// (nodes reach each other at their Raft addresses): the listener's
// port on the --advertise host, or on the listener's own host, or, when that
// is unspecified (":8080"), on the Raft address's host.
func advertisedHTTP(listen net.Addr, advertise, raftAddr string) string {
	_, port, _ := net.SplitHostPort(listen.String())
	host := advertise
	if h, _, err := net.SplitHostPort(advertise); err == nil {
		host = h
	}
	if host == "" {
		if h, _, err := net.SplitHostPort(listen.String()); err == nil && !net.ParseIP(h).IsUnspecified() {
			host = h
		} else if h, _, err := net.SplitHostPort(raftAddr); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}

// initialKeyFile is where a node without --admin-token writes the admin
// key it creates for a cluster that has none.
func initialKeyFile(cfg *serveConfig) string {
	if cfg.adminToken != "" {
		return ""
	}
	return filepath.Join(cfg.dataDir, "admin.key")
}

// shortURLBase is the prefix of short_url: --base-url when set. Otherwise
// the Host header a client sends (an empty prefix tells httpd so) only when
// the HTTP listener is loopback, where every client is on this machine (a
// developer's node). A node others can reach must not let a client choose
// the host its short links and QR codes name, so it uses its advertised HTTP
// address, which the other nodes reach it at; guessed reports that case,
// in which the operator should set --base-url.
//
// warn reports the guesses that deserve a warning: those that name an
// address other machines reach (--advertise, a Raft or HTTP listener off
// loopback). Such links look deliberate and work inside the network, so
// links that break for clients outside it go unnoticed. A node that
// advertises loopback is the binary's default, the quick start's plain
// "linkraft serve" on :8080 and a single container: it has no --advertise
// and its Raft address is loopback (off loopback it needs a cluster key
// given to it, which a deliberate deployment sets), so no other machine is
// told of it.
// Its links say http://127.0.0.1:8080/..., plainly this machine's, right
// for someone trying linkraft on it and plainly wrong for sharing, so a
// warning would only make a clean start look broken. Following the Host
// header there instead would silence the warning too, but on :8080 anyone
// on the network can reach the node, which is what the Host rule is for.
func shortURLBase(baseURL string, listen net.Addr, advertised string) (base string, guessed, warn bool) {
	if baseURL != "" {
		return baseURL, false, false
	}
	if tcp, ok := listen.(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
		return "", false, false
	}
	return "http://" + advertised, true, !cluster.OnLoopback(advertised)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// raftMetrics sends the metrics hashicorp/raft, raft-boltdb and memberlist
// emit to registry, renamed to Prometheus conventions by promNames
// (raft.commitTime → raft_commit_time_seconds, memberlist.msg.dead →
// memberlist_msg_dead_total, ...). The libraries emit through go-metrics'
// global instance, which is their only way out: it is set once here, before
// cluster.Open, so nothing from the start (the first election) is lost. No
// host name in the names (Prometheus labels the target) and no runtime
// metrics (the registry has Go's collector already).
func raftMetrics(registry *prometheus.Registry) error {
	sink, err := gmprometheus.NewPrometheusSinkFrom(gmprometheus.PrometheusOpts{
		Registerer: registry,
		// A series nothing updated for this long goes: a former peer's, or
		// a leader-only one after leadership moved. Longer than
		// memberlist's 30 s push-pull, which refreshes its member gauges.
		Expiration: 2 * time.Minute,
		// Declared series are there from the start and never expire, so
		// rare ones (snapshots, restores) stay visible between events.
		SummaryDefinitions: raftSummaries(),
		CounterDefinitions: raftCounters(),
		Name:               "linkraft_go_metrics_sink",
	})
	if err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	conf := gometrics.DefaultConfig("")
	conf.EnableHostname = false
	conf.EnableHostnameLabel = false
	conf.EnableRuntimeMetrics = false
	if _, err := gometrics.NewGlobal(conf, newPromNames(sink)); err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	return nil
}

// raftSummaries declares the timings an operator watches, under the names
// promNames gives them.
func raftSummaries() []gmprometheus.SummaryDefinition {
	var defs []gmprometheus.SummaryDefinition
	for _, d := range []struct{ key, help string }{
		{"raft.commitTime", "Leader: time from an entry's append to its commit (seconds)."},
		{"raft.fsm.applyBatch", "Time the state machine took to apply a batch of committed entries (seconds)."},
		{"raft.boltdb.storeLogs", "Time to write and fsync a batch of log entries to raft.db (seconds)."},
		{"raft.rpc.appendEntries.storeLogs", "Follower: time to store the entries of an append (seconds)."},
		{"raft.snapshot.takeSnapshot", "Time to take a snapshot, from start to the log compacted (seconds)."},
		{"raft.snapshot.create", "Time to create a snapshot's file (seconds)."},
		{"raft.snapshot.persist", "Time to write a snapshot to disk (seconds)."},
		{"raft.fsm.restore", "Time the state machine took to restore a snapshot (seconds)."},
	} {
		name, _ := promName(strings.Split(d.key, "."), sampleKind)
		defs = append(defs, gmprometheus.SummaryDefinition{Name: []string{name}, Help: d.help})
	}
	return defs
}

// raftCounters declares the counters of Raft state changes.
func raftCounters() []gmprometheus.CounterDefinition {
	var defs []gmprometheus.CounterDefinition
	for _, d := range []struct{ key, help string }{
		{"raft.state.leader", "Times this node became the Raft leader."},
		{"raft.state.candidate", "Elections this node started."},
		{"raft.state.follower", "Times this node became a follower."},
	} {
		name, _ := promName(strings.Split(d.key, "."), counterKind)
		defs = append(defs, gmprometheus.CounterDefinition{Name: []string{name}, Help: d.help})
	}
	return defs
}

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
	"github.com/linkraft/linkraft/fsm/codes"
	"github.com/linkraft/linkraft/httpd"
	"github.com/linkraft/linkraft/httpd/geo"
)

// serveConfig is every flag of "linkraft serve".
type serveConfig struct {
	id, dataDir, httpAddr, raftAddr, gossipAddr, advertise, join string
	bootstrapExpect                                              int
	baseURL                                                      string
	codeLength, redirectStatus                                   int
	writeTimeout, clickFlushInterval, shutdownDrain              time.Duration
	snapshotThreshold                                            uint64
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

	key              *secure.Key // parsed --cluster-key
	keyOnCommandLine bool        // --cluster-key was a flag, not LINKRAFT_CLUSTER_KEY
}

const serveUsage = `Usage: linkraft serve [flags]

Run a node. With no flags: a single node, HTTP on :8080, data in ./data,
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
	fs.StringVar(&c.id, "id", host, "unique node id")
	fs.StringVar(&c.dataDir, "data-dir", "./data", "directory for the Raft log, snapshots and state")
	fs.StringVar(&c.httpAddr, "http-addr", "127.0.0.1:8080", "HTTP listen address (loopback unless given: serving others takes an explicit address, such as :8080)")
	fs.StringVar(&c.raftAddr, "raft-addr", "127.0.0.1:8081", "Raft listen address")
	fs.StringVar(&c.gossipAddr, "gossip-addr", "127.0.0.1:8082", "gossip (memberlist) listen address")
	fs.StringVar(&c.advertise, "advertise", "", "host other nodes reach this node at (default: the listen addresses)")
	fs.StringVar(&c.join, "join", "", "comma-separated gossip addresses (host:port) of nodes to join; a host name is resolved again at every join attempt and all its addresses are joined")
	fs.IntVar(&c.bootstrapExpect, "bootstrap-expect", 1, "number of nodes that form a new cluster together")
	fs.StringVar(&c.baseURL, "base-url", "", "prefix of short URLs (default: http://<request Host> on a loopback --http-addr, else http://<advertised HTTP address>)")
	fs.IntVar(&c.codeLength, "code-length", 7, "length of generated codes (counter strategy), 4-10")
	fs.IntVar(&c.redirectStatus, "redirect-status", 302, "redirect status: 301, 302, 307 or 308")
	fs.DurationVar(&c.writeTimeout, "write-timeout", 5*time.Second, "how long a write waits for the leader before 503")
	fs.DurationVar(&c.clickFlushInterval, "click-flush-interval", time.Second, "how often counted clicks are flushed through Raft")
	fs.Uint64Var(&c.snapshotThreshold, "snapshot-threshold", 8192, "log entries since the last snapshot that make the node take a new one")
	fs.BoolVar(&c.allowPrivateTargets, "allow-private-targets", false, "allow links to loopback, private and other internal addresses")
	fs.StringVar(&c.adminToken, "admin-token", "", "root credential: an admin key kept in the flags, the same on every node (unset: a new cluster writes an admin API key to <data-dir>/admin.key)")
	fs.BoolVar(&c.publicCreate, "public-create", false, "let clients without a key create links, into workspace public only")
	fs.StringVar(&c.clusterKey, "cluster-key", "", "base64 32-byte key authenticating and encrypting cluster traffic (linkraft keygen), the same on every node; "+
		"prefer --cluster-key-file or LINKRAFT_CLUSTER_KEY: any local user can read a command line")
	fs.StringVar(&c.clusterKeyFile, "cluster-key-file", "", "file holding the cluster key (made there if missing, on loopback only); "+
		"neither set: <data-dir>/cluster.key, made at the first start, on loopback only")
	fs.BoolVar(&c.leaveOnTerminate, "leave-on-terminate", false, "leave the cluster on SIGTERM")
	fs.DurationVar(&c.shutdownDrain, "shutdown-drain", 5*time.Second, "on SIGTERM, answer /health 503 and keep serving this long, so load balancers and DNS checks "+
		"stop sending clients here before the listeners close (0: close at once; a second signal ends the drain)")
	fs.BoolVar(&c.readReplica, "read-replica", false, "join as a read replica: a Raft non-voter that serves reads and redirects, relays writes and never counts towards the quorum; never bootstraps a cluster")
	fs.Float64Var(&c.createRate, "create-rate", 100, "creates per second per client IP, per /64 for IPv6 (0: no limit)")
	fs.IntVar(&c.createBurst, "create-burst", 200, "burst of creates per client IP")
	fs.IntVar(&c.maxConnsPerIP, "max-conns-per-ip", 1024, "connections one client (IPv4 address, IPv6 /64) may hold open at once (0: no cap)")
	fs.StringVar(&c.trustedProxy, "trusted-proxy", "", "comma-separated proxy IPs/CIDRs whose X-Forwarded-For is believed")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log line format: text or json (every line, Raft's and gossip's included)")
	fs.StringVar(&c.corsOrigins, "cors-origins", "*", "comma-separated origins browsers may call the Shlink and Kutt compatible APIs from (* for any, as Shlink)")
	fs.BoolVar(&c.accessLog, "access-log", false, "log one line per HTTP request (method, path, status, duration, remote address)")
	c.tls.register(fs)
	fs.StringVar(&c.backupTo, "backup-to", "", "while this node leads, write a compressed, authenticated backup every --backup-interval to a directory or s3://bucket/prefix "+
		"(credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the shared credentials file); give every node the same")
	fs.DurationVar(&c.backupInterval, "backup-interval", time.Hour, "how often --backup-to receives a backup (skipped when nothing changed since the newest there)")
	fs.IntVar(&c.backupRetain, "backup-retain", 24, "how many of this cluster's backups --backup-to keeps (others there are left alone)")
	c.backupS3.register(fs)
	fs.StringVar(&c.restoreFrom, "restore-from", "", "disaster recovery: the new cluster these nodes form (give every node the same source and its usual flags) "+
		"restores the newest good backup of a file, directory, or s3:// object or prefix once, before it takes writes, under a new cluster id; "+
		"a cluster that has state ignores it")

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
	return c, c.validate()
}

// applyEnv sets each flag from LINKRAFT_<NAME> when that is set. Command-line
// flags are parsed afterwards, so they win.
func applyEnv(fs *flag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		name := "LINKRAFT_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
	})
	return errors.Join(errs...)
}

func (c *serveConfig) validate() error {
	switch {
	case c.id == "":
		return errors.New("--id must not be empty")
	case c.codeLength < 4 || c.codeLength > codes.MaxCounterLength:
		return fmt.Errorf("--code-length must be 4-%d", codes.MaxCounterLength)
	case c.redirectStatus != 301 && c.redirectStatus != 302 && c.redirectStatus != 307 && c.redirectStatus != 308:
		return errors.New("--redirect-status must be 301, 302, 307 or 308")
	case c.writeTimeout <= 0 || c.clickFlushInterval <= 0:
		return errors.New("--write-timeout and --click-flush-interval must be positive")
	case c.shutdownDrain < 0:
		return errors.New("--shutdown-drain must be >= 0 (0: no drain)")
	case c.snapshotThreshold < 16:
		return errors.New("--snapshot-threshold must be at least 16")
	case c.createRate < 0 || c.createBurst < 1:
		return errors.New("--create-rate must be >= 0 and --create-burst >= 1")
	case c.maxConnsPerIP < 0:
		return errors.New("--max-conns-per-ip must be >= 0 (0: no cap)")
	case c.baseURL != "" && !strings.HasPrefix(c.baseURL, "http://") && !strings.HasPrefix(c.baseURL, "https://"):
		return errors.New("--base-url must start with http:// or https://")
	}
	if c.clusterKey != "" {
		key, err := secure.ParseKey(c.clusterKey)
		if err != nil {
			return fmt.Errorf("--cluster-key (32 bytes in base64, as `linkraft keygen` prints): %w", err)
		}
		c.key = key
	}
	if c.bootstrapExpect < 0 {
		return errors.New("--bootstrap-expect must be >= 0")
	}
	if c.backupTo != "" && (c.backupInterval < time.Second || c.backupRetain < 1) {
		return errors.New("--backup-interval must be at least 1s and --backup-retain at least 1")
	}
	c.baseURL = strings.TrimRight(c.baseURL, "/")
	return c.tls.validate()
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
	trusted, err := httpd.ParseTrustedProxies(cfg.trustedProxy)
	if err != nil {
		return fmt.Errorf("--trusted-proxy: %w", err)
	}
	key, err := resolveClusterKey(cfg)
	if err != nil {
		return err
	}
	key.log(log, cfg.keyOnCommandLine)
	countries, err := geo.Load()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return fmt.Errorf("listen http: %w", err)
	}
	defer ln.Close()

	// Anything written through the standard library's logger (go-metrics
	// reports its errors there) gets the same format as the rest.
	stdlog.SetFlags(0)
	stdlog.SetOutput(cluster.NewHCLogger(log, "log", hclog.Trace).StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true}))
	registry := prometheus.NewRegistry()
	if err := raftMetrics(registry); err != nil {
		return err
	}

	var backupStore backups.Store
	if cfg.backupTo != "" {
		if backupStore, err = backups.Open(context.Background(), cfg.backupTo, cfg.backupS3.options(0)); err != nil {
			return fmt.Errorf("--backup-to: %w", err)
		}
	}

	httpAdvertise := advertisedHTTP(ln.Addr(), cfg.advertise, cfg.raftAddr)
	acme, err := cfg.tls.acmeConfig()
	if err != nil {
		return err
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
	}, fsm.New())
	if err != nil {
		return err
	}
	defer func() {
		if err := node.Close(); err != nil {
			log.Error("closing node", "err", err)
		}
	}()

	baseURL, guessed, warn := shortURLBase(cfg.baseURL, ln.Addr(), httpAdvertise)
	var serverTLS *httpd.TLS
	var https *httpsGate // nil without TLS
	if cfg.tls.enabled() {
		if serverTLS, https, err = cfg.tls.serverTLS(node, key.key, cfg.dataDir, log); err != nil {
			return err
		}
		if err := https.listen(); err != nil {
			return err
		}
		defer https.close()
		if cfg.baseURL == "" {
			baseURL, guessed, warn = cfg.tls.httpsBase(httpAdvertise), false, false
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
		CreateRate: cfg.createRate, CreateBurst: cfg.createBurst, TrustedProxies: trusted, MaxConnsPerIP: cfg.maxConnsPerIP,
		WriteTimeout: cfg.writeTimeout + 25*time.Second, Version: version, Logger: log,
		AccessLog: cfg.accessLog, Registry: registry, Countries: countries, TLS: serverTLS,
		CORSOrigins: splitList(cfg.corsOrigins),
	}, httpd.Of(node))

	defer tuneGC()()

	serveErr := make(chan error, 2)
	go func() { serveErr <- srv.Serve(ln) }()
	https.serve(srv.ServeTLS, serveErr, log) // once a handshake for every name can complete
	log.Info("linkraft serving", "id", cfg.id, "http", ln.Addr().String(), "raft", cfg.raftAddr, "version", version)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	// Ready now (and SIGTERM already handled gracefully), though Serve may
	// not have reached Accept yet: ln has listened since before
	// cluster.Open and the kernel queues connections until Serve takes
	// them, so a /health probe sent after READY=1 is answered, not refused.
	notifyReady(log, ln.Addr().String(), cfg.raftAddr)
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
	// HTTP server's stop and closing the node (deferred above); the
	// process ends when runNode returns.
	var phase atomic.Value
	phase.Store("draining")
	budget := cfg.shutdownDrain + 2*cfg.writeTimeout + 5*time.Second
	time.AfterFunc(budget, func() {
		log.Error("shutdown is taking too long; exiting", "after", budget, "still", phase.Load())
		os.Exit(1)
	})
	if err := drain(srv, node, cfg.shutdownDrain, stop, serveErr, log); err != nil {
		return err
	}
	phase.Store("stopping the HTTP server")
	https.close() // an HTTPS port not open yet stays closed
	ctx, cancel := context.WithTimeout(context.Background(), cfg.writeTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
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
	if _, err := gometrics.NewGlobal(conf, promNames{next: sink}); err != nil {
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

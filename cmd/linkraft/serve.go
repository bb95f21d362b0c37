package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/cluster/secure"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/codes"
	"github.com/linkraft/linkraft/httpd"
)

// serveConfig is every flag of "linkraft serve".
type serveConfig struct {
	id, dataDir, httpAddr, raftAddr, gossipAddr, advertise, join string
	bootstrapExpect                                              int
	baseURL                                                      string
	codeLength, redirectStatus                                   int
	writeTimeout, clickFlushInterval                             time.Duration
	snapshotThreshold                                            uint64
	allowPrivateTargets                                          bool
	adminToken, clusterKey                                       string
	leaveOnTerminate                                             bool
	createRate                                                   float64
	createBurst                                                  int
	trustedProxy, logLevel                                       string

	key *secure.Key // parsed --cluster-key
}

func parseServeFlags(args []string, stderr io.Writer) (*serveConfig, error) {
	host, _ := os.Hostname()
	c := &serveConfig{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.id, "id", host, "unique node id")
	fs.StringVar(&c.dataDir, "data-dir", "./data", "directory for the Raft log, snapshots and state")
	fs.StringVar(&c.httpAddr, "http-addr", ":8080", "HTTP listen address")
	fs.StringVar(&c.raftAddr, "raft-addr", "127.0.0.1:8081", "Raft listen address")
	fs.StringVar(&c.gossipAddr, "gossip-addr", "127.0.0.1:8082", "gossip (memberlist) listen address")
	fs.StringVar(&c.advertise, "advertise", "", "host other nodes reach this node at (default: the listen addresses)")
	fs.StringVar(&c.join, "join", "", "comma-separated gossip addresses of nodes to join")
	fs.IntVar(&c.bootstrapExpect, "bootstrap-expect", 1, "number of nodes that form a new cluster together")
	fs.StringVar(&c.baseURL, "base-url", "", "prefix of short URLs (default: http://<request Host>)")
	fs.IntVar(&c.codeLength, "code-length", 7, "length of generated codes (counter strategy), 4-10")
	fs.IntVar(&c.redirectStatus, "redirect-status", 302, "redirect status: 301, 302, 307 or 308")
	fs.DurationVar(&c.writeTimeout, "write-timeout", 5*time.Second, "how long a write waits for the leader before 503")
	fs.DurationVar(&c.clickFlushInterval, "click-flush-interval", time.Second, "how often counted clicks are flushed through Raft")
	fs.Uint64Var(&c.snapshotThreshold, "snapshot-threshold", 8192, "log entries since the last snapshot that make the node take a new one")
	fs.BoolVar(&c.allowPrivateTargets, "allow-private-targets", false, "allow links to loopback, private and other internal addresses")
	fs.StringVar(&c.adminToken, "admin-token", "", "bearer token for /admin (unset: loopback clients only)")
	fs.StringVar(&c.clusterKey, "cluster-key", "", "base64 32-byte key authenticating cluster traffic (linkraft keygen)")
	fs.BoolVar(&c.leaveOnTerminate, "leave-on-terminate", false, "leave the cluster on SIGTERM")
	fs.Float64Var(&c.createRate, "create-rate", 100, "creates per second per client IP (0: no limit)")
	fs.IntVar(&c.createBurst, "create-burst", 200, "burst of creates per client IP")
	fs.StringVar(&c.trustedProxy, "trusted-proxy", "", "comma-separated proxy IPs/CIDRs whose X-Forwarded-For is believed")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")

	if err := applyEnv(fs); err != nil {
		return nil, err
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
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
	case c.snapshotThreshold < 16:
		return errors.New("--snapshot-threshold must be at least 16")
	case c.createRate < 0 || c.createBurst < 1:
		return errors.New("--create-rate must be >= 0 and --create-burst >= 1")
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
	c.baseURL = strings.TrimRight(c.baseURL, "/")
	return nil
}

func newLogger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
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
	log, err := newLogger(cfg.logLevel, stderr)
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
// SIGTERM. Shutdown order: stop accepting and finish in-flight requests,
// then flush clicks and stop Raft (cluster.Node.Close).
func runNode(cfg *serveConfig, log *slog.Logger) error {
	trusted, err := httpd.ParseTrustedProxies(cfg.trustedProxy)
	if err != nil {
		return fmt.Errorf("--trusted-proxy: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return fmt.Errorf("listen http: %w", err)
	}
	defer ln.Close()

	httpAdvertise := advertisedHTTP(ln.Addr(), cfg.advertise, cfg.raftAddr)
	node, err := cluster.Open(cluster.Config{
		ID: cfg.id, DataDir: cfg.dataDir, RaftAddr: cfg.raftAddr, GossipAddr: cfg.gossipAddr,
		HTTPAddr: httpAdvertise, Advertise: cfg.advertise, Join: splitList(cfg.join),
		BootstrapExpect: cfg.bootstrapExpect, Key: cfg.key, LeaveOnTerminate: cfg.leaveOnTerminate,
		WriteTimeout: cfg.writeTimeout, ClickFlushInterval: cfg.clickFlushInterval, Logger: log,
		SnapshotThreshold: cfg.snapshotThreshold,
	}, fsm.New())
	if err != nil {
		return err
	}
	defer func() {
		if err := node.Close(); err != nil {
			log.Error("closing node", "err", err)
		}
	}()

	srv := httpd.New(httpd.Config{
		BaseURL: cfg.baseURL, RedirectStatus: cfg.redirectStatus,
		CodeLength: cfg.codeLength, AllowPrivateTargets: cfg.allowPrivateTargets, AdminToken: cfg.adminToken,
		CreateRate: cfg.createRate, CreateBurst: cfg.createBurst, TrustedProxies: trusted,
		WriteTimeout: cfg.writeTimeout + 25*time.Second, Version: version, Logger: log,
	}, node)

	defer tuneGC()()

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("linkraft serving", "id", cfg.id, "http", ln.Addr().String(), "raft", cfg.raftAddr, "version", version)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	select {
	case sig := <-stop:
		log.Info("shutting down", "signal", sig.String())
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	}
	// A stop must not hang: what is acknowledged is on disk, so exiting
	// now is no worse than a crash, which the cluster tolerates. The
	// watchdog also covers closing the node (deferred above), and the
	// process ends when runNode returns.
	var phase atomic.Value
	phase.Store("stopping the HTTP server")
	budget := 2*cfg.writeTimeout + 5*time.Second
	time.AfterFunc(budget, func() {
		log.Error("shutdown is taking too long; exiting", "after", budget, "still", phase.Load())
		os.Exit(1)
	})
	ctx, cancel := context.WithTimeout(context.Background(), cfg.writeTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	phase.Store("flushing clicks and stopping Raft")
	return nil
}

// advertisedHTTP is the HTTP address other nodes forward to: the listener's
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

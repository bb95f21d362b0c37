package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/linkraft/linkraft/cluster/secure"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/codes"
	"github.com/linkraft/linkraft/httpd"
)

// flagDefs is every flag of "linkraft serve", setting c, in the order of
// README.md's Flags table: this file declares them all, the TLS and S3
// ones included. host is --id's default.
func (c *serveConfig) flagDefs(host string) []flagDef {
	return slices.Concat(c.nodeFlags(host), c.httpFlags(), c.backupFlags(), c.tls.flagDefs(), c.restoreAndCORSFlags())
}

// nodeFlags are the flags of the node's identity, addresses, cluster
// key and lifetime.
func (c *serveConfig) nodeFlags(host string) []flagDef {
	return []flagDef{
		{name: "id", target: flagVar(&c.id, host), usage: "unique node id",
			check:  func() error { return failIf(c.id == "", "--id must not be empty") },
			readme: "unique node id", readmeDefault: "host name"},
		{name: "data-dir", target: flagVar(&c.dataDir, "./data"), usage: "directory for the Raft log, snapshots and state",
			readme: "Raft log, snapshots"},
		{name: "http-addr", target: flagVar(&c.httpAddr, "127.0.0.1:8080"),
			usage:  "HTTP listen address (loopback unless given: serving others takes an explicit address, such as :8080)",
			readme: "HTTP listener: loopback unless given, as etcd and Consul do; serving others takes an explicit address (`:8080`, `10.0.0.1:8080`)"},
		{name: "raft-addr", target: flagVar(&c.raftAddr, "127.0.0.1:8081"), usage: "Raft listen address",
			readme: "cluster port: Raft and node-to-node HTTP"},
		{name: "gossip-addr", target: flagVar(&c.gossipAddr, "127.0.0.1:8082"), usage: "gossip (memberlist) listen address",
			readme: "gossip (memberlist) listener, TCP and UDP"},
		{name: "advertise", target: flagVar(&c.advertise, ""), usage: "host other nodes reach this node at (default: the listen addresses)",
			readme: "host the other nodes reach this one at", readmeDefault: "listen addresses"},
		{name: "join", target: flagVar(&c.join, ""),
			usage:  "comma-separated gossip addresses (host:port) of nodes to join; a host name is resolved again at every join attempt and all its addresses are joined",
			readme: "gossip addresses to join, comma-separated; a host name is resolved again at every join attempt and all its addresses are joined"},
		{name: "bootstrap-expect", target: flagVar(&c.bootstrapExpect, 1), usage: "number of nodes that form a new cluster together",
			check:  func() error { return failIf(c.bootstrapExpect < 0, "--bootstrap-expect must be >= 0") },
			readme: "nodes that bootstrap a new cluster together"},
		{name: "cluster-key-file", target: flagVar(&c.clusterKeyFile, ""),
			usage: "file holding the cluster key (made there if missing, on loopback only); " +
				"neither set: <data-dir>/cluster.key, made at the first start, on loopback only",
			readme: "file holding the cluster key, which authenticates and encrypts all traffic between nodes; made there at the first start (mode 0600) " +
				"only when the Raft and gossip addresses are loopback: a node others reach must be given its cluster's key. " +
				"A file another user owns, or that group or others may read, is refused",
			readmeDefault: "`<data-dir>/cluster.key`"},
		{name: "cluster-key", target: flagVar(&c.clusterKey, ""),
			usage: "base64 32-byte key authenticating and encrypting cluster traffic (linkraft keygen), the same on every node; " +
				"prefer --cluster-key-file or LINKRAFT_CLUSTER_KEY: any local user can read a command line",
			check:  c.parseClusterKey,
			readme: "the cluster key itself (wins over the file); prefer the file or `LINKRAFT_CLUSTER_KEY`, since any user of the machine can read a command line"},
		{name: "leave-on-terminate", target: flagVar(&c.leaveOnTerminate, false), usage: "leave the cluster on SIGTERM",
			readme: "leave the cluster on SIGTERM"},
		{name: "shutdown-drain", target: flagVar(&c.shutdownDrain, 5*time.Second),
			usage: "on SIGTERM, answer /health 503 and keep serving this long, so load balancers and DNS checks " +
				"stop sending clients here before the listeners close (0: close at once; a second signal ends the drain)",
			check: func() error { return failIf(c.shutdownDrain < 0, "--shutdown-drain must be >= 0 (0: no drain)") },
			readme: "on SIGTERM, answer `/health` 503 `shutting_down` at once and keep serving this long before closing the listeners, " +
				"so load balancers and DNS checks stop sending clients first; a leader hands leadership over meanwhile; " +
				"0: no drain; a second signal ends it (docs/DEPLOY.md, \"Stopping a node\")"},
		{name: "read-replica", target: flagVar(&c.readReplica, false),
			usage:  "join as a read replica: a Raft non-voter that serves reads and redirects, relays writes and never counts towards the quorum; never bootstraps a cluster",
			readme: "join as a read replica: a Raft non-voter that serves redirects and reads, relays writes and never counts towards the quorum; never bootstraps"},
	}
}

// httpFlags are the flags of the HTTP API: links, writes, limits, logs.
func (c *serveConfig) httpFlags() []flagDef {
	return []flagDef{
		{name: "base-url", target: flagVar(&c.baseURL, ""),
			usage: "prefix of short URLs (default: http://<request Host> on a loopback --http-addr, else http://<advertised HTTP address>)",
			check: func() error {
				return failIf(c.baseURL != "" && !strings.HasPrefix(c.baseURL, "http://") && !strings.HasPrefix(c.baseURL, "https://"),
					"--base-url must start with http:// or https://")
			},
			readme: "prefix of `short_url`", readmeDefault: "see below"},
		{name: "code-length", target: flagVar(&c.codeLength, 7), usage: "length of generated codes (counter strategy), 4-10",
			check: func() error {
				if c.codeLength < 4 || c.codeLength > codes.MaxCounterLength {
					return fmt.Errorf("--code-length must be 4-%d", codes.MaxCounterLength)
				}
				return nil
			},
			readme: "generated code length (4–10)"},
		{name: "redirect-status", target: flagVar(&c.redirectStatus, 302), usage: "redirect status: 301, 302, 307 or 308",
			check: func() error {
				return failIf(!slices.Contains([]int{301, 302, 307, 308}, c.redirectStatus), "--redirect-status must be 301, 302, 307 or 308")
			},
			readme: "301, 302, 307 or 308"},
		{name: "write-timeout", target: flagVar(&c.writeTimeout, 5*time.Second), usage: "how long a write waits for the leader before 503",
			check: func() error {
				return failIf(c.writeTimeout <= 0 || c.clickFlushInterval <= 0, "--write-timeout and --click-flush-interval must be positive")
			},
			readme: "a write without a leader answers 503 after this"},
		{name: "click-flush-interval", target: flagVar(&c.clickFlushInterval, time.Second), usage: "how often counted clicks are flushed through Raft",
			readme: "how often counted clicks go through Raft"}, // checked with --write-timeout
		{name: "snapshot-threshold", target: flagVar(&c.snapshotThreshold, uint64(8192)),
			usage:  "log entries since the last snapshot that make the node take a new one",
			check:  func() error { return failIf(c.snapshotThreshold < 16, "--snapshot-threshold must be at least 16") },
			readme: "log entries since the last snapshot that make the node take one"},
		{name: "engine-cache-mb", target: flagVar(&c.engineCacheMB, 64),
			usage:  "MiB of memory for blocks of the on-disk state read from disk",
			check:  func() error { return failIf(c.engineCacheMB < 1, "--engine-cache-mb must be at least 1") },
			readme: "MiB of memory for blocks of the on-disk state (`<data-dir>/engine`) read from disk"},
		{name: "option-cache", target: flagVar(&c.optionCache, fsm.DefaultOptionCache),
			usage: "links whose options (title, tags, rules, limits) are kept decoded in memory; the rest are read from disk",
			check: func() error {
				return failIf(c.optionCache < 1 || c.optionCache > fsm.MaxCacheSlots, fmt.Sprintf("--option-cache must be between 1 and %d", fsm.MaxCacheSlots))
			},
			readme: "links whose options (title, tags, rules, limits) are kept decoded in memory; a redirect of one of them reads no disk"},
		{name: "record-cache", target: flagVar(&c.recordCache, fsm.DefaultRecordCache),
			usage: "links whose records (code, URL, times, clicks) are kept decoded in memory; the rest are read from disk",
			check: func() error {
				return failIf(c.recordCache < 1 || c.recordCache > fsm.MaxCacheSlots, fmt.Sprintf("--record-cache must be between 1 and %d", fsm.MaxCacheSlots))
			},
			readme: "links whose records (code, URL, times, clicks) are kept decoded in memory, about 220 bytes each; a redirect of one of them reads no disk"},
		{name: "allow-private-targets", target: flagVar(&c.allowPrivateTargets, false), usage: "allow links to loopback, private and other internal addresses",
			readme: "allow links to internal addresses"},
		{name: "admin-token", target: flagVar(&c.adminToken, ""),
			usage:  "root credential: an admin key kept in the flags, the same on every node (unset: a new cluster writes an admin API key to <data-dir>/admin.key)",
			readme: "root credential: an admin key kept in the flags (the same on every node); without it a new cluster writes an admin API key to `<data-dir>/admin.key`"},
		{name: "public-create", target: flagVar(&c.publicCreate, false), usage: "let clients without a key create links, into workspace public only",
			readme: "clients without a key may create links, into workspace `public` only"},
		{name: "create-rate", target: flagVar(&c.createRate, 100.0), usage: "creates per second per client IP, per /64 for IPv6 (0: no limit)",
			check: func() error {
				return failIf(c.createRate < 0 || c.createBurst < 1, "--create-rate must be >= 0 and --create-burst >= 1")
			},
			readme: "creates per second per client IP (IPv6: per /64; 0: off)"},
		{name: "create-burst", target: flagVar(&c.createBurst, 200), usage: "burst of creates per client IP",
			sharesRow: true}, // checked with --create-rate
		{name: "max-conns-per-ip", target: flagVar(&c.maxConnsPerIP, 1024),
			usage:  "connections one client (IPv4 address, IPv6 /64) may hold open at once (0: no cap)",
			check:  func() error { return failIf(c.maxConnsPerIP < 0, "--max-conns-per-ip must be >= 0 (0: no cap)") },
			readme: "connections one client (IPv4 address, IPv6 /64) may hold open at once; 0: no cap"},
		{name: "trusted-proxy", target: flagVar(&c.trustedProxy, ""), usage: "comma-separated proxy IPs/CIDRs whose X-Forwarded-For is believed",
			check:  c.parseTrustedProxies,
			readme: "IPs/CIDRs whose `X-Forwarded-For` is believed (rate limits, and the visitor's country in the statistics)"},
		{name: "log-level", target: flagVar(&c.logLevel, "info"), usage: "debug, info, warn or error",
			readme: "log level; `text` or `json` lines"}, // both checked by newLogger
		{name: "log-format", target: flagVar(&c.logFormat, "text"), usage: "log line format: text or json (every line, Raft's and gossip's included)",
			sharesRow: true},
		{name: "access-log", target: flagVar(&c.accessLog, false), usage: "log one line per HTTP request (method, path, status, duration, remote address)",
			readme: "one log line per HTTP request"},
	}
}

// backupFlags are the flags of scheduled backups.
func (c *serveConfig) backupFlags() []flagDef {
	return append([]flagDef{
		{name: "backup-to", target: flagVar(&c.backupTo, ""),
			usage: "while this node leads, write a compressed, authenticated backup every --backup-interval to a directory or s3://bucket/prefix " +
				"(credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the shared credentials file); give every node the same",
			readme: "while this node leads: a compressed, authenticated backup every `--backup-interval` to a directory or `s3://bucket/prefix` " +
				"(give every node the same); skipped when nothing changed since the newest there"},
		{name: "backup-interval", target: flagVar(&c.backupInterval, time.Hour),
			usage: "how often --backup-to receives a backup (skipped when nothing changed since the newest there)",
			check: func() error {
				return failIf(c.backupTo != "" && (c.backupInterval < time.Second || c.backupRetain < 1),
					"--backup-interval must be at least 1s and --backup-retain at least 1")
			},
			readme: "how often; how many of this cluster's backups the destination keeps (others there are left alone)"},
		{name: "backup-retain", target: flagVar(&c.backupRetain, 24), usage: "how many of this cluster's backups --backup-to keeps (others there are left alone)",
			sharesRow: true}, // checked with --backup-interval
	}, c.backupS3.flagDefs()...)
}

// restoreAndCORSFlags are disaster recovery's and browsers' flags, which
// the README lists last.
func (c *serveConfig) restoreAndCORSFlags() []flagDef {
	return []flagDef{
		{name: "restore-from", target: flagVar(&c.restoreFrom, ""),
			usage: "disaster recovery: the new cluster these nodes form (give every node the same source and its usual flags) " +
				"restores the newest good backup of a file, directory, or s3:// object or prefix once, before it takes writes, under a new cluster id; " +
				"a cluster that has state ignores it",
			readme: "disaster recovery: give every node of a wiped cluster the same source and its usual flags; the cluster they form restores " +
				"the newest good backup of a file, directory or `s3://` object or prefix once, before it takes writes or backs up, " +
				"under a new cluster id (docs/DEPLOY.md, \"Disaster recovery\"); a cluster that has state ignores it"},
		{name: "cors-origins", target: flagVar(&c.corsOrigins, "*"),
			usage:  "comma-separated origins browsers may call the Shlink and Kutt compatible APIs from (* for any, as Shlink)",
			readme: "origins browsers may call the Shlink, Kutt and Bitly APIs from (docs/COMPATIBILITY.md)"},
	}
}

// flagDefs are serve's HTTPS flags.
func (t *tlsFlags) flagDefs() []flagDef {
	return []flagDef{
		{name: "https-addr", target: flagVar(&t.httpsAddr, ":443"),
			usage: "HTTPS listen address, once TLS is configured (--tls-cert and --tls-key, or ACME); " +
				"with ACME it listens once a certificate for every --acme-domains name can be served (kept from the last run, or in the cluster's state)",
			readme: "HTTPS listen address, once TLS is configured. It opens only once the node can complete a handshake for every `--acme-domains` name " +
				"(from the certificates its state or its data dir holds; a new cluster waits for its first order): " +
				"until then connections are refused, never answered with a TLS alert"},
		{name: "tls-cert", target: flagVar(&t.certFile, ""), usage: "PEM certificate chain to serve over HTTPS (read again when it changes)",
			check:  t.checkSource,
			readme: "PEM certificate chain and key to serve over HTTPS, read again when they change"},
		{name: "tls-key", target: flagVar(&t.keyFile, ""), usage: "PEM private key of --tls-cert",
			sharesRow: true}, // checked with --tls-cert
		{name: "acme-domains", target: flagVar(&t.acmeDomains, ""),
			usage: "comma-separated names to hold certificates for, ordered from the ACME CA once for the whole cluster " +
				"(every domain registered with /admin/domains gets one too); setting it, or --acme-email, turns ACME on",
			check: t.checkDomains,
			readme: "names to hold certificates for, ordered once for the whole cluster by the leader from an ACME CA " +
				"(every domain registered with `/admin/domains` gets one too); either turns ACME on"},
		{name: "acme-email", target: flagVar(&t.acmeEmail, ""), usage: "contact address of the cluster's ACME account",
			sharesRow: true},
		{name: "acme-directory", target: flagVar(&t.acmeDirectory, letsEncrypt), usage: "ACME directory URL of the certificate authority",
			check: func() error {
				return failIf(t.acme() && !strings.HasPrefix(t.acmeDirectory, "https://"), "--acme-directory must be an https URL")
			},
			readme: "the CA's RFC 8555 directory; a PEM file of CA certificates to trust for it", readmeDefault: "Let's Encrypt"},
		{name: "acme-ca-root", target: flagVar(&t.acmeCARoot, ""), usage: "PEM file of CA certificates to trust for the ACME directory (a private or test CA)",
			sharesRow: true},
		{name: "http-redirect", target: flagVar(&t.httpRedirect, true),
			usage:  "with TLS on, answer plain HTTP with a 308 to https (but ACME challenges, health and metrics)",
			readme: "with TLS on: plain HTTP answers 308 to https (but ACME challenges, health and metrics); add Strict-Transport-Security"},
		{name: "hsts", target: flagVar(&t.hsts, false), usage: "add Strict-Transport-Security to HTTPS answers",
			sharesRow: true, readmeDefault: "`false`"},
	}
}

// flagDefs are the S3 flags, of serve and of the backup commands.
func (f *s3Flags) flagDefs() []flagDef {
	return []flagDef{
		{name: "backup-s3-endpoint", target: flagVar(&f.endpoint, ""),
			usage: "URL of an S3-compatible server for s3:// destinations (path-style; default: AWS) (env LINKRAFT_BACKUP_S3_ENDPOINT)",
			readme: "an S3-compatible server (path-style requests); credentials only from `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` " +
				"or the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`, `AWS_PROFILE`), never a flag. " +
				"S3 is reached with aws-sdk-go-v2 rather than minio-go: it changes no pinned module and adds one publisher's only",
			readmeDefault: "AWS"},
		{name: "backup-s3-region", target: flagVar(&f.region, ""),
			usage:     "region of s3:// destinations (default: AWS_REGION, else us-east-1) (env LINKRAFT_BACKUP_S3_REGION)",
			sharesRow: true, readmeDefault: "`AWS_REGION`"},
	}
}

// parseClusterKey keeps --cluster-key's key, parsed.
func (c *serveConfig) parseClusterKey() error {
	if c.clusterKey == "" {
		return nil
	}
	key, err := secure.ParseKey(c.clusterKey)
	if err != nil {
		return fmt.Errorf("--cluster-key (32 bytes in base64, as `linkraft keygen` prints): %w", err)
	}
	c.key = key
	return nil
}

// parseTrustedProxies keeps --trusted-proxy's prefixes, parsed: a typo
// stops the start before the node opens.
func (c *serveConfig) parseTrustedProxies() error {
	trusted, err := httpd.ParseTrustedProxies(c.trustedProxy)
	if err != nil {
		return fmt.Errorf("--trusted-proxy: %w", err)
	}
	c.trusted = trusted
	return nil
}

// failIf is an error saying msg when bad holds, else nil.
func failIf(bad bool, msg string) error {
	if bad {
		return errors.New(msg)
	}
	return nil
}

package httpd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/httpd/compat"
	"github.com/linkraft/linkraft/httpd/geo"
)

// Limits on requests. Bodies are small JSON except a restore or an import,
// which carry whole data sets.
const (
	maxBodyBytes = 64 << 10
	// maxBulkBytes fits a bulk create of 1000 links with long targets.
	maxBulkBytes    = 4 << 20
	maxRestoreBytes = 1 << 30
)

// Config is the HTTP layer's part of the node's flags.
type Config struct {
	BaseURL             string // prefix of short_url; empty: http://<request Host> (only for a loopback-only node, see linkraft serve)
	RedirectStatus      int
	CodeLength          int
	AllowPrivateTargets bool
	// AdminToken is the operator's root credential: an admin key that
	// lives in the flags, not in the replicated state. Give every node
	// the same one: calls forwarded to the leader are checked there again.
	AdminToken string
	// PublicCreate lets clients without a key create links, into
	// workspace "public" and the default domain only, without rules or
	// public stats (rate limited like every create).
	PublicCreate bool
	CreateRate   float64 // creates and edits per client IP per second; 0 turns limiting off
	CreateBurst  int
	// MaxConnsPerIP caps the connections one client (an IPv4 address, an
	// IPv6 /64) holds open at once; 0 turns the cap off.
	MaxConnsPerIP  int
	TrustedProxies []netip.Prefix
	// Countries maps a visitor's address to its country in the visit
	// statistics; nil counts every visitor's country as unknown.
	Countries    *geo.Table
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	IdleTimeout  time.Duration
	Version      string
	Logger       *slog.Logger
	// AccessLog logs one line per request at info level.
	AccessLog bool
	// Registry is where /metrics gathers from; this server registers its
	// own metrics and the node's there. nil: a registry of its own.
	Registry *prometheus.Registry
	// TLS, when set, is how the node serves HTTPS (tls.go); short URLs
	// are then https.
	TLS *TLS
	// CORSOrigins are the origins browsers may call the compatible APIs
	// (httpd/compat) from; empty: every origin, as Shlink.
	CORSOrigins []string
	// SignatureToken is the secret the holder of an API key signs
	// time-limited requests with (signature.go), the same on every node
	// of the cluster; nil refuses such requests.
	SignatureToken func(keyID string, keyHash []byte) string
}

// handleFunc registers a route: h serves method on path, its requests
// counted under route in the metrics.
type handleFunc func(method, path, route string, h fasthttp.RequestHandler)

// Server serves the public API of one node.
type Server struct {
	cfg     Config
	node    Node
	fsm     *fsm.FSM
	router  *router.Router
	metrics *metrics
	limiter *ipLimiter
	// qrCodes bounds the CPU drawing QR codes costs (see qr.go).
	qrCodes *qrCodes
	// passwords bounds the CPU hashing new link passwords costs (hashing.go).
	passwords *linkPasswords
	// The helpers the redirect path and the API share.
	proxies proxies
	fwd     *forwarding
	auth    *authority
	lookup  linkLookup
	// redirects serves the visits (redirect.go), api the rest of the
	// API (apis.go).
	redirects *redirector
	api       apis
	srv       *fasthttp.Server
	log       *slog.Logger
	// baseHost is BaseURL's host, lower case, for the redirects to https.
	baseHost string
	// draining is set by Drain: the node is about to stop.
	draining atomic.Bool
}

// New builds the server on node's parts (Of gives them from a
// *cluster.Node); call Serve to start it.
func New(cfg Config, node Node) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{
		cfg:      cfg,
		node:     node,
		fsm:      node.Reads.FSM(),
		router:   router.New(),
		metrics:  newMetrics(node.Self, node.Clicks, node.Reads.FSM(), cfg.Registry, cfg.Version),
		limiter:  newIPLimiter(cfg.CreateRate, cfg.CreateBurst),
		qrCodes:  newQRCodes(),
		log:      cfg.Logger,
		baseHost: baseHost(cfg.BaseURL),
	}
	s.proxies = proxies(cfg.TrustedProxies)
	s.passwords = &linkPasswords{budget: newDefaultHashBudget(), proxies: s.proxies, log: s.log}
	s.fwd = &forwarding{leader: node.Leader, proxies: s.proxies, log: s.log}
	s.auth = newAuthority(node.Reads, cfg.AdminToken, cfg.SignatureToken, s.log)
	s.lookup = linkLookup{reads: node.Reads, log: s.log}
	s.redirects = newRedirector(cfg, node, s.fwd, s.lookup)
	s.api = newAPIs(s)
	if cfg.TLS != nil && cfg.TLS.Certificates != nil {
		s.metrics.registry.MustRegister(newCertificateCollector(cfg.TLS.Certificates))
	}
	s.routes()
	// Deletes and admin calls other nodes forward to this one arrive on
	// the cluster's port; they get the same handler.
	node.Leader.ServeForwarded(s.Handler)
	s.srv = &fasthttp.Server{
		Handler:               s.Handler,
		ErrorHandler:          s.handleTransportError,
		HeaderReceived:        s.requestLimits,
		ExpectHandler:         s.handleExpectContinue,
		Name:                  "linkraft",
		NoDefaultServerHeader: true,
		// No ReadTimeout, WriteTimeout or IdleTimeout: the connections keep
		// them (deadlines.go), without fasthttp's clock reads.
		MaxRequestBodySize: maxBodyBytes,
		// Bodies are read by Handler (readBody), not before it: an import
		// is read as it is imported, so the node never holds it whole.
		StreamRequestBody: true,
		ReadBufferSize:    8 << 10,
		CloseOnShutdown:   true,
		Logger:            slogPrinter{cfg.Logger},
	}
	return s
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func (s *Server) routes() {
	r := s.router
	r.RedirectTrailingSlash = true // "/ui" → "/ui/"
	r.HandleMethodNotAllowed = true
	compatOpts := compat.Options{CORSOrigins: s.cfg.CORSOrigins}
	compatNotFound := compat.NotFound(compatOpts)
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		if compatNotFound(ctx) { // a compatible API's own not found, no orphan visit
			return
		}
		s.redirects.countNotFound(ctx)
		writeBrowserError(ctx, fasthttp.StatusNotFound, "nothing at "+string(ctx.Path())+": no such page or short link")
	}
	r.MethodNotAllowed = func(ctx *fasthttp.RequestCtx) {
		writeProblem(ctx, fasthttp.StatusMethodNotAllowed, "method "+string(ctx.Method())+" is not allowed here")
	}

	// The compatible APIs call the same handlers, uninstrumented (compat.go).
	native := &nativeAPI{routes: router.New(), auth: s.auth, publicCreate: s.cfg.PublicCreate,
		version: s.cfg.Version, baseURL: s.cfg.BaseURL, log: s.log}
	handle := handleFunc(func(method, path, route string, h fasthttp.RequestHandler) {
		r.Handle(method, path, s.metrics.instrument(route, h))
		native.routes.Handle(method, path, h)
	})
	s.redirects.register(handle)
	s.api.register(routing{handle: handle, auth: s.auth, fwd: s.fwd, limiter: s.limiter, proxies: s.proxies,
		publicCreate: s.cfg.PublicCreate})
	handle("GET", acmeChallengePrefix+"{token}", "acme_challenge", s.handleACMEChallenge)
	handle("GET", "/metrics", "metrics", s.metrics.handler())
	handle("GET", "/ui/", "ui", handleUI)
	handle("GET", "/ui/app.js", "ui", uiAsset("text/javascript; charset=utf-8", uiScript))
	handle("GET", "/ui/app.css", "ui", uiAsset("text/css; charset=utf-8", uiStyle))
	// The node-to-node protocol is served on the cluster's port only (see
	// cluster/DESIGN.md): here /internal/v1/* is a path like any other, 404.

	// Runtime profiles of this node, guarded like the admin API.
	pprof := s.auth.require(fsm.ScopeAdmin, pprofHandler())
	handle("GET", pprofPrefix+"{profile:*}", "pprof", pprof)
	handle("POST", pprofPrefix+"symbol", "pprof", pprof) // pprof looks symbols up by POST

	// The APIs of Shlink, YOURLS and Kutt, as adapters over the routes above.
	compat.Register(func(method, path, route string, h fasthttp.RequestHandler) {
		r.Handle(method, path, s.metrics.instrument(route, h))
	}, native, compatOpts)
	r.GlobalOPTIONS = compat.Preflight(compatOpts)
}

// Handler is the server's root handler. Anything that can be a short code
// goes straight to the redirect; the rest goes through the router.
func (s *Server) Handler(ctx *fasthttp.RequestCtx) {
	defer s.recoverPanic(ctx) // the router's PanicHandler does not cover the redirect path
	defer requestHandled(ctx)
	body, ok := s.readBody(ctx)
	if !ok {
		nosniff(ctx)
		return
	}
	if body != nil {
		defer body.finish(ctx)
	}
	if s.cfg.TLS != nil {
		if s.upgradeToHTTPS(ctx) {
			return
		}
		if s.cfg.TLS.HSTS && ctx.IsTLS() {
			ctx.Response.Header.Set(fasthttp.HeaderStrictTransportSecurity, hstsValue)
		}
	}
	if code, ok := redirectCode(ctx); ok {
		s.metrics.instrumentRedirect(ctx, code, s.redirects.redirect)
	} else {
		s.router.Handler(ctx)
	}
	if s.draining.Load() {
		// Clients that keep their connection would hold on to a node that
		// is about to close it: each answer sends them to reconnect, to
		// a node the load balancer still names.
		ctx.SetConnectionClose()
	}
	// A redirect has no body to sniff: its hit path, the one that must
	// stay cheap, skips the header.
	if status := ctx.Response.StatusCode(); status < 300 || status > 399 {
		nosniff(ctx)
	}
	if s.cfg.AccessLog { // off, the redirect path stays free of allocations
		s.logAccess(ctx)
	}
}

// logAccess writes the access log line of a request that was answered.
func (s *Server) logAccess(ctx *fasthttp.RequestCtx) {
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "request",
		slog.String("method", string(ctx.Method())),
		slog.String("path", string(ctx.Path())),
		slog.Int("status", ctx.Response.StatusCode()),
		slog.Duration("duration", time.Since(ctx.Time())),
		slog.String("remote", ctx.RemoteAddr().String()),
		slog.String("node", s.node.Self.ID()),
	)
}

// recoverPanic answers 500 instead of letting a bug take the node down.
func (s *Server) recoverPanic(ctx *fasthttp.RequestCtx) {
	if v := recover(); v != nil {
		s.log.Error("handler panic", "path", string(ctx.Path()), "panic", v)
		writeProblem(ctx, fasthttp.StatusInternalServerError, "internal error")
		nosniff(ctx)
	}
}

// requestLimits gives restores and imports a larger body limit than
// everything else, and only to requests that carry an admin credential, so
// no other client can make the node buffer a huge body.
func (s *Server) requestLimits(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if !h.IsPost() {
		return fasthttp.RequestConfig{}
	}
	uri := h.RequestURI()
	path, _, _ := bytes.Cut(uri, []byte("?")) // a restore may say ?foreign=true
	switch {
	case (string(path) == "/admin/restore" || string(uri) == "/admin/import") && s.auth.mayUploadLargeBody(h):
		return fasthttp.RequestConfig{MaxRequestBodySize: maxRestoreBytes, ReadTimeout: 5 * time.Minute}
	case string(uri) == bulkPath && s.auth.mayWriteLinks(h):
		return fasthttp.RequestConfig{MaxRequestBodySize: maxBulkBytes}
	}
	return fasthttp.RequestConfig{}
}

// bodyLimit is the largest body the request may carry.
func (s *Server) bodyLimit(h *fasthttp.RequestHeader) int {
	if c := s.requestLimits(h); c.MaxRequestBodySize > 0 {
		return c.MaxRequestBodySize
	}
	return maxBodyBytes
}

// handleExpectContinue refuses an oversized body before the client sends
// it: a 413 instead of "100 Continue" followed by a cut connection.
func (s *Server) handleExpectContinue(ctx *fasthttp.RequestCtx) int {
	if n := ctx.Request.Header.ContentLength(); n > s.bodyLimit(&ctx.Request.Header) {
		writeProblem(ctx, fasthttp.StatusRequestEntityTooLarge,
			fmt.Sprintf("request body of %d bytes is larger than %d bytes", n, s.bodyLimit(&ctx.Request.Header)))
		nosniff(ctx)
		return fasthttp.StatusRequestEntityTooLarge
	}
	return fasthttp.StatusContinue
}

// handleTransportError answers requests fasthttp could not read.
func (s *Server) handleTransportError(ctx *fasthttp.RequestCtx, err error) {
	defer nosniff(ctx)
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		writeProblem(ctx, fasthttp.StatusRequestEntityTooLarge,
			fmt.Sprintf("request body is larger than %d bytes", s.bodyLimit(&ctx.Request.Header)))
	default:
		var timeout interface{ Timeout() bool }
		if errors.As(err, &timeout) && timeout.Timeout() {
			writeProblem(ctx, fasthttp.StatusRequestTimeout, "request was not received in time")
			return
		}
		writeProblem(ctx, fasthttp.StatusBadRequest, "malformed HTTP request")
	}
}

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	return s.srv.Serve(s.listener(ln))
}

// listener is ln with the connection cap per client and the server's
// timeouts, kept by the connections (deadlines.go).
func (s *Server) listener(ln net.Listener) net.Listener {
	if s.cfg.MaxConnsPerIP > 0 {
		ln = newConnLimitListener(ln, s.cfg.MaxConnsPerIP, s.cfg.TrustedProxies)
	}
	return newTimedListener(ln, s.timeouts())
}

// timeouts are the timeouts of the server's connections.
func (s *Server) timeouts() connTimeouts {
	return connTimeouts{
		read:  orDefault(s.cfg.ReadTimeout, 10*time.Second),
		idle:  orDefault(s.cfg.IdleTimeout, 60*time.Second),
		write: orDefault(s.cfg.WriteTimeout, 30*time.Second),
	}
}

// Drain takes the node out of traffic ahead of a stop: from now on
// /health and /health/writes answer 503 shutting_down, so load balancers
// and DNS checks stop sending clients here, while every request that still
// arrives is served, closing its connection. Shutdown follows, once the
// checks have noticed.
func (s *Server) Drain() { s.draining.Store(true) }

// Shutdown stops accepting, waits for in-flight requests (bounded by ctx)
// and closes idle connections.
func (s *Server) Shutdown(ctx context.Context) error {
	s.limiter.stop()
	s.redirects.stop()
	s.passwords.budget.stop()
	s.qrCodes.stop()
	return s.srv.ShutdownWithContext(ctx)
}

// slogPrinter adapts slog to fasthttp's Printf logger.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Printf(format string, args ...any) {
	p.log.Debug(fmt.Sprintf(format, args...), "component", "http")
}

// prefetchedBodyBytes is how much of a body fasthttp reads with the header
// when it streams bodies (readBodyWithStreaming): a body this small is in
// memory before the handler runs, and reading it cannot fail.
const prefetchedBodyBytes = 8 << 10

// readBody reads the request's body, within the request's limit, before the
// request is routed, so that handlers find it in PostBody as they would
// without StreamRequestBody. The one exception is an import that was given
// the large limit: its body is returned, to be read as it is imported
// (nil for every other request). false: the request was refused and
// answered here.
//
// fasthttp's own limit does not hold for streamed bodies (a body over it is
// handed over as a stream, a chunked one is never measured): this is where
// the limits of requestLimits are enforced.
func (s *Server) readBody(ctx *fasthttp.RequestCtx) (*streamedBody, bool) {
	stream := ctx.RequestBodyStream()
	if stream == nil { // no body, or one already in memory
		return nil, true
	}
	h := &ctx.Request.Header
	n := h.ContentLength()
	if n == 0 { // every redirect: decided before any limit is worked out
		return nil, true
	}
	limit := s.bodyLimit(h)
	switch {
	case n > limit:
		s.handleTransportError(ctx, fasthttp.ErrBodyTooLarge)
		closeUnread(ctx)
		return nil, false
	case limit > maxBodyBytes && string(h.RequestURI()) == "/admin/import":
		b := &streamedBody{r: stream, limit: limit}
		ctx.SetUserValue(streamedBodyKey{}, b)
		return b, true
	case n > 0 && n <= prefetchedBodyBytes:
		ctx.Request.Body() // copies the prefetched bytes from the stream into the pooled body buffer
		return nil, true
	}
	b := streamedBody{r: stream, limit: limit}
	if err := b.readAll(ctx, n); err != nil {
		s.handleTransportError(ctx, err)
		closeUnread(ctx)
		return nil, false
	}
	return nil, true
}

// streamedBody is a request body read from the connection by the handler,
// cut at the request's body limit.
type streamedBody struct {
	r     io.Reader
	limit int
	read  int
	err   error // the first error, io.EOF at the end of the body
}

type streamedBodyKey struct{}

// streamedBodyOf is the body of ctx's request when it is read as a
// stream, nil when it is in PostBody.
func streamedBodyOf(ctx *fasthttp.RequestCtx) *streamedBody {
	b, _ := ctx.UserValue(streamedBodyKey{}).(*streamedBody)
	return b
}

func (b *streamedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	if b.read += n; b.read > b.limit {
		n -= b.read - b.limit
		b.read, err = b.limit, fasthttp.ErrBodyTooLarge
	}
	if err != nil {
		b.err = err
	}
	return n, err
}

// readAll reads the rest of the body (n bytes long; -1: unknown) into the
// request, where PostBody finds it, and makes it no longer a stream. The
// buffer is the request's alone, not a pooled one: after a large body it
// is garbage the collector takes back; wire.ReadBody says why it is
// allocated at the body's length.
func (b *streamedBody) readAll(ctx *fasthttp.RequestCtx, n int) error {
	if n >= 0 { // within b.limit: readBody refused a longer one unread
		n -= b.read
	}
	body, err := wire.ReadBody(b, n)
	if err != nil {
		return err
	}
	ctx.Request.SetBodyRaw(body)
	ctx.RemoveUserValue(streamedBodyKey{})
	return nil
}

// finish runs once the request is answered. A body not read to its end
// is still on the connection, where fasthttp would read it as the next
// request: the connection is closed instead.
func (b *streamedBody) finish(ctx *fasthttp.RequestCtx) {
	if b.err != io.EOF {
		closeUnread(ctx)
	}
}

package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
)

// peerService serves HTTP on the cluster's port (the connections the
// stream layer sorts as internal): the node-to-node protocol under
// wire.Prefix, and public requests other nodes forward to the leader,
// which the handler given to ServeForwarded answers. Every request it
// serves is a peer's (FromPeer). It reaches the node only through
// protocolNode, so it is tested without Raft.
//
// Its handlers hand the node context.Background, never the request: a
// context derived from a fasthttp RequestCtx watches the request's Done
// from a goroutine of its own, which may outlive the request and races
// with the server's Shutdown resetting it. Every wait of the node is
// bounded by the write timeout or less.
type peerService struct {
	node      protocolNode
	log       *slog.Logger
	protocol  fasthttp.RequestHandler // everything under wire.Prefix
	forwarded atomic.Pointer[fasthttp.RequestHandler]
	server    *fasthttp.Server
	listener  net.Listener  // what server accepts from (serve)
	served    chan struct{} // closed when server has stopped
}

// protocolNode is what the protocol's handlers need of the node, as
// funcs rather than an interface of Node's methods: each may come from
// whichever part of the node holds it.
type protocolNode struct {
	info         func() wire.NodeInfo
	readIndex    func(ctx context.Context) (uint64, error)
	link         func(code string) (fsm.Link, bool)
	isLeader     func() bool
	applyEntry   func(entry []byte) (any, uint64, error)
	removeServer func(id string) error
	// remainNonvoter keeps this server a non-voter (POST non-voter).
	remainNonvoter func(id string) error
	// removed takes a leader's word that this server was removed (POST
	// removed, removed.go).
	removed func(notice wire.RemovedNotice) error
	// appliedIndex, waitApplied and noteLeaderIndex are this node's
	// applied index, a wait for it to reach an index, and the record of
	// an index the leader has applied (see Behind).
	appliedIndex    func() uint64
	waitApplied     func(ctx context.Context, index uint64) error
	noteLeaderIndex func(index uint64)
	// creates is the leader's end of POST creates (relay.go).
	creates fasthttp.RequestHandler
}

// startPeerService serves n's end of the protocol on its cluster port.
func startPeerService(n *Node) *peerService {
	// This node's answer to GET node: who it is, where its gossip is and
	// which log entries it applies.
	info := func() wire.NodeInfo {
		info := wire.NodeInfo{V: wire.Version, ID: n.cfg.ID, Cluster: n.fsm.ClusterID(), EntryLevel: fsm.EntryLevel, Wants: n.standing.wants(),
			Incarnation: n.incarnation}
		if n.gossip != nil {
			info.GossipAddr = n.gossip.advertised()
		}
		return info
	}
	s := newPeerService(protocolNode{
		info:            info,
		readIndex:       n.ReadIndex,
		link:            n.fsm.Get,
		isLeader:        n.IsLeader,
		applyEntry:      n.applyEntry,
		removeServer:    func(id string) error { return n.members.Leave(id) },
		remainNonvoter:  n.standing.remainNonvoter,
		removed:         n.standing.noticeRemoval,
		appliedIndex:    n.machine.appliedIndex,
		waitApplied:     n.machine.waitApplied,
		noteLeaderIndex: n.machine.noteLeaderIndex,
		creates:         n.creates.serve,
	}, n.log)
	s.serve(n.layer.Internal())
	return s
}

// ServeForwarded makes h answer the public requests other nodes forward
// to this one when it leads (deletes, admin calls). httpd registers its
// handler; h sees FromPeer true for them.
func (n *Node) ServeForwarded(h fasthttp.RequestHandler) { n.service.forwarded.Store(&h) }

// newPeerService makes the service and its server; serve starts it.
func newPeerService(node protocolNode, log *slog.Logger) *peerService {
	s := &peerService{node: node, log: log}
	s.protocol = s.routes()
	s.server = &fasthttp.Server{
		Handler: s.handle,
		HeaderReceived: func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
			if bytes.HasPrefix(h.RequestURI(), []byte(wire.Prefix)) {
				return fasthttp.RequestConfig{}
			}
			// A forwarded restore or import takes its time; its body's
			// limit is the public handler's, which reads it.
			return fasthttp.RequestConfig{ReadTimeout: 5 * time.Minute}
		},
		// Bodies are read by the handlers: the protocol's by
		// readProtocolBody, a forwarded request's by the public handler,
		// within the client's limits, and an import's as it is imported.
		// Read here, a body of hundreds of megabytes would be cleared in
		// one call the runtime cannot preempt, long enough to stop every
		// goroutine (Raft's heartbeats too) while the collector waits.
		StreamRequestBody:     true,
		Name:                  "linkraft-cluster",
		NoDefaultServerHeader: true,
		ReadTimeout:           30 * time.Second,
		WriteTimeout:          5 * time.Minute, // a forwarded backup or export
		IdleTimeout:           time.Minute,
		MaxRequestBodySize:    wire.MaxBodyBytes,
		CloseOnShutdown:       true,
		Logger:                fasthttpLogger{log},
	}
	return s
}

// serve accepts from ln until shutdown.
func (s *peerService) serve(ln net.Listener) {
	s.listener = ln
	s.served = make(chan struct{})
	go func() { // not in the node's wait group: it stops in shutdownRaft, after the wait for it
		defer close(s.served)
		if err := s.server.Serve(ln); err != nil {
			s.log.Warn("cluster port's HTTP server stopped", "err", err)
		}
	}()
}

// shutdown stops a service that serves: requests in flight have until
// timeout to end.
func (s *peerService) shutdown(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err := s.server.ShutdownWithContext(ctx)
	cancel()
	// fasthttp closes only the listeners Serve has registered: a
	// shutdown right after Open may come first, and Serve would then
	// accept forever.
	s.listener.Close()
	<-s.served
	if err != nil {
		return fmt.Errorf("cluster HTTP shutdown: %w", err)
	}
	return nil
}

// handle serves one request on the cluster port.
func (s *peerService) handle(ctx *fasthttp.RequestCtx) {
	ctx.SetUserValue(peerKey{}, true)
	if bytes.HasPrefix(ctx.Path(), []byte(wire.Prefix)) {
		if readProtocolBody(ctx) {
			s.protocol(ctx)
		}
		return
	}
	if h := s.forwarded.Load(); h != nil {
		(*h)(ctx)
		return
	}
	wire.WriteProblem(ctx, fasthttp.StatusServiceUnavailable, "this node does not serve forwarded requests yet")
}

// readProtocolBody reads a node-to-node request's body whole, within
// wire.MaxBodyBytes: the server streams bodies, and its own limit does not
// hold for streamed ones. false: the request was refused and answered,
// and the connection, whose body was not read to its end, is closed.
func readProtocolBody(ctx *fasthttp.RequestCtx) bool {
	stream := ctx.RequestBodyStream()
	if stream == nil {
		return true
	}
	tooLarge := fmt.Sprintf("request body is larger than %d bytes", wire.MaxBodyBytes)
	if ctx.Request.Header.ContentLength() > wire.MaxBodyBytes {
		refuse(ctx, fasthttp.StatusRequestEntityTooLarge, tooLarge)
		return false
	}
	body, err := io.ReadAll(io.LimitReader(stream, wire.MaxBodyBytes+1))
	switch {
	case err != nil:
		refuse(ctx, fasthttp.StatusBadRequest, fmt.Sprintf("request body could not be read: %v", err))
		return false
	case len(body) > wire.MaxBodyBytes: // chunked: no length was announced
		refuse(ctx, fasthttp.StatusRequestEntityTooLarge, tooLarge)
		return false
	}
	ctx.Request.SetBodyRaw(body)
	return true
}

// refuse answers a request whose body is left unread. The answer says the
// connection closes (after WriteProblem, which resets the answer): the
// peer must not send its next request on it.
func refuse(ctx *fasthttp.RequestCtx, status int, detail string) {
	wire.WriteProblem(ctx, status, detail)
	ctx.SetConnectionClose()
}

// fasthttpLogger adapts slog to fasthttp's Printf logger.
type fasthttpLogger struct{ log *slog.Logger }

func (p fasthttpLogger) Printf(format string, args ...any) {
	p.log.Debug(fmt.Sprintf(format, args...), "component", "cluster-http")
}

// routes serves the node-to-node protocol (everything under wire.Prefix).
// Errors are problem+json, like the public API's; callers act on the
// status alone.
func (s *peerService) routes() fasthttp.RequestHandler {
	r := router.New()
	r.HandleMethodNotAllowed = true
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		wire.WriteProblem(ctx, fasthttp.StatusNotFound, "no internal endpoint at "+string(ctx.Path()))
	}
	r.MethodNotAllowed = func(ctx *fasthttp.RequestCtx) {
		wire.WriteProblem(ctx, fasthttp.StatusMethodNotAllowed, "method "+string(ctx.Method())+" is not allowed here")
	}
	r.GET(wire.PathNode, s.serveNodeInfo)
	r.GET(wire.PathReadIndex, s.serveReadIndex)
	r.GET(wire.PathLinks+"{code:*}", s.serveLink) // a qualified code holds a slash
	r.POST(wire.PathClicks, s.serveClicks)
	r.POST(wire.PathLeave, s.serveLeave)
	r.POST(wire.PathNonvoter, s.serveNonvoter)
	r.POST(wire.PathRemoved, s.serveRemoved)
	r.GET(wire.PathApplied, s.serveApplied)
	r.POST(wire.PathCreates, s.node.creates)
	return r.Handler
}

func (s *peerService) serveNodeInfo(ctx *fasthttp.RequestCtx) {
	wire.WriteMessage(ctx, s.node.info())
}

func (s *peerService) serveReadIndex(ctx *fasthttp.RequestCtx) {
	index, err := s.node.readIndex(context.Background())
	if err != nil {
		writeUnavailable(ctx, err)
		return
	}
	wire.WriteMessage(ctx, wire.ReadIndexAnswer{V: wire.Version, Index: index})
}

// serveLink answers a node that is behind with one link, after a read
// index round: only then is this leader's answer current.
func (s *peerService) serveLink(ctx *fasthttp.RequestCtx) {
	if _, err := s.node.readIndex(context.Background()); err != nil {
		writeUnavailable(ctx, err)
		return
	}
	code, _ := ctx.UserValue("code").(string)
	l, found := s.node.link(code)
	wire.WriteMessage(ctx, linkAnswer(l, found, ctx.QueryArgs().Has(wire.LinkBytesParam)))
}

func (s *peerService) serveClicks(ctx *fasthttp.RequestCtx) {
	applied, err := s.applyClicks(ctx.PostBody())
	switch {
	case errors.Is(err, errNotClickBatch):
		wire.WriteProblem(ctx, fasthttp.StatusBadRequest, err.Error())
	case err != nil:
		writeUnavailable(ctx, err)
	default:
		wire.WriteMessage(ctx, wire.ClicksAnswer{V: wire.Version, Applied: applied})
	}
}

// errNotClickBatch refuses a clicks request whose body is something else.
var errNotClickBatch = errors.New("not a click batch")

// applyClicks applies a click batch another node sent. Leader only. data
// is copied: Raft keeps the entry (its log cache serves followers later),
// while callers' buffers, such as fasthttp's request body, are reused.
func (s *peerService) applyClicks(data []byte) (bool, error) {
	data = bytes.Clone(data)
	cmd, err := fsm.DecodeCommand(data)
	if _, ok := cmd.(fsm.ClickBatch); err != nil || !ok {
		return false, fmt.Errorf("%w: %v", errNotClickBatch, err)
	}
	if !s.node.isLeader() {
		return false, ErrNoLeader
	}
	resp, _, err := s.node.applyEntry(data)
	if err != nil {
		return false, err
	}
	applied, _ := resp.(bool)
	return applied, nil
}

// serveLeave removes a node that is leaving gracefully, at its own request:
// a node can only ask for its own removal.
func (s *peerService) serveLeave(ctx *fasthttp.RequestCtx) {
	var req wire.LeaveRequest
	if err := wire.Decode(ctx.PostBody(), &req); err != nil {
		wire.WriteProblem(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	if req.ID == "" || req.ID != string(ctx.Request.Header.Peek(wire.ForwardedHeader)) {
		wire.WriteProblem(ctx, fasthttp.StatusForbidden, "a node can only ask for its own removal")
		return
	}
	switch err := s.node.removeServer(req.ID); {
	case errors.Is(err, ErrUnknownServer):
		wire.WriteProblem(ctx, fasthttp.StatusNotFound, err.Error())
	case errors.Is(err, ErrLastVoter):
		wire.WriteProblem(ctx, fasthttp.StatusConflict, err.Error())
	case err != nil:
		writeUnavailable(ctx, err)
	default:
		wire.WriteMessage(ctx, wire.Ack{V: wire.Version})
	}
}

// serveNonvoter keeps this server a non-voter at the leader's request: an
// operator added it as one. Any peer may ask (only key holders reach this
// port); it changes nothing but what this server asks to be.
func (s *peerService) serveNonvoter(ctx *fasthttp.RequestCtx) {
	var req wire.NonvoterRequest
	if err := wire.Decode(ctx.PostBody(), &req); err != nil {
		wire.WriteProblem(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	switch err := s.node.remainNonvoter(req.ID); {
	case errors.Is(err, ErrInvalidServer):
		wire.WriteProblem(ctx, fasthttp.StatusConflict, err.Error())
	case err != nil:
		writeUnavailable(ctx, err)
	default:
		wire.WriteMessage(ctx, wire.Ack{V: wire.Version})
	}
}

// serveRemoved takes a leader's word that an operator removed this server
// on this data dir; another server's or data dir's notice is refused.
func (s *peerService) serveRemoved(ctx *fasthttp.RequestCtx) {
	var notice wire.RemovedNotice
	if err := wire.Decode(ctx.PostBody(), &notice); err != nil {
		wire.WriteProblem(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	switch err := s.node.removed(notice); {
	case errors.Is(err, ErrInvalidServer):
		wire.WriteProblem(ctx, fasthttp.StatusConflict, err.Error())
	case err != nil:
		writeUnavailable(ctx, err)
	default:
		wire.WriteMessage(ctx, wire.Ack{V: wire.Version})
	}
}

// serveApplied answers once this node has applied the index the leader
// asks about, or after visibilityWait with what it has.
func (s *peerService) serveApplied(ctx *fasthttp.RequestCtx) {
	index, err := strconv.ParseUint(string(ctx.QueryArgs().Peek("index")), 10, 64)
	if err != nil {
		wire.WriteProblem(ctx, fasthttp.StatusBadRequest, "index must be a log index")
		return
	}
	s.node.noteLeaderIndex(index) // until it is applied, hits here ask the leader
	wait, cancel := context.WithTimeout(context.Background(), visibilityWait)
	defer cancel()
	_ = s.node.waitApplied(wait, index) // the leader compares; a shortfall is an answer too
	wire.WriteMessage(ctx, wire.AppliedAnswer{V: wire.Version, Index: s.node.appliedIndex()})
}

// writeUnavailable answers an exchange this node cannot complete now (not
// the leader, no leader, timeout, closing): the caller may retry.
func writeUnavailable(ctx *fasthttp.RequestCtx, err error) {
	wire.WriteProblem(ctx, fasthttp.StatusServiceUnavailable, err.Error())
}

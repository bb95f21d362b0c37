package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
)

// startClusterServer serves HTTP on the cluster's port (the connections
// the stream layer sorts as internal): the node-to-node protocol under
// wire.Prefix, and public requests other nodes forward to the leader,
// which the handler ServeForwarded registers answers. Every request it
// serves is a peer's (FromPeer).
func (n *Node) startClusterServer() {
	protocol := n.internalHandler()
	n.clusterServer = &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetUserValue(peerKey{}, true)
			if bytes.HasPrefix(ctx.Path(), []byte(wire.Prefix)) {
				if readProtocolBody(ctx) {
					protocol(ctx)
				}
				return
			}
			if h := n.forwarded.Load(); h != nil {
				(*h)(ctx)
				return
			}
			wire.WriteProblem(ctx, fasthttp.StatusServiceUnavailable, "this node does not serve forwarded requests yet")
		},
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
		Logger:                fasthttpLogger{n.log},
	}
	ln := n.layer.Internal()
	n.clusterListener = ln
	n.clusterServed = make(chan struct{})
	go func() { // not in n.wg: it stops in shutdownRaft, after the wait for n.wg
		defer close(n.clusterServed)
		if err := n.clusterServer.Serve(ln); err != nil {
			n.log.Warn("cluster port's HTTP server stopped", "err", err)
		}
	}()
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

// ServeForwarded makes h answer the public requests other nodes forward
// to this one when it leads (deletes, admin calls). httpd registers its
// handler; h sees FromPeer true for them.
func (n *Node) ServeForwarded(h fasthttp.RequestHandler) { n.forwarded.Store(&h) }

// fasthttpLogger adapts slog to fasthttp's Printf logger.
type fasthttpLogger struct{ log *slog.Logger }

func (p fasthttpLogger) Printf(format string, args ...any) {
	p.log.Debug(fmt.Sprintf(format, args...), "component", "cluster-http")
}

// internalHandler serves the node-to-node protocol (everything under
// wire.Prefix). Errors are problem+json, like the public API's; callers
// act on the status alone.
func (n *Node) internalHandler() fasthttp.RequestHandler {
	r := router.New()
	r.HandleMethodNotAllowed = true
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		wire.WriteProblem(ctx, fasthttp.StatusNotFound, "no internal endpoint at "+string(ctx.Path()))
	}
	r.MethodNotAllowed = func(ctx *fasthttp.RequestCtx) {
		wire.WriteProblem(ctx, fasthttp.StatusMethodNotAllowed, "method "+string(ctx.Method())+" is not allowed here")
	}
	r.GET(wire.PathNode, n.serveNodeInfo)
	r.GET(wire.PathReadIndex, n.serveReadIndex)
	r.GET(wire.PathLinks+"{code:*}", n.serveLink) // a qualified code holds a slash
	r.POST(wire.PathClicks, n.serveClicks)
	r.POST(wire.PathLeave, n.serveLeave)
	r.GET(wire.PathApplied, n.serveApplied)
	r.POST(wire.PathCreates, n.creates.serve) // relay.go
	return r.Handler
}

func (n *Node) serveNodeInfo(ctx *fasthttp.RequestCtx) {
	info := wire.NodeInfo{V: wire.Version, ID: n.cfg.ID, Cluster: n.fsm.ClusterID(), EntryLevel: fsm.EntryLevel}
	if n.gossip != nil {
		info.GossipAddr = n.gossip.advertised()
	}
	wire.WriteMessage(ctx, info)
}

func (n *Node) serveReadIndex(ctx *fasthttp.RequestCtx) {
	index, err := n.ReadIndex(ctx)
	if err != nil {
		writeUnavailable(ctx, err)
		return
	}
	wire.WriteMessage(ctx, wire.ReadIndexAnswer{V: wire.Version, Index: index})
}

// serveLink answers a node that is behind with one link, after a read
// index round: only then is this leader's answer current.
func (n *Node) serveLink(ctx *fasthttp.RequestCtx) {
	if _, err := n.ReadIndex(ctx); err != nil {
		writeUnavailable(ctx, err)
		return
	}
	code, _ := ctx.UserValue("code").(string)
	l, found := n.fsm.Get(code)
	wire.WriteMessage(ctx, linkAnswer(l, found, ctx.QueryArgs().Has(wire.LinkBytesParam)))
}

func (n *Node) serveClicks(ctx *fasthttp.RequestCtx) {
	applied, err := n.applyClicks(ctx.PostBody())
	switch {
	case errors.Is(err, errNotClickBatch):
		wire.WriteProblem(ctx, fasthttp.StatusBadRequest, err.Error())
	case err != nil:
		writeUnavailable(ctx, err)
	default:
		wire.WriteMessage(ctx, wire.ClicksAnswer{V: wire.Version, Applied: applied})
	}
}

// serveLeave removes a node that is leaving gracefully, at its own request:
// a node can only ask for its own removal.
func (n *Node) serveLeave(ctx *fasthttp.RequestCtx) {
	var req wire.LeaveRequest
	if err := wire.Decode(ctx.PostBody(), &req); err != nil {
		wire.WriteProblem(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	if req.ID == "" || req.ID != string(ctx.Request.Header.Peek(wire.ForwardedHeader)) {
		wire.WriteProblem(ctx, fasthttp.StatusForbidden, "a node can only ask for its own removal")
		return
	}
	switch err := n.RemoveServer(req.ID); {
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

// serveApplied answers once this node has applied the index the leader
// asks about, or after visibilityWait with what it has.
func (n *Node) serveApplied(ctx *fasthttp.RequestCtx) {
	index, err := strconv.ParseUint(string(ctx.QueryArgs().Peek("index")), 10, 64)
	if err != nil {
		wire.WriteProblem(ctx, fasthttp.StatusBadRequest, "index must be a log index")
		return
	}
	n.machine.noteLeaderIndex(index) // until it is applied, hits here ask the leader
	// Not derived from ctx: a context derived from a fasthttp RequestCtx
	// watches its Done from a goroutine of its own, which races with the
	// server's Shutdown resetting it. The wait is short and bounded anyway.
	wait, cancel := context.WithTimeout(context.Background(), visibilityWait)
	defer cancel()
	_ = n.machine.waitApplied(wait, index) // the leader compares; a shortfall is an answer too
	wire.WriteMessage(ctx, wire.AppliedAnswer{V: wire.Version, Index: n.machine.appliedIndex()})
}

// writeUnavailable answers an exchange this node cannot complete now (not
// the leader, no leader, timeout, closing): the caller may retry.
func writeUnavailable(ctx *fasthttp.RequestCtx, err error) {
	wire.WriteProblem(ctx, fasthttp.StatusServiceUnavailable, err.Error())
}

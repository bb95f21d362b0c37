package httpd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
)

const idempotencyHeader = "Idempotency-Key"

// fromPeer reports whether another node of this cluster sent the request.
func (s *Server) fromPeer(ctx *fasthttp.RequestCtx) bool {
	return s.node.FromPeer(&ctx.Request, ctx.RemoteIP())
}

// forwardMode says how a route's requests are forwarded.
type forwardMode struct {
	opts cluster.ForwardOptions
	// idempotencyKey: give the forwarded request a key if it has none, so
	// it can be sent again after a lost answer (creates only: the FSM
	// remembers keys of creates).
	idempotencyKey bool
	// localFallback: without a leader, answer from this node's state.
	localFallback bool
}

var (
	forwardWrite  = forwardMode{}
	forwardCreate = forwardMode{opts: cluster.ForwardOptions{Idempotent: true}, idempotencyKey: true}
	// Admin operations can outlast a create: joining dials and probes the
	// new server, restores and imports move whole data sets.
	forwardAdmin     = forwardMode{opts: cluster.ForwardOptions{Timeout: 5 * time.Minute}}
	forwardAdminRead = forwardMode{opts: cluster.ForwardOptions{Timeout: time.Minute}, localFallback: true}
)

// forwarder serves a request here when this node leads, and otherwise
// forwards it to the leader and relays the answer. A request that was
// forwarded once is always served where it lands, so requests never loop.
func (s *Server) forwarder(h fasthttp.RequestHandler, mode forwardMode) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if s.node.IsLeader() || s.fromPeer(ctx) {
			h(ctx)
			return
		}
		var req fasthttp.Request
		var resp fasthttp.Response
		ctx.Request.CopyTo(&req)
		if mode.idempotencyKey && len(req.Header.Peek(idempotencyHeader)) == 0 {
			req.Header.Set(idempotencyHeader, randomKey())
		}
		err := s.node.Forward(&req, &resp, mode.opts)
		switch {
		case err == nil:
			resp.CopyTo(&ctx.Response)
		case errors.Is(err, cluster.ErrLeaderIsSelf):
			h(ctx)
		case mode.localFallback && errors.Is(err, cluster.ErrNoLeader):
			ctx.Response.Header.Set("X-Linkraft-Stale", "no leader reachable; this is the answering node's own view")
			h(ctx)
		default:
			s.writeWriteError(ctx, err)
		}
	}
}

func randomKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// handleReadIndex serves the leader's read index to the other nodes.
func (s *Server) handleReadIndex(ctx *fasthttp.RequestCtx) {
	if !s.fromPeer(ctx) {
		writeProblem(ctx, fasthttp.StatusForbidden, "internal endpoint: cluster members only")
		return
	}
	index, err := s.node.ReadIndex()
	if err != nil {
		s.writeWriteError(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]uint64{"index": index})
}

// handleClicks applies a click batch another node flushed.
func (s *Server) handleClicks(ctx *fasthttp.RequestCtx) {
	if !s.fromPeer(ctx) {
		writeProblem(ctx, fasthttp.StatusForbidden, "internal endpoint: cluster members only")
		return
	}
	applied, err := s.node.ApplyClicks(ctx.PostBody())
	switch {
	case errors.Is(err, cluster.ErrNoLeader), errors.Is(err, cluster.ErrTimeout), errors.Is(err, cluster.ErrClosed):
		s.writeWriteError(ctx, err)
	case err != nil:
		writeProblem(ctx, fasthttp.StatusBadRequest, err.Error())
	default:
		writeJSON(ctx, fasthttp.StatusOK, map[string]bool{"applied": applied})
	}
}

// handleLeaderLink answers a node that is behind with one link.
func (s *Server) handleLeaderLink(ctx *fasthttp.RequestCtx) {
	if !s.fromPeer(ctx) {
		writeProblem(ctx, fasthttp.StatusForbidden, "internal endpoint: cluster members only")
		return
	}
	// ReadIndex makes sure this leader has applied every earlier leader's
	// writes and still leads; only then is its answer current.
	if _, err := s.node.ReadIndex(); err != nil {
		s.writeWriteError(ctx, err)
		return
	}
	code, _ := ctx.UserValue("code").(string)
	l, ok := s.fsm.Get(code)
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"found": ok, "link": l})
}

// findLink looks a code up for a read that must not miss a code acknowledged
// anywhere: locally, then after catching up with the leader, then, when
// this node is behind, at the leader itself.
func (s *Server) findLink(code string) (fsm.Link, bool) {
	if l, ok := s.fsm.Get(code); ok {
		return l, true
	}
	if err := s.node.CatchUp(context.Background()); !errors.Is(err, cluster.ErrBehind) {
		return s.fsm.Get(code)
	}
	l, ok, err := s.node.LeaderLink(code)
	if err != nil {
		s.log.Debug("asking the leader for a link", "code", code, "err", err)
		return s.fsm.Get(code)
	}
	return l, ok
}

// handleDeparture removes a node that is leaving gracefully, at its own
// request: a node can only ask for its own removal.
func (s *Server) handleDeparture(ctx *fasthttp.RequestCtx) {
	if !s.fromPeer(ctx) {
		writeProblem(ctx, fasthttp.StatusForbidden, "internal endpoint: cluster members only")
		return
	}
	var req struct {
		ID string `json:"id"`
	}
	if !decodeAdminBody(ctx, &req) {
		return
	}
	if req.ID == "" || req.ID != string(ctx.Request.Header.Peek(cluster.ForwardedHeader)) {
		writeProblem(ctx, fasthttp.StatusForbidden, "a node can only ask for its own removal")
		return
	}
	if err := s.node.Leave(req.ID); err != nil {
		s.writeMembershipError(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, struct{}{})
}

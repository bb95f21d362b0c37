package httpd

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
)

const idempotencyHeader = "Idempotency-Key"

// fromPeerKey is the user value holding a request's fromPeer verdict.
const fromPeerKey = "linkraft.fromPeer"

// fromPeer reports whether another node of this cluster sent the request.
// The verdict (a signature check with a cluster key) is kept for the
// request: a forwarded create asks it three times.
func (s *Server) fromPeer(ctx *fasthttp.RequestCtx) bool {
	if v, ok := ctx.UserValue(fromPeerKey).(bool); ok {
		return v
	}
	v := s.node.FromPeer(&ctx.Request, ctx.RemoteIP())
	ctx.SetUserValue(fromPeerKey, v)
	return v
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
		if mode.idempotencyKey {
			s.markIdempotent(ctx)
		}
		var req fasthttp.Request
		var resp fasthttp.Response
		ctx.Request.CopyTo(&req)
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

// requestTimeKey is the user value holding the time a forwarded create
// arrived from its client.
const requestTimeKey = "linkraft.requestTime"

// markIdempotent gives a create that may be sent to the leader more than
// once an idempotency key and its arrival time, on the request itself: the
// same key and time then travel with every copy sent to a leader, and stay
// for the one this node serves itself when it becomes the leader meanwhile.
// Whichever node serves it computes the same expiry and finds the first
// outcome under the key.
func (s *Server) markIdempotent(ctx *fasthttp.RequestCtx) {
	if len(ctx.Request.Header.Peek(idempotencyHeader)) == 0 {
		ctx.Request.Header.Set(idempotencyHeader, randomKey())
	}
	now := time.Now()
	ctx.SetUserValue(requestTimeKey, now)
	ctx.Request.Header.Set(cluster.RequestTimeHeader, strconv.FormatInt(now.UnixMilli(), 10))
}

func randomKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

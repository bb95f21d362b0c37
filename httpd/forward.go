package httpd

import (
	"errors"
	"log/slog"
	"net/netip"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
)

const idempotencyHeader = "Idempotency-Key"

// maxIdempotencyKeyBytes bounds a client's Idempotency-Key. The key becomes
// the create's request id, which every node keeps in its replicated state
// for ten minutes: a UUID (36 bytes) or a hash fits with room to spare.
const maxIdempotencyKeyBytes = 128

// fromPeer reports whether another node of this cluster sent the request:
// it arrived on the cluster's port (cluster.FromPeer), never on the public
// one, whatever its headers say.
func fromPeer(ctx *fasthttp.RequestCtx) bool { return cluster.FromPeer(ctx) }

// requestClient is the client a request is attributed to for budgets:
// clientIP for a client's own request, and for one a peer forwarded, the
// address the peer named in wire.ClientHeader; none (the zero Addr) when it
// named none, as a peer of an older build does.
func (p proxies) requestClient(ctx *fasthttp.RequestCtx) netip.Addr {
	if !fromPeer(ctx) {
		return p.clientIP(ctx)
	}
	addr, err := netip.ParseAddr(string(ctx.Request.Header.Peek(wire.ClientHeader)))
	if err != nil {
		return netip.Addr{}
	}
	return addr
}

// forwardMode says how a route's requests are forwarded. Creates are not
// forwarded as requests: this node prepares them and the cluster relays
// them to the leader in batches (see create.go).
type forwardMode struct {
	opts cluster.ForwardOptions
	// localFallback: without a leader, answer from this node's state.
	localFallback bool
}

// Kind names each mode in linkraft_forwarded_requests_total.
var (
	forwardWrite = forwardMode{opts: cluster.ForwardOptions{Kind: "write"}}
	// Admin operations can outlast a create: joining dials and probes the
	// new server, restores and imports move whole data sets.
	forwardAdmin     = forwardMode{opts: cluster.ForwardOptions{Timeout: 5 * time.Minute, Kind: "admin"}}
	forwardAdminRead = forwardMode{opts: cluster.ForwardOptions{Timeout: time.Minute, Kind: "admin_read"}, localFallback: true}
	// forwardUnlock hands a visit with a link's password to the leader,
	// which alone keeps the guess budgets (passwordAccepted). Builds
	// before fsm.LevelBounds served a peer's visit to a protected link
	// without its password (they trusted the peer to have checked it),
	// so the visit goes only to a cluster whose every server is at that
	// level.
	forwardUnlock = forwardMode{opts: cluster.ForwardOptions{Kind: "unlock", Level: fsm.LevelBounds}}
)

// needs is the mode for a route whose write needs entry level: only a
// cluster whose every server applies it forwards it (see cluster/levels.go).
func (m forwardMode) needs(level int) forwardMode {
	m.opts.Level = level
	return m
}

// staleHeader marks an answer from a node that could reach no leader and
// answered with its own view (forwardAdminRead, a list, a redirect's
// miss), staleOwnView its value.
const (
	staleHeader  = "X-Linkraft-Stale"
	staleOwnView = "no leader reachable; this is the answering node's own view"
)

// forwarding relays requests to the leader: the routes it serves, and the
// redirect's visits that only it may count or check.
type forwarding struct {
	leader  Leader
	proxies proxies
	log     *slog.Logger
}

// forwarder serves a request here when this node leads, and otherwise
// forwards it to the leader and relays the answer (toLeader). A request
// that was forwarded once is always served where it lands, so requests
// never loop.
func (f *forwarding) forwarder(h fasthttp.RequestHandler, mode forwardMode) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if fromPeer(ctx) {
			h(ctx)
			return
		}
		forwarded, err := f.toLeader(ctx, mode, nil)
		switch {
		case err == nil && !forwarded:
			h(ctx)
		case err == nil:
		case mode.localFallback && errors.Is(err, cluster.ErrNoLeader):
			ctx.Response.Header.Set(staleHeader, staleOwnView)
			h(ctx)
		default:
			writeError(ctx, f.log, err)
		}
	}
}

// toLeader sends ctx's request to the leader (with what prepare adds, when
// it is not nil) and answers ctx with the leader's answer. forwarded is
// false, with no error, when this node leads: the caller serves the
// request. Node.Forward decides once where the leader is.
func (f *forwarding) toLeader(ctx *fasthttp.RequestCtx, mode forwardMode, prepare func(*fasthttp.Request)) (forwarded bool, err error) {
	var req fasthttp.Request
	var resp fasthttp.Response
	forwardedCopy(ctx, &req)
	// Set, not added: whatever the client sent under the name is replaced.
	req.Header.Set(wire.ClientHeader, f.proxies.clientIP(ctx).String())
	req.Header.Del(wire.PastExpiryHeader) // only this node says so
	if pastExpiryAllowed(ctx) {
		req.Header.Set(wire.PastExpiryHeader, "1")
	}
	if prepare != nil {
		prepare(&req)
	}
	forwarded, err = f.leader.Forward(&req, &resp, mode.opts)
	if forwarded && err == nil {
		relayedCopy(&resp, &ctx.Response)
	}
	return forwarded, err
}

// forwardedCopy makes to the request a follower forwards: the client's
// header, and its body shared rather than copied as CopyTo would, or, for
// an import, read from the client's connection as it is sent on. An import
// or a restore is hundreds of megabytes, and copying it in one call stalls
// the whole process (cluster/DESIGN.md, "No single call over a large
// body"). A stream that was never read can be sent again when the first
// connection was never made, as Forward does. to must not outlive ctx's
// request.
func forwardedCopy(ctx *fasthttp.RequestCtx, to *fasthttp.Request) {
	ctx.Request.Header.CopyTo(&to.Header)
	if b := streamedBodyOf(ctx); b != nil {
		to.SetBodyStream(b, ctx.Request.Header.ContentLength())
		return
	}
	to.SetBodyRaw(ctx.Request.Body())
}

// relayedCopy is forwardedCopy for the leader's answer (a backup or an
// export can be as large): to shares from's body.
func relayedCopy(from, to *fasthttp.Response) {
	from.Header.CopyTo(&to.Header)
	to.SetBodyRaw(from.Body())
}

// markApplied tells the node that forwarded a write the log index it was
// applied at: that node applies this far before its client hears, so the
// client reads its write there at once. Nothing for a client's own
// request, or when nothing was applied (index 0).
func markApplied(ctx *fasthttp.RequestCtx, index uint64) {
	if index > 0 && len(ctx.Request.Header.Peek(wire.ForwardedHeader)) > 0 {
		ctx.Response.Header.Set(wire.AppliedIndexHeader, strconv.FormatUint(index, 10))
	}
}

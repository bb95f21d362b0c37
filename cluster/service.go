package cluster

import (
	"context"
	"errors"
	"strconv"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
)

// InternalHandler serves the node-to-node protocol (everything under
// wire.Prefix). Every exchange but "who are you" answers only other
// members of this cluster (FromPeer). Errors are problem+json, like the
// public API's; callers act on the status alone.
func (n *Node) InternalHandler() fasthttp.RequestHandler {
	r := router.New()
	r.HandleMethodNotAllowed = true
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		wire.WriteProblem(ctx, fasthttp.StatusNotFound, "no internal endpoint at "+string(ctx.Path()))
	}
	r.MethodNotAllowed = func(ctx *fasthttp.RequestCtx) {
		wire.WriteProblem(ctx, fasthttp.StatusMethodNotAllowed, "method "+string(ctx.Method())+" is not allowed here")
	}
	r.GET(wire.PathNode, n.serveNodeInfo)
	r.GET(wire.PathReadIndex, n.peersOnly(n.serveReadIndex))
	r.GET(wire.PathLinks+"{code}", n.peersOnly(n.serveLink))
	r.POST(wire.PathClicks, n.peersOnly(n.serveClicks))
	r.POST(wire.PathLeave, n.peersOnly(n.serveLeave))
	r.GET(wire.PathApplied, n.peersOnly(n.serveApplied))
	r.POST(wire.PathCreates, n.peersOnly(n.serveCreates)) // relay.go
	return r.Handler
}

// peersOnly refuses requests that do not come from a member of this
// cluster.
func (n *Node) peersOnly(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if !n.FromPeer(&ctx.Request, ctx.RemoteIP()) {
			wire.WriteProblem(ctx, fasthttp.StatusForbidden, "internal endpoint: cluster members only")
			return
		}
		h(ctx)
	}
}

func (n *Node) serveNodeInfo(ctx *fasthttp.RequestCtx) {
	info := wire.NodeInfo{V: wire.Version, ID: n.cfg.ID, Cluster: n.fsm.ClusterID()}
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
	answer := wire.LinkAnswer{V: wire.Version}
	if l, ok := n.fsm.Get(code); ok {
		answer.Found, answer.Link = true, wire.FromLink(l)
	}
	wire.WriteMessage(ctx, answer)
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
	n.noteLeaderIndex(index) // until it is applied, hits here ask the leader
	wait, cancel := context.WithTimeout(ctx, visibilityWait)
	defer cancel()
	_ = n.waitApplied(wait, index) // the leader compares; a shortfall is an answer too
	wire.WriteMessage(ctx, wire.AppliedAnswer{V: wire.Version, Index: n.appliedIndex()})
}

// writeUnavailable answers an exchange this node cannot complete now (not
// the leader, no leader, timeout, closing): the caller may retry.
func writeUnavailable(ctx *fasthttp.RequestCtx, err error) {
	wire.WriteProblem(ctx, fasthttp.StatusServiceUnavailable, err.Error())
}

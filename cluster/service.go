package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"
)

// InternalHandler serves the node-to-node protocol (everything under
// InternalPrefix). Every exchange but "who are you" answers only other
// members of this cluster (FromPeer). Errors are problem+json, like the
// public API's; callers act on the status alone.
func (n *Node) InternalHandler() fasthttp.RequestHandler {
	r := router.New()
	r.HandleMethodNotAllowed = true
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		writeProblem(ctx, fasthttp.StatusNotFound, "no internal endpoint at "+string(ctx.Path()))
	}
	r.MethodNotAllowed = func(ctx *fasthttp.RequestCtx) {
		writeProblem(ctx, fasthttp.StatusMethodNotAllowed, "method "+string(ctx.Method())+" is not allowed here")
	}
	r.GET(nodePath, n.serveNodeInfo)
	r.GET(readIndexPath, n.peersOnly(n.serveReadIndex))
	r.GET(linkPath+"{code}", n.peersOnly(n.serveLink))
	r.POST(clicksPath, n.peersOnly(n.serveClicks))
	r.POST(leavePath, n.peersOnly(n.serveLeave))
	r.GET(appliedPath, n.peersOnly(n.serveApplied))
	r.POST(createsPath, n.peersOnly(n.serveCreates)) // relay.go
	return r.Handler
}

// peersOnly refuses requests that do not come from a member of this
// cluster.
func (n *Node) peersOnly(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if !n.FromPeer(&ctx.Request, ctx.RemoteIP()) {
			writeProblem(ctx, fasthttp.StatusForbidden, "internal endpoint: cluster members only")
			return
		}
		h(ctx)
	}
}

func (n *Node) serveNodeInfo(ctx *fasthttp.RequestCtx) {
	info := nodeInfo{V: protocolVersion, ID: n.cfg.ID, Cluster: n.fsm.ClusterID()}
	if n.gossip != nil {
		info.GossipAddr = n.gossip.advertised()
	}
	writeMessage(ctx, info)
}

func (n *Node) serveReadIndex(ctx *fasthttp.RequestCtx) {
	index, err := n.ReadIndex(ctx)
	if err != nil {
		writeUnavailable(ctx, err)
		return
	}
	writeMessage(ctx, readIndexAnswer{V: protocolVersion, Index: index})
}

// serveLink answers a node that is behind with one link, after a read
// index round: only then is this leader's answer current.
func (n *Node) serveLink(ctx *fasthttp.RequestCtx) {
	if _, err := n.ReadIndex(ctx); err != nil {
		writeUnavailable(ctx, err)
		return
	}
	code, _ := ctx.UserValue("code").(string)
	answer := linkAnswer{V: protocolVersion}
	if l, ok := n.fsm.Get(code); ok {
		answer.Found, answer.Link = true, toWire(l)
	}
	writeMessage(ctx, answer)
}

func (n *Node) serveClicks(ctx *fasthttp.RequestCtx) {
	applied, err := n.applyClicks(ctx.PostBody())
	switch {
	case errors.Is(err, errNotClickBatch):
		writeProblem(ctx, fasthttp.StatusBadRequest, err.Error())
	case err != nil:
		writeUnavailable(ctx, err)
	default:
		writeMessage(ctx, clicksAnswer{V: protocolVersion, Applied: applied})
	}
}

// serveLeave removes a node that is leaving gracefully, at its own request:
// a node can only ask for its own removal.
func (n *Node) serveLeave(ctx *fasthttp.RequestCtx) {
	var req leaveRequest
	if err := decodeMessage(ctx.PostBody(), &req); err != nil {
		writeProblem(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	if req.ID == "" || req.ID != string(ctx.Request.Header.Peek(ForwardedHeader)) {
		writeProblem(ctx, fasthttp.StatusForbidden, "a node can only ask for its own removal")
		return
	}
	switch err := n.RemoveServer(req.ID); {
	case errors.Is(err, ErrUnknownServer):
		writeProblem(ctx, fasthttp.StatusNotFound, err.Error())
	case errors.Is(err, ErrLastVoter):
		writeProblem(ctx, fasthttp.StatusConflict, err.Error())
	case err != nil:
		writeUnavailable(ctx, err)
	default:
		writeMessage(ctx, ack{V: protocolVersion})
	}
}

// serveApplied answers once this node has applied the index the leader
// asks about, or after visibilityWait with what it has.
func (n *Node) serveApplied(ctx *fasthttp.RequestCtx) {
	index, err := strconv.ParseUint(string(ctx.QueryArgs().Peek("index")), 10, 64)
	if err != nil {
		writeProblem(ctx, fasthttp.StatusBadRequest, "index must be a log index")
		return
	}
	n.noteLeaderIndex(index) // until it is applied, hits here ask the leader
	wait, cancel := context.WithTimeout(ctx, visibilityWait)
	defer cancel()
	_ = n.waitApplied(wait, index) // the leader compares; a shortfall is an answer too
	writeMessage(ctx, appliedAnswer{V: protocolVersion, Index: n.appliedIndex()})
}

func writeMessage(ctx *fasthttp.RequestCtx, msg versioned) {
	body, err := json.Marshal(msg)
	if err != nil {
		writeProblem(ctx, fasthttp.StatusInternalServerError, "encoding the answer failed")
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// writeUnavailable answers an exchange this node cannot complete now (not
// the leader, no leader, timeout, closing): the caller may retry.
func writeUnavailable(ctx *fasthttp.RequestCtx, err error) {
	writeProblem(ctx, fasthttp.StatusServiceUnavailable, err.Error())
	ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, "1")
}

func writeProblem(ctx *fasthttp.RequestCtx, status int, detail string) {
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/problem+json")
	body, _ := json.Marshal(map[string]any{
		"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail, "error": detail,
	})
	ctx.SetBody(body)
}

package httpd

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

// linkLookup is the cluster's read-after-write lookup of links, which the
// redirect and every API route that names a link share: a link created
// through any node is found here once its create was acknowledged.
type linkLookup struct {
	reads Reads
	log   *slog.Logger
}

// findLink is the cluster's read-after-write lookup. A miss it could not
// confirm (no leader within the write timeout) is answered as a miss: a
// node cut off from the leader serves what it has.
func (lk linkLookup) findLink(code string) (fsm.Link, bool) {
	l, found, _ := lk.lookupCode(code)
	return l, found
}

// lookupCode is findLink for the redirect, which also says whether a miss
// went unconfirmed: no leader answered (a node without one for longer than
// an election takes does not wait for one), so the miss is this node's own
// view.
func (lk linkLookup) lookupCode(code string) (l fsm.Link, found, unconfirmed bool) {
	l, err := lk.reads.Lookup(context.Background(), code)
	switch {
	case err == nil:
		return l, true, false
	case errors.Is(err, fsm.ErrNotFound):
		return l, false, false
	}
	lk.log.Debug("miss not confirmed by a leader", "code", code, "err", err)
	return l, false, true
}

// lookupLink finds the {code} of the route, answering 404/410 itself. A
// link in a workspace the request's key may not use with scope is
// answered exactly as one that does not exist; scope 0 is for public
// routes.
func (lk linkLookup) lookupLink(ctx *fasthttp.RequestCtx, scope fsm.Scope) (fsm.Link, bool) {
	code := routeCode(ctx)
	l, ok := lk.findLink(code)
	if ok && scope != 0 && !seesLink(ctx, scope, &l) {
		ok = false
	}
	if !ok {
		writeProblem(ctx, fasthttp.StatusNotFound, "short link "+code+" does not exist")
		return l, false
	}
	if l.Expired(time.Now().UnixMilli()) {
		writeProblem(ctx, fasthttp.StatusGone, "short link "+code+" has expired")
		return l, false
	}
	return l, true
}

// catchUp makes a list or a count read-after-write, as a lookup is: the
// node first applies every write acknowledged anywhere before the request
// (one read-index round, shared with concurrent callers). A count then
// only goes forward: what any node showed was acknowledged before this
// request, so this node shows at least that. Without a leader it answers
// from what it has after --write-timeout, and says so (staleHeader).
func (lk linkLookup) catchUp(ctx *fasthttp.RequestCtx) {
	if err := lk.reads.CatchUp(context.Background()); err != nil {
		ctx.Response.Header.Set(staleHeader, "no leader reachable; this is the answering node's own view")
	}
}

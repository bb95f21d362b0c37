package httpd

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/httpd/compat"
)

// nativeAPI runs linkraft's own routes for the compatible APIs
// (httpd/compat): an adapter's call is the request a client of
// linkraft's API would send, served by the very handler chain that
// serves it (credential, scopes, rate limits, hashing budget, forwarding
// to the leader, read-after-write), so no compatible API has a write path
// of its own.
type nativeAPI struct {
	// routes holds the same handlers as the server's router, without its
	// metrics: the compatible route counts the request once.
	routes *router.Router
	auth   *authority
	// publicCreate lets clients without a key create (--public-create).
	publicCreate     bool
	version, baseURL string
	log              *slog.Logger
}

var _ compat.Native = (*nativeAPI)(nil)

// Call rewrites ctx's request into linkraft's own (method, URI and a JSON
// body; the client's headers, credential included, stay) and runs the
// route's handler on it. A write the route forwards to the leader is
// forwarded as this native request, which every build of the cluster
// serves.
func (n *nativeAPI) Call(ctx *fasthttp.RequestCtx, method, uri string, body any) compat.Answer {
	req := &ctx.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(uri)
	req.ResetBody()
	req.Header.Del(fasthttp.HeaderContentType)
	// The client's length is its own body's: a call without a body that
	// is forwarded must not promise the leader bytes it never sends.
	req.Header.SetContentLength(0)
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return compat.Answer{Status: fasthttp.StatusInternalServerError, Body: problemJSON(fasthttp.StatusInternalServerError, "encoding a request failed")}
		}
		req.Header.SetContentType("application/json")
		req.SetBody(b)
	}
	ctx.Response.Reset()
	path, _, _ := strings.Cut(uri, "?")
	if unescaped, err := url.PathUnescape(path); err == nil {
		path = unescaped
	}
	if unroutable(uri, path) {
		// A name from the client (a tag, a code) that is empty or holds
		// a slash: no link or tag has such a name, whatever route its
		// unescaped path would match. The answer is the credential's
		// refusal, or not found.
		ctx.Response.Reset()
		if !n.auth.authenticate(ctx, false) {
			return takeAnswer(ctx)
		}
		ctx.Response.Reset()
		return compat.Answer{Status: fasthttp.StatusNotFound, Body: problemJSON(fasthttp.StatusNotFound, "no such name: it is empty or holds a slash")}
	}
	// Lookup's second result is about trailing slashes, not a match.
	h, _ := n.routes.Lookup(method, path, ctx)
	if h == nil {
		// Only a bug in an adapter names a route linkraft does not have.
		n.log.Error("compatible API called a route that does not exist", "method", method, "path", path)
		return compat.Answer{Status: fasthttp.StatusInternalServerError, Body: problemJSON(fasthttp.StatusInternalServerError, "internal error")}
	}
	h(ctx)
	return takeAnswer(ctx)
}

// unroutable tells whether a native call's path names no route because
// of a name in it, escaped into one segment by the adapter: an empty
// segment, or an escaped slash that splits one in two once unescaped.
func unroutable(uri, path string) bool {
	raw, _, _ := strings.Cut(uri, "?")
	return strings.Contains(raw, "//") || strings.HasSuffix(raw, "/") || strings.Count(raw, "/") != strings.Count(path, "/")
}

// Authenticate runs the credential check of linkraft's routes, leaving
// the request as it is: the adapter reads its body next.
func (n *nativeAPI) Authenticate(ctx *fasthttp.RequestCtx, create bool) compat.Answer {
	ctx.Response.Reset()
	if n.auth.authenticate(ctx, create && n.publicCreate) {
		return compat.Answer{Status: fasthttp.StatusOK}
	}
	return takeAnswer(ctx)
}

// takeAnswer moves the answer a native handler wrote on ctx out of its
// response, which it leaves empty for the adapter.
func takeAnswer(ctx *fasthttp.RequestCtx) compat.Answer {
	a := compat.Answer{
		Status:     ctx.Response.StatusCode(),
		Body:       append([]byte(nil), ctx.Response.Body()...),
		RetryAfter: string(ctx.Response.Header.Peek(fasthttp.HeaderRetryAfter)),
		Challenge:  string(ctx.Response.Header.Peek(fasthttp.HeaderWWWAuthenticate)),
	}
	ctx.Response.Reset()
	return a
}

// Sign finds the key a time-limited signature was made with among the
// live keys, after catching up with the leader when it finds none (a key
// created a moment ago), and carries the signature, naming the key, in
// the request's credential header: every route checks it there again.
func (n *nativeAPI) Sign(ctx *fasthttp.RequestCtx, timestamp, signature, algorithm string) (ok, busy bool) {
	sig, err := hex.DecodeString(signature)
	if _, known := signatureAlgorithms[algorithm]; err != nil || !known {
		return false, false
	}
	c := signedCredential{timestamp: timestamp, algorithm: algorithm, signature: sig}
	id, ok, busy := n.auth.signatures.find(n.auth.fsm.Keys(), c, time.Now())
	if !ok && !busy && n.auth.reads.CatchUp(context.Background()) == nil {
		id, ok, busy = n.auth.signatures.find(n.auth.fsm.Keys(), c, time.Now())
	}
	if !ok {
		return false, busy
	}
	c.keyID = id
	h := &ctx.Request.Header
	h.Del(fasthttp.HeaderAuthorization)
	h.Del(apiKeyHeader)
	h.Set(signatureHeader, c.header())
	return true, false
}

// pastExpiryKey marks a request whose create or edit takes an expiry in
// the past (AllowPastExpiry).
type pastExpiryKey struct{}

// AllowPastExpiry lets the request's native create or edit take an
// expiry in the past, once the cluster is raised to fsm.LevelDisabled:
// from then on every server keeps such a link, disabled, where older
// builds purge it a retention later (so, before, it answers false and
// the adapter refuses as linkraft's own API does).
func (n *nativeAPI) AllowPastExpiry(ctx *fasthttp.RequestCtx) bool {
	if n.auth.fsm.Raised() < fsm.LevelDisabled {
		return false
	}
	ctx.SetUserValue(pastExpiryKey{}, true)
	return true
}

// pastExpiryAllowed reports whether the request's create or edit takes an
// expiry in the past: a compatible API asked for it on this node, or on
// the peer that forwarded the request (wire.PastExpiryHeader).
func pastExpiryAllowed(ctx *fasthttp.RequestCtx) bool {
	if fromPeer(ctx) {
		return len(ctx.Request.Header.Peek(wire.PastExpiryHeader)) > 0
	}
	allowed, _ := ctx.UserValue(pastExpiryKey{}).(bool)
	return allowed
}

// Version is this build's version.
func (n *nativeAPI) Version() string { return n.version }

// DefaultDomain is the host short URLs of the default domain have.
func (n *nativeAPI) DefaultDomain(ctx *fasthttp.RequestCtx) string {
	if u, err := url.Parse(n.baseURL); err == nil && u.Host != "" {
		return u.Host
	}
	return string(ctx.Host())
}

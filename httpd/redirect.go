package httpd

import (
	"context"
	"encoding/base64"
	"errors"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/codes"
	"github.com/linkraft/linkraft/fsm/input"
	"github.com/linkraft/linkraft/httpd/agent"
	"github.com/linkraft/linkraft/httpd/geo"
)

const cacheControlNoStore = "private, no-cache, no-store, must-revalidate"

// maxCodeLen is the longest code any strategy produces in bytes (custom
// codes, which may hold letters of any script and emoji).
const maxCodeLen = input.MaxCodeBytes

// redirectCode returns the code of a GET or HEAD for "/{code}", where code
// has only the characters codes can have, and of a POST there (a password
// form's answer). Everything else is for the router.
func redirectCode(ctx *fasthttp.RequestCtx) ([]byte, bool) {
	if !ctx.IsGet() && !ctx.IsHead() && !ctx.IsPost() {
		return nil, false
	}
	path := ctx.Path()
	if len(path) < 2 || len(path) > maxCodeLen+1 || path[0] != '/' {
		return nil, false
	}
	code := path[1:] // percent-decoded: a code beyond ASCII arrives as its UTF-8
	return code, codeShaped(code)
}

// codeShaped reports whether code has a code's shape: 1 to maxCodeLen
// bytes, its ASCII ones those codes can have (the others are a code's
// UTF-8 beyond ASCII), and none of the service's own pages.
func codeShaped(code []byte) bool {
	if len(code) == 0 || len(code) > maxCodeLen {
		return false
	}
	for _, c := range code {
		if c < utf8.RuneSelf && !isCodeByte(c) {
			return false
		}
	}
	return !isRoute(code)
}

// isRoute reports whether a code-shaped path is one of the service's own
// pages. These words are reserved, so no link can have them as its code.
func isRoute(code []byte) bool {
	switch string(code) {
	case "api", "admin", "health", "metrics", "ui", "stats", "shorten", "static":
		return true
	}
	return false
}

func isCodeByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' || c == '-'
}

// redirector serves the visits: a short link's redirect, its password
// form, the rules that pick its target, the visitor counted with the click,
// and the visits that find no link (orphans.go). It owns what serving
// them keeps between requests: the password guess limits, the caches of
// visitor classes and the orphan visit codes.
type redirector struct {
	fsm     *fsm.FSM
	reads   Reads
	writes  Writes
	clicks  Clicks
	lookup  linkLookup
	fwd     *forwarding
	proxies proxies
	// status is the redirect's (--redirect-status); version is this
	// build's, which a domain's root without a redirect shows.
	status  int
	version string
	// countries maps a visitor's address to its country; nil: unknown.
	countries *geo.Table
	// guesses bounds password guesses on protected links (password.go).
	guesses *guessLimiter
	// agents and referrers remember the classes of recent User-Agents and
	// recent referrer hosts for the visit statistics (visitors.go).
	agents    *agent.Cache[fsm.Visitor]
	referrers *referrerHosts
	// orphanCodes keeps the codes orphan visits are counted by (orphans.go).
	orphanCodes orphanCodes
}

func newRedirector(cfg Config, node Node, fwd *forwarding, lookup linkLookup) *redirector {
	return &redirector{
		fsm: node.Reads.FSM(), reads: node.Reads, writes: node.Writes, clicks: node.Clicks,
		lookup: lookup, fwd: fwd, proxies: fwd.proxies,
		status: cfg.RedirectStatus, version: cfg.Version, countries: cfg.Countries,
		guesses: newDefaultGuessLimiter(),
		// Browsers' User-Agents are few: thousands of slots hold a busy
		// node's (about 4 MB at most, see agent.MaxCacheSize).
		agents:    agent.NewCache(8192, classesOf),
		referrers: newReferrerHosts(),
	}
}

// register adds the routes of the visits the router serves: a domain's
// root. Short codes bypass the router (Server.Handler).
func (r *redirector) register(handle handleFunc) {
	handle("GET", "/", "root", r.handleRoot)
	handle("GET", "/{code}/track", "pixel", r.handleTrack)
}

// stop ends the guess limiter's sweeping.
func (r *redirector) stop() { r.guesses.stop() }

// redirect answers GET/HEAD /{code} from local state, in the domain the
// Host names. A GET that redirects counts a click; HEAD does not. A link
// without options (no limits, password or rules) takes only the first
// branch: that is the path that must stay cheap.
func (r *redirector) redirect(ctx *fasthttp.RequestCtx, code []byte) {
	// The header's Host, not ctx.Host(): that one parses the whole URI.
	t, ok := r.fsm.Resolve(ctx.Request.Header.Host(), code)
	unconfirmed := false
	// A default-domain link found for a registered domain's host: this
	// node may not have applied that domain's own link of the code yet.
	if !ok || t.Fallback || r.reads.Behind() {
		t, ok, unconfirmed = r.confirm(t.Domain, code)
	}
	if !ok {
		r.notFound(ctx, t.Domain, code)
		if unconfirmed {
			// After notFound, which starts the answer afresh.
			ctx.Response.Header.Set(staleHeader, staleOwnView)
		}
		return
	}
	if t.ExpiresAt != 0 && time.Now().UnixMilli() >= t.ExpiresAt {
		r.invalidLink(ctx, t.Domain, code, fasthttp.StatusGone, "short link "+string(code)+" has expired")
		return
	}
	target := t.URL
	if t.Options != nil {
		if target, ok = r.guardedTarget(ctx, &t, code, time.Now()); !ok {
			return
		}
	} else if ctx.IsPost() {
		writeProblem(ctx, fasthttp.StatusMethodNotAllowed, "method POST is not allowed here: the link has no password")
		return
	}
	ctx.SetStatusCode(r.status)
	// SetCanonical skips key normalisation and a second copy of the value;
	// stored URLs never contain CR or LF (input.Target refuses them).
	h := &ctx.Response.Header
	h.SetCanonical(bytesOf(fasthttp.HeaderLocation), bytesOf(target))
	h.SetCanonical(bytesOf(fasthttp.HeaderCacheControl), bytesOf(cacheControlNoStore))
	if ctx.IsHead() {
		// An answer to HEAD carries no length of its own: without this,
		// clients such as fasthttp's cannot tell where it ends and drop
		// the connection. (fasthttp writes a GET's Content-Length: 0.)
		h.SetContentLength(0)
		return
	}
	switch {
	case t.Options == nil:
		r.clicks.Record(t.Code, r.visitorOf(ctx))
	case t.Options.MaxVisits == 0:
		// On the leader, a visit to a protected link may be a follower's,
		// forwarded with its password: the visitor is the one that node
		// saw.
		r.clicks.Record(t.Code, r.clickVisitor(ctx))
	}
}

// guardedTarget applies a link's options to a visit: not before
// valid_since, not past max_visits, only with the password; then the rules
// pick the target. ok false: the answer is written.
func (r *redirector) guardedTarget(ctx *fasthttp.RequestCtx, t *fsm.Target, code []byte, now time.Time) (target string, ok bool) {
	o := t.Options
	switch {
	case o.ValidSince != 0 && now.UnixMilli() < o.ValidSince:
		r.invalidLink(ctx, t.Domain, code, fasthttp.StatusNotFound, "")
		return "", false
	case o.PasswordHash == "" && ctx.IsPost():
		writeProblem(ctx, fasthttp.StatusMethodNotAllowed, "method POST is not allowed here: the link has no password")
		return "", false
	}
	// The password comes before anything else about the link: without it
	// a visitor learns nothing, not even that its visits are used up. It
	// is checked wherever the request lands, a peer's forwarded one
	// included: a follower hands its visitors' passwords to the leader.
	if o.PasswordHash != "" && !r.passwordAccepted(ctx, t, code) {
		return "", false
	}
	if o.MaxVisits > 0 && r.fsm.VisitsUsed(t.Code) >= o.MaxVisits {
		r.invalidLink(ctx, t.Domain, code, fasthttp.StatusGone, "short link "+string(code)+" has had all its visits")
		return "", false
	}
	target = pickTarget(t.URL, o, r.ruleVisit(ctx, now))
	if o.MaxVisits > 0 && !ctx.IsHead() && !r.countVisit(ctx, t, code) {
		return "", false
	}
	return target, true
}

// passwordAccepted checks the password a visitor sent, after the guess
// limits: a flood of guesses costs no hashing. The limits are the
// cluster's, not each node's: a follower forwards the visit to the leader,
// which alone keeps the guess budgets (and hashes), and relays its answer
// (ok false, the answer written). A guess spread over every node thus
// spends one budget, the client's as its node names it (requestClient).
func (r *redirector) passwordAccepted(ctx *fasthttp.RequestCtx, t *fsm.Target, code []byte) bool {
	pw, sent := submittedPassword(ctx)
	if !sent {
		writePasswordForm(ctx, string(code), fasthttp.StatusUnauthorized, "")
		return false
	}
	if !fromPeer(ctx) {
		forwarded, err := r.fwd.toLeader(ctx, forwardUnlock, r.withVisitor(r.visitorOf(ctx)))
		switch {
		case err == nil && forwarded:
			return false
		case err == nil: // this node leads
		case errors.Is(err, cluster.ErrUpgrading):
			// A server of an older build would open the link to a
			// forwarded visit unchecked: until the upgrade is done,
			// each node checks its own visitors' guesses.
		default:
			writeBrowserError(ctx, fasthttp.StatusServiceUnavailable, "short link "+string(code)+" is protected by a password, and no leader is reachable to check it: try again")
			return false
		}
	}
	if wait, ok := r.guesses.allow(r.proxies.requestClient(ctx), t.Code); !ok {
		writePasswordLimited(ctx, string(code), wait)
		return false
	}
	if !linkPasswordMatches(t.Options.PasswordHash, pw) {
		writePasswordForm(ctx, string(code), fasthttp.StatusUnauthorized, "Wrong password")
		return false
	}
	return true
}

// countVisit counts a visit to a link with max_visits through the
// leader's log, which alone decides which visit is the last one allowed:
// a follower forwards the request and relays the leader's answer. ok
// false: the answer is written (the relayed one, or a refusal).
func (r *redirector) countVisit(ctx *fasthttp.RequestCtx, t *fsm.Target, code []byte) bool {
	visitor := r.clickVisitor(ctx)
	if !fromPeer(ctx) {
		forwarded, err := r.fwd.toLeader(ctx, forwardWrite.needs(fsm.LevelOptions), r.withVisitor(visitor))
		if err != nil {
			writeBrowserError(ctx, fasthttp.StatusServiceUnavailable, "short link "+string(code)+" counts its visits, and no leader is reachable to count this one: try again")
			return false
		}
		if forwarded {
			return false
		}
	}
	_, err := r.writes.Propose(context.Background(),
		fsm.VisitCommand{Code: t.Code, Now: time.Now().UnixMilli(), Visitor: visitor, HasVisitor: true}, cluster.ProposeOptions{})
	switch {
	case err == nil:
		return true
	case errors.Is(err, fsm.ErrVisitLimit):
		r.invalidLink(ctx, t.Domain, code, fasthttp.StatusGone, "short link "+string(code)+" has had all its visits")
	case errors.Is(err, fsm.ErrNotFound):
		r.notFound(ctx, t.Domain, code)
	default:
		writeBrowserError(ctx, fasthttp.StatusServiceUnavailable, "short link "+string(code)+" counts its visits, and this one could not be counted: try again")
	}
	return false
}

// clickVisitor is the visitor a visit counts: the one the forwarding node
// sent along with a peer's request, else this request's own.
func (r *redirector) clickVisitor(ctx *fasthttp.RequestCtx) fsm.Visitor {
	if v, forwarded := forwardedVisitor(ctx); forwarded {
		return v
	}
	return r.visitorOf(ctx)
}

// withVisitor adds visitor to a visit forwarded to the leader, which sees
// this node's address, not the visitor's: the visitor goes along as this
// node saw it.
func (r *redirector) withVisitor(visitor fsm.Visitor) func(*fasthttp.Request) {
	return func(req *fasthttp.Request) {
		req.Header.Set(wire.VisitorHeader, base64.RawURLEncoding.EncodeToString(fsm.EncodeVisitor(visitor)))
	}
}

// notFound answers a code the Host's domain d (zero: none) does not
// have: its not-found redirect when it has one, else 404.
func (r *redirector) notFound(ctx *fasthttp.RequestCtx, d fsm.Domain, code []byte) {
	if d.Name == "" {
		d = r.fsm.DefaultDomain()
	}
	r.countOrphan(ctx, fsm.OrphanInvalidShortURL, d.Name)
	if d.NotFoundRedirect != "" {
		domainRedirect(ctx, d.NotFoundRedirect)
		return
	}
	writeBrowserError(ctx, fasthttp.StatusNotFound, "short link "+string(code)+" does not exist")
}

// bytesOf views s as bytes without copying. Only for passing to functions
// that read or copy their argument, never for writing.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// confirm asks the cluster about a code missing here, or about any code
// while this node knows it is behind the leader: a code created through any
// node is never answered 404 here, and a deleted one never redirects, while
// the leader is reachable. d is the registered domain the request's host
// names (zero: none), as the local lookup found it. unconfirmed: the code
// was not found, and no leader could say so (the miss is this node's own
// view, which the answer says: staleHeader). Kept out of redirect so the
// hit path stays small.
func (r *redirector) confirm(d fsm.Domain, code []byte) (t fsm.Target, found, unconfirmed bool) {
	miss := fsm.Target{Domain: d}
	if codes.IsReserved(string(code)) {
		return miss, false, false // "/API", "/Admin": never a code
	}
	l, ok, stale := fsm.Link{}, false, false
	if d.Name != "" {
		l, ok, stale = r.lookup.lookupCode(fsm.QualifiedCode(d.Name, string(code)))
	}
	if !ok {
		var staleDefault bool
		l, ok, staleDefault = r.lookup.lookupCode(string(code)) // every host serves the default domain's links
		stale = stale || staleDefault
	}
	if !ok {
		return miss, false, stale
	}
	t = l.Target()
	t.Domain = d
	return t, true, false
}

// invalidLink answers a visit to a link of domain d (zero: the default
// domain) that exists but cannot be visited now: expired, not yet valid
// or out of visits. The domain's invalid-link redirect when it has one,
// else status with detail; a 404 is answered as a code d does not have.
func (r *redirector) invalidLink(ctx *fasthttp.RequestCtx, d fsm.Domain, code []byte, status int, detail string) {
	if d.Name == "" {
		d = r.fsm.DefaultDomain()
	}
	if d.InvalidRedirect == "" && status == fasthttp.StatusNotFound {
		r.notFound(ctx, d, code) // counts the orphan visit
		return
	}
	r.countOrphan(ctx, fsm.OrphanInvalidShortURL, d.Name)
	if d.InvalidRedirect != "" {
		domainRedirect(ctx, d.InvalidRedirect)
		return
	}
	writeBrowserError(ctx, status, detail)
}

// domainRedirect answers 302 to a domain's redirect, as stored: not
// through ctx.Redirect, which reads "mailto:a@example.com" or "tel:+1555"
// as a path and sends the visitor to /mailto:a@example.com on this host.
func domainRedirect(ctx *fasthttp.RequestCtx, target string) {
	ctx.SetStatusCode(fasthttp.StatusFound)
	ctx.Response.Header.Set(fasthttp.HeaderLocation, target)
}

// handleRoot answers a visit to a domain's root: its root redirect when
// it has one, else the service's name and version. It counts as an
// orphan visit.
func (r *redirector) handleRoot(ctx *fasthttp.RequestCtx) {
	d, ok := r.fsm.DomainOfHost(ctx.Host())
	if !ok {
		d = r.fsm.DefaultDomain()
	}
	r.countOrphan(ctx, fsm.OrphanBaseURL, d.Name)
	if d.RootRedirect != "" {
		domainRedirect(ctx, d.RootRedirect)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"service": "linkraft", "version": r.version})
}

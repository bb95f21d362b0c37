package httpd

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
)

// linksAPI serves the links one at a time: create, read, list, edit,
// delete, history and QR code.
type linksAPI struct {
	fsm       *fsm.FSM
	writes    Writes
	lookup    linkLookup
	views     linkViews
	input     linkInput
	passwords *linkPasswords
	// auth is asked whether a public route's request may see a link
	// before its valid_since (mayReadLink).
	auth *authority
	// qrCodes bounds the CPU drawing QR codes costs (see qr.go).
	qrCodes *qrCodes
	proxies proxies
	log     *slog.Logger
}

func (api *linksAPI) register(rt routing) {
	// Creates are prepared on the node the client reached and handed to
	// Node.Create, which relays them to the leader in batches.
	create := rt.authorizeCreate(rt.limitCreates(api.handleCreate))
	rt.handle("POST", "/shorten", "create", create)
	rt.handle("POST", "/api/v1/urls", "create", create)
	rt.handle("POST", "/api/v1/workspaces/{workspace}/links", "create", create)
	rt.handle("GET", "/api/v1/urls", "list", rt.require(fsm.ScopeLinksRead, api.handleList))
	rt.handle("GET", "/api/v1/urls/{code}", "read", rt.require(fsm.ScopeLinksRead, api.handleRead))
	// Edits spend the client's create budget where the client sent them.
	edit := rt.limitCreates(rt.forwarder(api.handleEdit, forwardWrite.needs(fsm.LevelOptions)))
	rt.handle("PATCH", "/api/v1/urls/{code}", "edit", rt.require(fsm.ScopeLinksWrite, edit))
	rt.handle("GET", "/api/v1/urls/{code}/history", "history", rt.require(fsm.ScopeLinksRead, api.handleHistory))
	// The leader checks the credential of a forwarded delete again: it
	// travels with the request.
	del := rt.forwarder(api.handleDelete, forwardWrite)
	rt.handle("DELETE", "/api/v1/urls/{code}", "delete", rt.require(fsm.ScopeLinksWrite, del))
	rt.handle("GET", "/api/v1/urls/{code}/qr", "qr", api.handleQR)
}

// linkViews shows links as the API does: their short URLs are under
// --base-url, or the request's host without one.
type linkViews struct {
	baseURL string
	https   bool // the node serves HTTPS: short URLs under the host are https
}

// linkInput reads what a client sends about a link (a create, an edit, an
// import line) into what the state machine takes.
type linkInput struct {
	allowPrivateTargets bool
	codeLength          int
}

// linkJSON is a link as the API shows it after a create.
type linkJSON struct {
	ID          uint64  `json:"id"`
	ShortCode   string  `json:"short_code"`
	ShortURL    string  `json:"short_url"`
	OriginalURL string  `json:"original_url"`
	Workspace   string  `json:"workspace"`
	CreatedAt   string  `json:"created_at"`
	ExpiresAt   *string `json:"expires_at"`
	Existing    bool    `json:"existing,omitempty"`
	optionsView
}

// linkReadJSON is a link as the read and list endpoints show it.
type linkReadJSON struct {
	linkJSON
	ClickCount     uint64  `json:"click_count"`
	LastAccessedAt *string `json:"last_accessed_at"`
}

// timestamp formats unix milliseconds as RFC 3339 UTC.
func timestamp(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func optionalTimestamp(ms int64) *string {
	if ms == 0 {
		return nil
	}
	t := timestamp(ms)
	return &t
}

// shortURL is the link's address: on its own domain when it has one (with
// the scheme of --base-url, https when that is unset), else under the
// base URL.
func (lv linkViews) shortURL(ctx *fasthttp.RequestCtx, l *fsm.Link) string {
	if l.Domain != "" {
		scheme := "https://"
		if strings.HasPrefix(lv.baseURL, "http://") {
			scheme = "http://"
		}
		return scheme + l.Domain + "/" + l.Code
	}
	if lv.baseURL != "" {
		return lv.baseURL + "/" + l.Code
	}
	if lv.https {
		return "https://" + string(ctx.Host()) + "/" + l.Code
	}
	return "http://" + string(ctx.Host()) + "/" + l.Code
}

func (lv linkViews) linkView(ctx *fasthttp.RequestCtx, l *fsm.Link) linkJSON {
	return linkJSON{
		ID: l.ID, ShortCode: l.Code, ShortURL: lv.shortURL(ctx, l), OriginalURL: l.URL,
		Workspace: l.Workspace, CreatedAt: timestamp(l.CreatedAt), ExpiresAt: optionalTimestamp(l.ExpiresAt),
		optionsView: viewOptions(l),
	}
}

func (lv linkViews) linkReadView(ctx *fasthttp.RequestCtx, l *fsm.Link) linkReadJSON {
	return linkReadJSON{linkJSON: lv.linkView(ctx, l), ClickCount: l.Clicks, LastAccessedAt: optionalTimestamp(l.LastAccess)}
}

// limitCreates applies the per-client create rate limit, which creates
// and edits share, on the node the client talks to; requests forwarded by
// a peer were limited there. A bulk create counts its items (screenBulk).
func (rt routing) limitCreates(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if !fromPeer(ctx) {
			if wait, ok := rt.limiter.allow(rt.proxies.clientIP(ctx)); !ok {
				writeCreatesLimited(ctx, wait)
				return
			}
		}
		h(ctx)
	}
}

// createsLimitedDetail says why a create or an edit was refused by the
// per-client rate limit.
func createsLimitedDetail(wait int) string {
	return "too many creates and edits from this address; retry after " + strconv.Itoa(wait) + " s"
}

// writeCreatesLimited answers a request the create rate limit refused.
func writeCreatesLimited(ctx *fasthttp.RequestCtx, wait int) {
	writeProblem(ctx, fasthttp.StatusTooManyRequests, createsLimitedDetail(wait))
	ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, strconv.Itoa(wait))
}

// authorizeCreate authenticates a create: a key with links:write, or no
// key at all when public creates are allowed. The workspace, domain and
// options, which are in the body, are checked once it is parsed
// (createRefusal).
func (rt routing) authorizeCreate(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if !rt.auth.authenticate(ctx, rt.publicCreate) {
			return
		}
		if k := keyOf(ctx); k != nil && !k.Has(fsm.ScopeLinksWrite) {
			writeProblem(ctx, fasthttp.StatusForbidden, "the API key lacks the links:write scope")
			return
		}
		h(ctx)
	}
}

// publicWorkspace is where creates without a key go (--public-create).
const publicWorkspace = "public"

// defaultWorkspaceOf is the workspace a create that names none goes to: a
// key's only workspace, "public" without a key, else "default".
func defaultWorkspaceOf(k *fsm.APIKey) string {
	switch {
	case k == nil:
		return publicWorkspace
	case len(k.Workspaces) == 1 && k.Workspaces[0] != fsm.AllWorkspaces && k.Scopes&fsm.ScopeAdmin == 0:
		return k.Workspaces[0]
	}
	return defaultWorkspace
}

// createRefusal is why a create with key k (nil: anonymous) may not make
// req, nil when it may. It needs only the parsed request, so it runs before
// any work is done for the create.
func createRefusal(k *fsm.APIKey, req *fsm.CreateRequest, now time.Time) error {
	opts := req.Options
	if opts == nil {
		opts = &fsm.Options{}
	}
	switch {
	case k == nil && req.Workspace != publicWorkspace:
		return &badRequest{status: fasthttp.StatusUnauthorized,
			msg: "creating a link in workspace " + req.Workspace + " needs an API key; without one, links go to workspace public"}
	// Without a key a link may only be a plain one in the default domain:
	// a registered domain's codes are its owner's (brand.example/login),
	// and rules send some visitors elsewhere than the target shown.
	case k == nil && req.Domain != "":
		return forbidden("creating a link in domain " + req.Domain + " needs an API key; without one, links go to the default domain")
	case k == nil && len(opts.Rules) > 0:
		return forbidden("rules need an API key; without one, a link has its one target")
	case k != nil && !k.Sees(req.Workspace):
		return forbidden("the API key may not create links in workspace " + req.Workspace)
	case k != nil && !k.SeesDomain(req.Domain):
		return forbidden("the API key may not create links in " + domainName(req.Domain))
	case opts.PublicStats && (k == nil || !k.Allows(fsm.ScopeStatsRead, req.Workspace, now.UnixMilli())):
		return forbidden(publicStatsDetail(req.Workspace))
	}
	return nil
}

// publicStatsDetail says why a request may not make a link's stats public.
func publicStatsDetail(workspace string) string {
	return "public_stats lets anyone read the link's stats: it needs the stats:read scope in workspace " +
		workspace + " as well as links:write"
}

// domainName names a domain in messages.
func domainName(domain string) string {
	if domain == "" {
		return "the default domain"
	}
	return "domain " + domain
}

func (api *linksAPI) handleCreate(ctx *fasthttp.RequestCtx) {
	if n := len(ctx.Request.Header.Peek(idempotencyHeader)); n > maxIdempotencyKeyBytes {
		writeProblem(ctx, fasthttp.StatusBadRequest,
			fmt.Sprintf("Idempotency-Key is %d bytes long; at most %d bytes are allowed", n, maxIdempotencyKeyBytes))
		return
	}
	// Expiry counts from now, read once: the create is prepared once, so
	// every attempt Node.Create makes carries the same absolute expiry.
	// Not ctx.Time(): what goes into the state comes from the clock, and
	// a handler that no fasthttp server drives has no request time.
	now := time.Now()
	req, password, err := api.input.parseCreate(ctx, now, defaultWorkspaceOf(keyOf(ctx)))
	if err == nil {
		err = createRefusal(keyOf(ctx), &req, now)
	}
	if err != nil {
		writeBadRequest(ctx, err)
		return
	}
	// Last, once nothing else can refuse the create: it costs the most.
	if password != "" && !api.passwords.hash(ctx, password, &req.Options.PasswordHash) {
		return
	}
	// The client's key, if any; Node.Create gives a create it relays
	// without one a request id of its own.
	req.RequestID = string(ctx.Request.Header.Peek(idempotencyHeader))
	req.KeyID = keyID(ctx)

	res, err := api.writes.Create(context.Background(), req)
	if err != nil {
		writeError(ctx, api.log, err)
		return
	}
	switch {
	case res.Err == nil && res.Existing:
		view := api.views.linkView(ctx, &res.Link)
		view.Existing = true
		writeJSON(ctx, fasthttp.StatusOK, view)
	case res.Err == nil:
		writeJSON(ctx, fasthttp.StatusCreated, api.views.linkView(ctx, &res.Link))
	default:
		if _, refused := errorStatusOf(res.Err); !refused {
			// The state machine failed rather than refused.
			api.log.Error("create failed", "err", res.Err)
			writeProblem(ctx, fasthttp.StatusInternalServerError, "create failed")
			return
		}
		writeError(ctx, api.log, res.Err, createErrorDetails(req)...)
	}
}

// createErrorDetails are the messages of a refused create that name what
// the client sent.
func createErrorDetails(req fsm.CreateRequest) []errorDetail {
	return []errorDetail{
		{fsm.ErrReserved, "custom_code " + req.CustomCode + " is a reserved word"},
		// Before ErrCodeTaken, which it wraps.
		{fsm.ErrCodeDeleted, "custom_code " + req.CustomCode + " belonged to a deleted link; deleted codes are never reused"},
		{fsm.ErrCodeTaken, "custom_code " + req.CustomCode + " is already taken"},
		{fsm.ErrRequestIDReused, "Idempotency-Key was already used for a different request"},
		{fsm.ErrUnknownDomain, "domain " + req.Domain + " is not registered: an admin adds it with POST /admin/domains"},
	}
}

func (api *linksAPI) handleRead(ctx *fasthttp.RequestCtx) {
	api.lookup.catchUp(ctx) // its click count
	if l, ok := api.lookup.lookupLink(ctx, fsm.ScopeLinksRead); ok {
		writeJSON(ctx, fasthttp.StatusOK, api.views.linkReadView(ctx, &l))
	}
}

func (api *linksAPI) handleDelete(ctx *fasthttp.RequestCtx) {
	code := routeCode(ctx)
	// The read-after-write lookup, not the local state: this node leads,
	// but right after winning an election it may not have applied what
	// earlier leaders committed (its barrier comes first), and a local miss
	// there would answer 404 for a link that exists.
	if l, ok := api.lookup.findLink(code); !ok || !seesLink(ctx, fsm.ScopeLinksWrite, &l) {
		writeProblem(ctx, fasthttp.StatusNotFound, "short link "+code+" does not exist")
		return
	}
	res, err := api.writes.Propose(context.Background(),
		fsm.DeleteCommand{Code: code, KeyID: keyID(ctx), Now: time.Now().UnixMilli()}, cluster.ProposeOptions{Visible: true})
	if err != nil {
		writeError(ctx, api.log, err,
			errorDetail{fsm.ErrNotFound, "short link " + code + " does not exist"},
			errorDetail{fsm.ErrUnauthorized, "the API key was revoked or expired before the delete was applied"})
		return
	}
	markApplied(ctx, res.Index)
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

// maxListOffset bounds a list's offset: far past any list's length, and
// within an int on every platform.
const maxListOffset = 1 << 30

// listRequest is a list's query, read: its page and whether it counts.
type listRequest struct {
	limit  int
	cursor uint64
	offset int
	count  bool
}

// readListRequest reads limit, cursor, offset and count, answering 400
// for a bad one.
func readListRequest(ctx *fasthttp.RequestCtx) (listRequest, bool) {
	args := ctx.QueryArgs()
	r := listRequest{limit: defaultListLimit}
	if args.Has("limit") {
		n, err := strconv.Atoi(string(args.Peek("limit")))
		if err != nil || n < 1 || n > maxListLimit {
			writeProblem(ctx, fasthttp.StatusBadRequest, "limit must be a whole number from 1 to 1000")
			return r, false
		}
		r.limit = n
	}
	if c := args.Peek("cursor"); len(c) > 0 {
		n, err := strconv.ParseUint(string(c), 10, 64)
		if err != nil || n == 0 {
			writeProblem(ctx, fasthttp.StatusBadRequest, "cursor is not one this API returned")
			return r, false
		}
		r.cursor = n
	}
	if args.Has("offset") {
		n, err := strconv.Atoi(string(args.Peek("offset")))
		if err != nil || n < 0 || n > maxListOffset {
			writeProblem(ctx, fasthttp.StatusBadRequest, "offset must be a whole number from 0 to 1073741824")
			return r, false
		}
		if r.cursor != 0 {
			writeProblem(ctx, fasthttp.StatusBadRequest, "offset and cursor cannot be used together: a page starts at one or the other")
			return r, false
		}
		r.offset = n
	}
	switch c := string(args.Peek("count")); c {
	case "", "false":
	case "true":
		r.count = true
	default:
		writeProblem(ctx, fasthttp.StatusBadRequest, "count must be true or false, not "+c)
		return r, false
	}
	return r, true
}

func (api *linksAPI) handleList(ctx *fasthttp.RequestCtx) {
	api.lookup.catchUp(ctx)
	args := ctx.QueryArgs()
	// Without a workspace, every workspace the key sees; a workspace it
	// may not see lists as an empty one.
	workspaces := visibleWorkspaces(ctx)
	r, ok := readListRequest(ctx)
	if !ok {
		return
	}
	author, ok := listAuthor(ctx)
	if !ok {
		return
	}
	filter := fsm.Filter{Tag: string(args.Peek("tag")), Text: string(args.Peek("q")), AnyDomain: !args.Has("domain"),
		Domains: keyDomains(ctx), Author: author}
	filter.Domain = domainParam(ctx)
	var (
		page fsm.Page
		next uint64
	)
	switch sort := string(args.Peek("sort")); sort {
	case "", "created":
		page = api.fsm.ListPage(workspaces, filter, r.cursor, r.offset, r.limit, r.count)
		next = page.Next
	case "clicks":
		// The cursor of a list by clicks is an offset (plus one, so that
		// the first page's is never 0): clicks change between pages.
		offset := r.offset
		if r.cursor > 0 {
			offset = int(min(r.cursor-1, 1<<31))
		}
		var n int
		page, n = api.fsm.ClickedPage(workspaces, filter, offset, r.limit, r.count)
		if n > 0 {
			next = uint64(n) + 1
		}
	default:
		writeProblem(ctx, fasthttp.StatusBadRequest, "sort must be created or clicks, not "+sort)
		return
	}
	api.writeList(ctx, page, next, r.count)
}

// listAuthor is the key whose links a list keeps ("": any): ?created_by=ID
// (Shlink's apiKeyName), the key's own id or any with an admin key, as
// Shlink honours it; a key limited to its own links keeps those without.
func listAuthor(ctx *fasthttp.RequestCtx) (string, bool) {
	by := string(ctx.QueryArgs().Peek("created_by"))
	k := keyOf(ctx)
	if by == "" || by == k.ID {
		return cmp.Or(by, keyAuthor(ctx)), true
	}
	if !k.Has(fsm.ScopeAdmin) {
		writeProblem(ctx, fasthttp.StatusForbidden, "only an admin key lists the links another key created")
		return "", false
	}
	return by, true
}

// writeList answers a page of the list, with its totals when counted.
func (api *linksAPI) writeList(ctx *fasthttp.RequestCtx, page fsm.Page, next uint64, counted bool) {
	views := make([]linkReadJSON, len(page.Links))
	for i := range page.Links {
		views[i] = api.views.linkReadView(ctx, &page.Links[i])
	}
	var nextCursor *string
	if next != 0 {
		c := strconv.FormatUint(next, 10)
		nextCursor = &c
	}
	body := map[string]any{"links": views, "next_cursor": nextCursor}
	if counted {
		body["total"] = page.Total.Links
		body["total_clicks"] = page.Total.Clicks
	}
	writeJSON(ctx, fasthttp.StatusOK, body)
}

const (
	defaultQRSize = 256
	minQRSize     = 64
	maxQRSize     = 2048
)

func (api *linksAPI) handleQR(ctx *fasthttp.RequestCtx) {
	size := defaultQRSize
	if v := ctx.QueryArgs().Peek("size"); len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < minQRSize || n > maxQRSize {
			writeProblem(ctx, fasthttp.StatusBadRequest, "size must be a whole number of pixels from 64 to 2048")
			return
		}
		size = n
	}
	l, ok := api.lookup.lookupLink(ctx, 0)
	if !ok {
		return
	}
	cacheControl := "public, max-age=86400"
	if embargoed(&l, time.Now()) {
		// Its code answers as missing until valid_since, and so does its
		// QR code, but to a key that may read the link.
		if !api.mayReadLink(ctx, &l) {
			writeProblem(ctx, fasthttp.StatusNotFound, "short link "+routeCode(ctx)+" does not exist")
			return
		}
		cacheControl = cacheControlNoStore
	}
	png, ok := api.drawQR(ctx, api.views.shortURL(ctx, &l), size)
	if !ok {
		return
	}
	ctx.SetContentType("image/png")
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, cacheControl)
	ctx.SetBody(png)
}

// mayReadLink reports whether the request, on a public route, carries a
// key that may read l (links:read in its workspace and domain).
func (api *linksAPI) mayReadLink(ctx *fasthttp.RequestCtx, l *fsm.Link) bool {
	now := time.Now()
	key, res := api.auth.checkKey(&ctx.Request.Header, now, true)
	return res == authOK && key.Allows(fsm.ScopeLinksRead, l.Workspace, now.UnixMilli()) && key.SeesDomain(l.Domain) &&
		key.SeesAuthor(l.Author)
}

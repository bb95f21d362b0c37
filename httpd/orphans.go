package httpd

import (
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

// Orphan visits are visits that found no link, counted as Shlink counts
// them (fsm/orphans.go): a GET of a domain's root, of a code-shaped path
// that names no link that may be visited now, and of any other page not
// found outside the APIs. They go through the click counter as clicks
// do, with the visitor classified alike, once the cluster is raised to
// fsm.LevelVisitRows: a state before it would count nothing of them.

// countOrphan counts a visit of kind to the domain named ("" for the
// default domain and any host that is not a registered domain).
func (r *redirector) countOrphan(ctx *fasthttp.RequestCtx, kind fsm.OrphanKind, domain string) {
	if !ctx.IsGet() || ctx.UserValue(pixelVisit) != nil || r.fsm.Raised() < fsm.LevelVisitRows {
		return
	}
	r.clicks.Record(r.orphanCodes.code(kind, domain), r.clickVisitor(ctx))
}

// countNotFound counts a page not found as a regular 404, unless an API
// client asked for it.
func (r *redirector) countNotFound(ctx *fasthttp.RequestCtx) {
	path := ctx.Path()
	for _, api := range []string{"/api/", "/rest/"} {
		if strings.HasPrefix(string(path), api) {
			return
		}
	}
	d, _ := r.fsm.DomainOfHost(ctx.Request.Header.Host())
	r.countOrphan(ctx, fsm.OrphanRegular404, d.Name)
}

// orphanCodes keeps the orphan visit codes of registered domains
// (fsm.OrphanCode), so that counting a visit allocates nothing once its
// domain's code was made. The default domain's are constants.
type orphanCodes struct {
	mu    sync.RWMutex
	codes map[orphanCodeKey]string
}

type orphanCodeKey struct {
	kind   fsm.OrphanKind
	domain string
}

// maxOrphanCodes bounds the codes kept: three kinds of every domain a
// cluster may register, and then some for domains removed since.
const maxOrphanCodes = 4 * 3 * fsm.MaxDomains

func (o *orphanCodes) code(kind fsm.OrphanKind, domain string) string {
	if domain == "" {
		return fsm.OrphanCode(kind, "")
	}
	key := orphanCodeKey{kind, domain}
	o.mu.RLock()
	code, ok := o.codes[key]
	o.mu.RUnlock()
	if ok {
		return code
	}
	code = fsm.OrphanCode(kind, domain)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.codes == nil || len(o.codes) >= maxOrphanCodes {
		o.codes = map[orphanCodeKey]string{}
	}
	o.codes[key] = code
	return code
}

type orphanRowJSON struct {
	At     string `json:"at"`
	Type   string `json:"type"`
	Domain string `json:"domain"`
	URL    string `json:"visited_url"`
	rowVisitorJSON
}

// handleOrphanVisitRows answers GET /api/v1/visits/orphan: orphan visit
// rows newest first, narrowed to a type and a domain ("" for the default
// one), to an admin key: they are no workspace's.
func (api *statsAPI) handleOrphanVisitRows(ctx *fasthttp.RequestCtx) {
	q, err := rowQuery(ctx.QueryArgs())
	if err != nil {
		writeProblem(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	args := ctx.QueryArgs()
	filter := fsm.OrphanFilter{AnyKind: !args.Has("type"), AnyDomain: !args.Has("domain"), Domain: domainParam(ctx)}
	if !filter.AnyKind {
		kind, ok := fsm.ParseOrphanKind(string(args.Peek("type")))
		if !ok {
			writeProblem(ctx, fasthttp.StatusBadRequest, "type "+string(args.Peek("type"))+": use base_url, invalid_short_url or regular_404")
			return
		}
		filter.Kind = kind
	}
	v := api.fsm.OrphanVisitRows(filter, q)
	rows := make([]orphanRowJSON, len(v.Rows))
	for i := range v.Rows {
		r := &v.Rows[i]
		rows[i] = orphanRowJSON{At: timestamp(r.At), Type: r.Kind.String(), Domain: r.Domain,
			URL: api.orphanURL(ctx, r.Kind, r.Domain), rowVisitorJSON: rowVisitorOf(r)}
	}
	writeRowPage(ctx, rows, v, q)
}

// orphanURL is the URL an orphan row shows: the domain's root for a
// visit to it; "" for the others, whose paths linkraft does not keep.
func (api *statsAPI) orphanURL(ctx *fasthttp.RequestCtx, kind fsm.OrphanKind, domain string) string {
	if kind != fsm.OrphanBaseURL {
		return ""
	}
	l := fsm.Link{Domain: domain}
	return api.views.shortURL(ctx, &l)
}

// handleDeleteOrphanVisits answers DELETE /api/v1/visits/orphan: it
// forgets every orphan visit, to an admin key, and answers how many.
func (api *statsAPI) handleDeleteOrphanVisits(ctx *fasthttp.RequestCtx) {
	api.deleteVisits(ctx, fsm.OrphanVisitsDeleteCommand{KeyID: keyID(ctx), Now: time.Now().UnixMilli()})
}

package httpd

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
)

// Visit rows list clicks one by one, newest first, as the other
// shorteners' APIs do (fsm/visitrows.go says how they are made from the
// counts the state keeps). They are paged by offset: a page reaches only
// the days it lists.

const (
	defaultRowsLimit = 100
	maxRowsLimit     = 5000 // the page the Shlink web client asks for
)

// rowQuery reads from and to (RFC 3339; by default all that is kept),
// exclude_bots, offset and limit.
func rowQuery(args *fasthttp.Args) (fsm.RowQuery, error) {
	q := fsm.RowQuery{From: 0, To: math.MaxInt64, Limit: defaultRowsLimit, Now: time.Now().UnixMilli()}
	for _, t := range []struct {
		name string
		dst  *int64
	}{{"from", &q.From}, {"to", &q.To}} {
		ms, ok, err := queryTime(args, t.name)
		if err != nil {
			return q, err
		}
		if ok {
			*t.dst = ms
		}
	}
	if q.From >= q.To {
		return q, fmt.Errorf("from must be before to")
	}
	switch v := string(args.Peek("exclude_bots")); v {
	case "true", "1":
		q.ExcludeBots = true
	case "", "false", "0":
	default:
		return q, fmt.Errorf("exclude_bots %q: use true or false", v)
	}
	for _, n := range []struct {
		name     string
		dst      *uint64
		min, max uint64
	}{{"offset", &q.Offset, 0, math.MaxInt64}, {"limit", &q.Limit, 1, maxRowsLimit}} {
		raw := args.Peek(n.name)
		if len(raw) == 0 {
			continue
		}
		v, err := strconv.ParseUint(string(raw), 10, 64)
		if err != nil || v < n.min || v > n.max {
			return q, fmt.Errorf("%s must be a whole number from %d to %d", n.name, n.min, n.max)
		}
		*n.dst = v
	}
	return q, nil
}

type rowJSON struct {
	At       string `json:"at"`
	Code     string `json:"short_code"`
	Domain   string `json:"domain"`
	ShortURL string `json:"short_url"`
	rowVisitorJSON
}

// rowVisitorJSON is what a row says of its visitor: a bot's row keeps its
// kind alone.
type rowVisitorJSON struct {
	Browser  string  `json:"browser"`
	OS       string  `json:"os"`
	Device   string  `json:"device"`
	Country  *string `json:"country"`
	Referrer *string `json:"referrer"`
	Bot      string  `json:"bot"`
}

func rowVisitorOf(r *fsm.VisitRow) rowVisitorJSON {
	v := rowVisitorJSON{Browser: r.Browser.String(), OS: r.OS.String(), Device: r.Device.String(), Bot: r.Bot.String()}
	if r.Bot == fsm.NotBot {
		country, referrer := r.Country, r.Referrer
		if referrer == "" {
			referrer = fsm.Direct
		}
		v.Country, v.Referrer = &country, &referrer
	}
	return v
}

// writeRowPage answers a page of rows with the counts of every row in
// range.
func writeRowPage(ctx *fasthttp.RequestCtx, rows any, v fsm.VisitRows, q fsm.RowQuery) {
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{
		"total": v.Matched(q.ExcludeBots), "non_bots": v.NonBots, "bots": v.Bots,
		"offset": q.Offset, "limit": q.Limit, "visits": rows,
	})
}

// writeRows answers a page of rows: the rows, and the counts of every row
// in range.
func (api *statsAPI) writeRows(ctx *fasthttp.RequestCtx, v fsm.VisitRows, q fsm.RowQuery) {
	rows := make([]rowJSON, len(v.Rows))
	for i := range v.Rows {
		r := &v.Rows[i]
		l := fsm.Link{}
		l.Domain, l.Code = fsm.SplitCode(r.Code)
		rows[i] = rowJSON{At: timestamp(r.At), Code: l.Code, Domain: l.Domain, ShortURL: api.views.shortURL(ctx, &l), rowVisitorJSON: rowVisitorOf(r)}
	}
	writeRowPage(ctx, rows, v, q)
}

// handleLinkVisitRows answers GET /api/v1/urls/{code}/visits: the link's
// rows, to a key that may read its stats.
func (api *statsAPI) handleLinkVisitRows(ctx *fasthttp.RequestCtx) {
	q, err := rowQuery(ctx.QueryArgs())
	if err != nil {
		writeProblem(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	api.lookup.catchUp(ctx)
	l, ok := api.lookup.lookupLink(ctx, fsm.ScopeStatsRead)
	if !ok {
		return
	}
	v, _ := api.fsm.LinkVisitRows(l.Qualified(), q)
	api.writeRows(ctx, v, q)
}

// handleWorkspaceVisitRows answers GET /api/v1/visits: the rows of every
// link the key may read stats of, narrowed as GET /api/v1/stats narrows
// (workspace, tag, domain).
func (api *statsAPI) handleWorkspaceVisitRows(ctx *fasthttp.RequestCtx) {
	q, err := rowQuery(ctx.QueryArgs())
	if err != nil {
		writeProblem(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	api.lookup.catchUp(ctx)
	args := ctx.QueryArgs()
	filter := fsm.Filter{Tag: string(args.Peek("tag")), AnyDomain: !args.Has("domain"), Domains: keyDomains(ctx),
		Author: keyAuthor(ctx)}
	filter.Domain = domainParam(ctx)
	api.writeRows(ctx, api.fsm.WorkspaceVisitRows(visibleWorkspacesFor(ctx, fsm.ScopeStatsRead), filter, q), q)
}

// handleDeleteVisits answers DELETE /api/v1/urls/{code}/visits: it
// forgets the link's visits (clicks, hours, visitors, bots), with the
// checks of a delete of the link, and answers how many it forgot.
func (api *statsAPI) handleDeleteVisits(ctx *fasthttp.RequestCtx) {
	code := routeCode(ctx)
	if l, ok := api.lookup.findLink(code); !ok || !seesLink(ctx, fsm.ScopeLinksWrite, &l) {
		writeProblem(ctx, fasthttp.StatusNotFound, "short link "+code+" does not exist")
		return
	}
	api.deleteVisits(ctx, fsm.VisitsDeleteCommand{Code: code, KeyID: keyID(ctx), Now: time.Now().UnixMilli()},
		errorDetail{fsm.ErrNotFound, "short link " + code + " does not exist"})
}

// deleteVisits proposes a deletion of visits and answers how many it
// forgot, visible on this node when it answers.
func (api *statsAPI) deleteVisits(ctx *fasthttp.RequestCtx, cmd fsm.Command, details ...errorDetail) {
	forgot, index, err := cluster.ProposeFor[uint64](context.Background(), api.writes, cmd, cluster.ProposeOptions{Visible: true})
	if err != nil {
		writeError(ctx, api.log, err, append(details,
			errorDetail{fsm.ErrUnauthorized, "the API key was revoked or expired before the deletion was applied"})...)
		return
	}
	markApplied(ctx, index)
	writeJSON(ctx, fasthttp.StatusOK, map[string]uint64{"deleted_visits": forgot})
}

package httpd

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

// Visit breakdowns cover whole UTC days, the unit they are kept in: from
// rounds down and to up to midnight. Without from, a breakdown covers the
// 30 days up to the end of today; it may reach back as far as days are
// kept.
const dayMillis = int64(24 * time.Hour / time.Millisecond)

// visitRange reads from and to for a breakdown.
func visitRange(args *fasthttp.Args, now time.Time) (from, to int64, err error) {
	days := seriesInterval{step: 24 * time.Hour, byDefault: 30 * 24 * time.Hour, maxPoints: fsm.ClickRetentionHours/24 + 1}
	r, err := parseRange(args, now, "day", days)
	return r.from, r.to, err
}

// groupBy reads group_by; "" asks for no breakdown.
func groupBy(args *fasthttp.Args) (fsm.Dimension, error) {
	name := string(args.Peek("group_by"))
	by, ok := fsm.ParseDimension(name)
	if !ok {
		return 0, fmt.Errorf("group_by %q: use referrer, browser, os, device or country", name)
	}
	return by, nil
}

// wantsCSV: ?format=csv, or an Accept header that asks for text/csv.
func wantsCSV(ctx *fasthttp.RequestCtx) (bool, error) {
	switch format := string(ctx.QueryArgs().Peek("format")); format {
	case "csv":
		return true, nil
	case "json":
		return false, nil
	case "":
		return bytes.Contains(ctx.Request.Header.Peek(fasthttp.HeaderAccept), []byte("text/csv")), nil
	default:
		return false, fmt.Errorf("format %q: use json or csv", format)
	}
}

// statsRequest is what every stats answer reads from its query.
type statsRequest struct {
	by       fsm.Dimension
	from, to int64
	csv      bool
}

// readStatsRequest reads format, group_by and, for a breakdown (or with
// days set), from and to as whole days.
func readStatsRequest(ctx *fasthttp.RequestCtx, days bool) (statsRequest, bool) {
	var r statsRequest
	var err error
	if r.csv, err = wantsCSV(ctx); err == nil {
		if r.by, err = groupBy(ctx.QueryArgs()); err == nil && (days || r.by != fsm.ByNothing) {
			r.from, r.to, err = visitRange(ctx.QueryArgs(), time.Now())
		}
	}
	if err != nil {
		writeProblem(ctx, fasthttp.StatusBadRequest, err.Error())
		return r, false
	}
	return r, true
}

type groupJSON struct {
	Value  string `json:"value"`
	Clicks uint64 `json:"clicks"`
}

type dayJSON struct {
	Start    string `json:"start"`
	Clicks   uint64 `json:"clicks"`
	Crawlers uint64 `json:"crawlers"`
	Previews uint64 `json:"previews"`
}

// visitsJSON is a breakdown over [from, to): its clicks, bots, groups
// (with a dimension) and every day, zeros included.
type visitsJSON struct {
	Clicks   uint64      `json:"clicks"`
	Crawlers uint64      `json:"crawlers"`
	Previews uint64      `json:"previews"`
	Groups   []groupJSON `json:"groups,omitempty"`
	Days     []dayJSON   `json:"days"`
}

func visitsView(v fsm.Visits, r statsRequest) visitsJSON {
	out := visitsJSON{Clicks: v.Clicks, Crawlers: v.Crawlers, Previews: v.Previews,
		Days: make([]dayJSON, (r.to-r.from)/dayMillis)}
	if r.by != fsm.ByNothing {
		out.Groups = make([]groupJSON, len(v.Groups))
		for i, g := range v.Groups {
			out.Groups[i] = groupJSON(g)
		}
	}
	for i := range out.Days {
		out.Days[i].Start = timestamp(r.from + int64(i)*dayMillis)
	}
	for _, d := range v.Days {
		if d.Start >= r.from && d.Start < r.to {
			out.Days[(d.Start-r.from)/dayMillis] = dayJSON{timestamp(d.Start), d.Clicks, d.Crawlers, d.Previews}
		}
	}
	return out
}

// writeVisitsCSV answers a breakdown as CSV: one row per group with a
// dimension, one per day without.
func writeVisitsCSV(ctx *fasthttp.RequestCtx, name string, by fsm.Dimension, v visitsJSON) {
	var rows [][]string
	if by != fsm.ByNothing {
		rows = append(rows, []string{by.String(), "clicks"})
		for _, g := range v.Groups {
			rows = append(rows, []string{g.Value, strconv.FormatUint(g.Clicks, 10)})
		}
	} else {
		rows = append(rows, []string{"day", "clicks", "crawlers", "previews"})
		for _, d := range v.Days {
			rows = append(rows, []string{d.Start, strconv.FormatUint(d.Clicks, 10),
				strconv.FormatUint(d.Crawlers, 10), strconv.FormatUint(d.Previews, 10)})
		}
	}
	writeCSV(ctx, name, rows)
}

func writeCSV(ctx *fasthttp.RequestCtx, name string, rows [][]string) {
	ctx.SetContentType("text/csv; charset=utf-8")
	ctx.Response.Header.Set("Content-Disposition", `attachment; filename="`+name+`.csv"`)
	w := csv.NewWriter(ctx)
	for _, row := range rows {
		for i, cell := range row {
			row[i] = csvSafe(cell)
		}
		_ = w.Write(row) // ctx buffers the body: writes do not fail
	}
	w.Flush()
}

// csvSafe keeps a spreadsheet from reading a cell as a formula.
func csvSafe(cell string) string {
	if cell != "" && bytes.IndexByte([]byte("=+-@\t\r"), cell[0]) >= 0 {
		return "'" + cell
	}
	return cell
}

// linkVisits answers a link's breakdown: the link's totals, and its
// visits over [from, to) grouped by the dimension asked for.
func (api *statsAPI) linkVisits(ctx *fasthttp.RequestCtx, l *fsm.Link, countField string, r statsRequest) {
	v, _ := api.fsm.LinkVisits(l.Qualified(), r.from, r.to, r.by)
	view := visitsView(v, r)
	if r.csv {
		writeVisitsCSV(ctx, l.Code+"-"+r.by.String(), r.by, view)
		return
	}
	crawlers, previews := api.fsm.BotsInAll(l.Qualified())
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{
		"short_code": l.Code, "original_url": statsTarget(ctx, l), countField: l.Clicks,
		"bots":       map[string]uint64{"crawlers": crawlers, "previews": previews},
		"created_at": timestamp(l.CreatedAt), "last_accessed_at": optionalTimestamp(l.LastAccess),
		"group_by": r.by.String(), "from": timestamp(r.from), "to": timestamp(r.to), "visits": view,
	})
}

// handleWorkspaceStats answers GET /api/v1/stats: the visits of every link
// the key may read stats of in a workspace (all of them without
// ?workspace=), narrowed by tag and domain, over whole days.
func (api *statsAPI) handleWorkspaceStats(ctx *fasthttp.RequestCtx) {
	r, ok := readStatsRequest(ctx, true)
	if !ok {
		return
	}
	api.lookup.catchUp(ctx)
	args := ctx.QueryArgs()
	filter := fsm.Filter{Tag: string(args.Peek("tag")), AnyDomain: !args.Has("domain"), Domains: keyDomains(ctx),
		Author: keyAuthor(ctx)}
	filter.Domain = domainParam(ctx)
	v := api.fsm.WorkspaceVisits(visibleWorkspacesFor(ctx, fsm.ScopeStatsRead), filter, r.from, r.to, r.by)
	view := visitsView(v, r)
	if r.csv {
		name := "stats"
		if r.by != fsm.ByNothing {
			name += "-" + r.by.String()
		}
		writeVisitsCSV(ctx, name, r.by, view)
		return
	}
	optional := func(name string) *string {
		if !args.Has(name) {
			return nil
		}
		v := string(args.Peek(name))
		return &v
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{
		"workspace": optional("workspace"), "tag": optional("tag"), "domain": optional("domain"),
		"links": v.Links, "clicks": v.LinkTotal,
		"group_by": r.by.String(), "from": timestamp(r.from), "to": timestamp(r.to), "visits": view,
	})
}

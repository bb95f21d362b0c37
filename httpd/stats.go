package httpd

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

// statsAPI serves the visits: a link's and a workspace's statistics, the
// visit rows, and the orphan visits (orphans.go), and forgets them.
type statsAPI struct {
	fsm    *fsm.FSM
	writes Writes
	lookup linkLookup
	views  linkViews
	// auth guards a link's stats unless they are public (statsRoute).
	auth *authority
	log  *slog.Logger
}

func (api *statsAPI) register(rt routing) {
	rt.handle("GET", "/api/v1/urls/{code}/stats", "stats", api.statsRoute(api.statsHandler("clicks")))
	rt.handle("GET", "/stats/{code}", "stats", api.statsRoute(api.statsHandler("click_count")))
	rt.handle("GET", "/api/v1/stats", "workspace_stats", rt.require(fsm.ScopeStatsRead, api.handleWorkspaceStats))
	rt.handle("GET", "/api/v1/urls/{code}/visits", "visit_rows", rt.require(fsm.ScopeStatsRead, api.handleLinkVisitRows))
	rt.handle("GET", "/api/v1/visits", "visit_rows", rt.require(fsm.ScopeStatsRead, api.handleWorkspaceVisitRows))
	// Forgetting visits is written with an entry older builds do not apply.
	forget := func(h fasthttp.RequestHandler) fasthttp.RequestHandler {
		return rt.forwarder(h, forwardWrite.needs(fsm.LevelVisitRows))
	}
	// Orphan visits are no workspace's: an admin's (orphans.go).
	rt.handle("GET", "/api/v1/visits/orphan", "orphan_visit_rows", rt.require(fsm.ScopeAdmin, api.handleOrphanVisitRows))
	rt.handle("DELETE", "/api/v1/visits/orphan", "delete_orphan_visits",
		rt.require(fsm.ScopeAdmin, forget(api.handleDeleteOrphanVisits)))
	rt.handle("DELETE", "/api/v1/urls/{code}/visits", "delete_visits",
		rt.require(fsm.ScopeLinksWrite, forget(api.handleDeleteVisits)))
}

// seriesRange is the part of a link's click history a stats request asks
// for: [from, to) in steps of one interval, all in Unix milliseconds, UTC.
type seriesRange struct {
	interval string
	step     int64
	from, to int64
}

// seriesInterval is one interval the stats series can be bucketed by.
type seriesInterval struct {
	step      time.Duration
	byDefault time.Duration // the span asked for when from is absent
	maxPoints int64
}

// intervalNamed: hours go back to the start of retention, days a year.
func intervalNamed(name string) (seriesInterval, bool) {
	switch name {
	case "hour":
		return seriesInterval{time.Hour, 24 * time.Hour, fsm.ClickRetentionHours}, true
	case "day":
		return seriesInterval{24 * time.Hour, 30 * 24 * time.Hour, 366}, true
	}
	return seriesInterval{}, false
}

// parseSeriesRange reads from, to and interval from a stats request. from
// is rounded down and to up to whole intervals; to defaults to the end of
// the current interval, from to a day (hours) or 30 days (days) before to.
func parseSeriesRange(args *fasthttp.Args, now time.Time) (seriesRange, error) {
	name := string(args.Peek("interval"))
	if name == "" {
		name = "hour"
	}
	iv, ok := intervalNamed(name)
	if !ok {
		return seriesRange{}, fmt.Errorf("interval %q: use hour or day", name)
	}
	return parseRange(args, now, name, iv)
}

// parseRange reads from and to in steps of iv, named name in messages.
func parseRange(args *fasthttp.Args, now time.Time, name string, iv seriesInterval) (seriesRange, error) {
	r := seriesRange{interval: name, step: iv.step.Milliseconds()}
	r.to = floorTo(now.UnixMilli(), r.step) + r.step
	if to, ok, err := queryTime(args, "to"); err != nil {
		return r, err
	} else if ok {
		r.to = ceilTo(to, r.step)
	}
	r.from = r.to - iv.byDefault.Milliseconds()
	if from, ok, err := queryTime(args, "from"); err != nil {
		return r, err
	} else if ok {
		r.from = floorTo(from, r.step)
	}
	switch points := (r.to - r.from) / r.step; {
	case r.from >= r.to:
		return r, fmt.Errorf("from must be before to")
	case points > iv.maxPoints:
		return r, fmt.Errorf("from-to spans %d %ss; at most %d", points, name, iv.maxPoints)
	}
	return r, nil
}

// queryTime parses an RFC 3339 query argument to Unix milliseconds; false
// when it is absent.
func queryTime(args *fasthttp.Args, name string) (int64, bool, error) {
	raw := args.Peek(name)
	if len(raw) == 0 {
		return 0, false, nil
	}
	t, err := time.Parse(time.RFC3339, string(raw))
	if err != nil {
		return 0, false, fmt.Errorf("%s %q is not an RFC 3339 time such as 2026-11-22T10:00:00Z", name, raw)
	}
	return t.UnixMilli(), true, nil
}

func floorTo(ms, step int64) int64 {
	q := ms / step
	if ms%step < 0 {
		q-- // division truncates toward zero; times before 1970 round down too
	}
	return q * step
}

func ceilTo(ms, step int64) int64 { return -floorTo(-ms, step) }

// seriesPoint is one interval of a link's clicks.
type seriesPoint struct {
	Start  string `json:"start"`
	Clicks uint64 `json:"clicks"`
}

// clickSeries is every interval of r, oldest first, zeros included.
func clickSeries(r seriesRange, hours []fsm.HourClicks) []seriesPoint {
	points := make([]seriesPoint, (r.to-r.from)/r.step)
	for i := range points {
		points[i].Start = timestamp(r.from + int64(i)*r.step)
	}
	for _, h := range hours {
		points[(h.Start-r.from)/r.step].Clicks += h.Clicks
	}
	return points
}

// statsHandler answers a link's stats and its clicks over time. The two
// stats routes differ only in the name of the count field: "clicks" under
// /api/v1/urls/{code}/stats, "click_count" under /stats/{code}
// (docs/API.md).
func (api *statsAPI) statsHandler(countField string) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		req, ok := readStatsRequest(ctx, false)
		if !ok {
			return
		}
		var r seriesRange
		if req.by == fsm.ByNothing {
			var err error
			if r, err = parseSeriesRange(ctx.QueryArgs(), time.Now()); err != nil {
				writeProblem(ctx, fasthttp.StatusBadRequest, err.Error())
				return
			}
		}
		api.lookup.catchUp(ctx)
		scope := fsm.ScopeStatsRead
		if public, _ := ctx.UserValue(publicStatsKey{}).(bool); public {
			scope = 0
		}
		l, ok := api.lookup.lookupLink(ctx, scope)
		if !ok {
			return
		}
		if req.by != fsm.ByNothing {
			api.linkVisits(ctx, &l, countField, req)
			return
		}
		// A link this node has not applied yet (just created elsewhere) has
		// no clicks here either: its series is all zeros.
		hours, _ := api.fsm.ClickHours(l.Qualified(), r.from, r.to)
		series := clickSeries(r, hours)
		if req.csv {
			rows := [][]string{{"start", "clicks"}}
			for _, p := range series {
				rows = append(rows, []string{p.Start, strconv.FormatUint(p.Clicks, 10)})
			}
			writeCSV(ctx, l.Code+"-"+r.interval, rows)
			return
		}
		crawlers, previews := api.fsm.BotsInAll(l.Qualified())
		writeJSON(ctx, fasthttp.StatusOK, map[string]any{
			"short_code": l.Code, "original_url": statsTarget(ctx, &l), countField: l.Clicks,
			"bots":       map[string]uint64{"crawlers": crawlers, "previews": previews},
			"created_at": timestamp(l.CreatedAt), "last_accessed_at": optionalTimestamp(l.LastAccess),
			"interval": r.interval, "from": timestamp(r.from), "to": timestamp(r.to),
			"series": series,
		})
	}
}

// publicStatsKey marks a stats request served without a key because the
// link's stats are public.
type publicStatsKey struct{}

// statsRoute serves a link's stats to a key with stats:read, and to a
// request without any credential when the link's stats are public, it has
// no password (a protected link's stats stay private) and it is valid
// already (before valid_since its code answers as missing).
func (api *statsAPI) statsRoute(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	guarded := api.auth.require(fsm.ScopeStatsRead, h)
	return func(ctx *fasthttp.RequestCtx) {
		if key, _ := credential(&ctx.Request.Header); key == nil {
			if l, ok := api.lookup.findLink(routeCode(ctx)); ok && l.Options != nil && l.Options.PublicStats && l.Options.PasswordHash == "" &&
				!embargoed(&l, time.Now()) {
				ctx.SetUserValue(publicStatsKey{}, true)
				h(ctx)
				return
			}
		}
		guarded(ctx)
	}
}

// embargoed reports whether l is before its valid_since at now: its code
// answers as missing, and nothing shows its target but to a key that may
// read the link.
func embargoed(l *fsm.Link, now time.Time) bool {
	return l.Options != nil && l.Options.ValidSince != 0 && now.UnixMilli() < l.Options.ValidSince
}

// statsTarget is the target a stats answer shows: none (null) for a link
// before its valid_since, unless the request's key may read the link.
func statsTarget(ctx *fasthttp.RequestCtx, l *fsm.Link) *string {
	if embargoed(l, time.Now()) && !seesLink(ctx, fsm.ScopeLinksRead, l) {
		return nil
	}
	return &l.URL
}

package compat

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// Shlink's visit routes, answered from linkraft's visit rows (GET
// /api/v1/urls/{code}/visits and GET /api/v1/visits), which keep no
// address: a row carries a User-Agent made up to name its browser, OS
// and device as linkraft counted them, the referrer's host, and its
// country alone as location. Orphan visits (to no link) come from GET
// /api/v1/visits/orphan, an admin's: an orphan row's visitedUrl is its
// domain's root for a visit to it, and empty for the others, whose paths
// linkraft does not keep; to other keys the overview counts none.

// maxNativeRows is the largest page of linkraft's rows; a larger Shlink
// page (or all of them, its default) is read in several, at most
// maxRowPages: each is a pass over the days of every link in range under
// the state's read lock, so one request may not ask for many (the web
// client asks for pages of 5,000, one pass each).
const (
	maxNativeRows = 5000
	maxRowPages   = 20
)

func registerShlinkVisits(r func(method, path string, h fasthttp.RequestHandler), sh shlink) {
	r("GET", "/visits", sh.visitsOverview)
	r("GET", "/visits/non-orphan", sh.rowsOf(func(ctx *fasthttp.RequestCtx) (string, url.Values, bool) {
		return "/api/v1/visits", sh.domainFilter(ctx, string(ctx.QueryArgs().Peek("domain"))), true
	}))
	r("GET", "/visits/orphan", sh.rowsOf(sh.orphanRows))
	r("DELETE", "/visits/orphan", sh.deleteOrphanVisits)
	r("GET", "/short-urls/{shortCode}/visits", sh.rowsOf(func(ctx *fasthttp.RequestCtx) (string, url.Values, bool) {
		code, domain := sh.codeAndDomain(ctx)
		filters := url.Values{}
		if domain != "" {
			filters.Set("domain", domain)
		}
		return "/api/v1/urls/" + url.PathEscape(code) + "/visits", filters, true
	}))
	r("GET", "/tags/{tag}/visits", sh.rowsOf(sh.tagRows))
	r("GET", "/domains/{domain}/visits", sh.rowsOf(sh.domainRows))
	r("DELETE", "/short-urls/{shortCode}/visits", sh.deleteVisits)
}

// nativeRow is one of linkraft's visit rows.
type nativeRow struct {
	At       string  `json:"at"`
	ShortURL string  `json:"short_url"`
	Browser  string  `json:"browser"`
	OS       string  `json:"os"`
	Device   string  `json:"device"`
	Country  *string `json:"country"` // null for a bot, as Referrer
	Referrer *string `json:"referrer"`
	Bot      string  `json:"bot"`
	// An orphan row's instead of ShortURL.
	Type       string `json:"type"`
	VisitedURL string `json:"visited_url"`
}

// nativeRows is a page of linkraft's rows.
type nativeRows struct {
	Total   uint64      `json:"total"`
	NonBots uint64      `json:"non_bots"`
	Bots    uint64      `json:"bots"`
	Visits  []nativeRow `json:"visits"`
}

// shlinkVisit is Shlink's Visit.
type shlinkVisit struct {
	Referer       string               `json:"referer"`
	Date          string               `json:"date"`
	UserAgent     string               `json:"userAgent"`
	VisitLocation *shlinkVisitLocation `json:"visitLocation"`
	PotentialBot  bool                 `json:"potentialBot"`
	VisitedURL    string               `json:"visitedUrl"`
	RedirectURL   *string              `json:"redirectUrl"`    // linkraft keeps no row's target: null, as Shlink's rows from before 4.1
	Type          string               `json:"type,omitempty"` // an orphan visit's
}

type shlinkVisitLocation struct {
	CountryCode string  `json:"countryCode"`
	CountryName string  `json:"countryName"`
	RegionName  string  `json:"regionName"`
	CityName    string  `json:"cityName"`
	Latitude    float64 `json:"latitude"`
	Longitude   float64 `json:"longitude"`
	Timezone    string  `json:"timezone"`
	IsEmpty     bool    `json:"isEmpty"`
}

// shlinkRowsQuery is a Shlink visits request as linkraft's rows take it.
type shlinkRowsQuery struct {
	native  url.Values // from, to, exclude_bots
	page    int
	perPage int // -1: all
}

// parseShlinkRows reads a visits query; its error is the invalidFields of
// every invalid parameter.
func parseShlinkRows(args *fasthttp.Args) (shlinkRowsQuery, error) {
	q := shlinkRowsQuery{native: url.Values{}, page: 1, perPage: -1}
	var bad invalidFields
	for _, d := range []struct{ shlink, native string }{{"startDate", "from"}, {"endDate", "to"}} {
		raw := string(args.Peek(d.shlink))
		if raw == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, raw)
		if err != nil {
			bad = append(bad, d.shlink) // an ISO 8601 date such as 2026-11-22T10:00:00+00:00
			continue
		}
		if d.native == "to" { // Shlink's endDate is inclusive
			t = t.Add(time.Millisecond)
		}
		q.native.Set(d.native, t.UTC().Format(time.RFC3339Nano))
	}
	switch v := string(args.Peek("excludeBots")); v {
	case "true", "1":
		q.native.Set("exclude_bots", "true")
	case "", "false", "0":
	default:
		bad = append(bad, "excludeBots") // true or false
	}
	for _, n := range []struct {
		name string
		dst  *int
		all  bool // -1 asks for every item
	}{{"page", &q.page, false}, {"itemsPerPage", &q.perPage, true}} { // whole numbers from 1
		raw := string(args.Peek(n.name))
		if raw == "" {
			continue
		}
		v, err := strconv.Atoi(raw)
		if err != nil || v < 1 && !(n.all && v == -1) {
			bad = append(bad, n.name)
			continue
		}
		*n.dst = v
	}
	return q, bad.orNil()
}

// domainFilter is the native filter of the links in a Shlink domain:
// none for "", the default domain's (domain= alone) for DEFAULT or its
// host.
func (sh shlink) domainFilter(ctx *fasthttp.RequestCtx, domain string) url.Values {
	switch {
	case domain == "":
		return nil
	case domain == "DEFAULT" || strings.EqualFold(domain, sh.n.DefaultDomain(ctx)):
		domain = ""
	}
	return url.Values{"domain": {domain}}
}

// rowsOf answers a Shlink visits list from the native rows at the path
// where returns, with its filters (false: where answered already).
func (sh shlink) rowsOf(where func(ctx *fasthttp.RequestCtx) (string, url.Values, bool)) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		q, err := parseShlinkRows(ctx.QueryArgs())
		if err != nil {
			failInvalid(ctx, err)
			return
		}
		path, filters, ok := where(ctx)
		if !ok {
			return
		}
		for k, v := range filters {
			q.native[k] = v
		}
		sh.writeRows(ctx, path, q)
	}
}

// writeRows reads the page q asks for, in native pages of at most
// maxNativeRows, and answers it as Shlink's visits list.
func (sh shlink) writeRows(ctx *fasthttp.RequestCtx, path string, q shlinkRowsQuery) {
	code, domain := sh.codeAndDomain(ctx)
	offset, want := 0, q.perPage
	if q.perPage > 0 {
		offset = (q.page - 1) * q.perPage
	}
	data := []shlinkVisit{}
	var total int
	for pages := 0; pages < maxRowPages; pages++ {
		limit := maxNativeRows
		if want > 0 {
			limit = min(limit, want-len(data))
		}
		query := url.Values{}
		for k, v := range q.native {
			query[k] = v
		}
		query.Set("offset", strconv.Itoa(offset+len(data)))
		query.Set("limit", strconv.Itoa(limit))
		a := sh.n.Call(ctx, "GET", path+"?"+query.Encode(), nil)
		if a.Status == fasthttp.StatusForbidden && path == nativeOrphans && sh.readsStats(ctx) {
			break // a key that may not see orphan visits sees none, as Shlink's restricted keys
		}
		if !a.OK() {
			failShlink(ctx, a, code, domain)
			return
		}
		var page nativeRows
		if err := a.Decode(&page); err != nil {
			problemShlink(ctx, fasthttp.StatusInternalServerError, "about:blank", "Internal error", err.Error(), nil)
			return
		}
		total = int(page.Total)
		for _, v := range page.Visits {
			data = append(data, visitOf(&v))
		}
		if len(page.Visits) < limit || len(data) == want {
			break
		}
	}
	if listed := max(total-offset, 0); len(data) < listed && (want < 0 || len(data) < want) {
		refuseShlink(ctx, "itemsPerPage", fmt.Sprintf("%d visits match, more than %d a request lists: ask for pages (itemsPerPage) or a shorter range (startDate, endDate)",
			total, maxRowPages*maxNativeRows))
		return
	}
	perPage := q.perPage
	if perPage < 0 {
		perPage = max(total, 1)
	}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(map[string]any{"visits": map[string]any{
		"data": data,
		"pagination": map[string]int{
			"currentPage": q.page, "pagesCount": (total + perPage - 1) / perPage, "itemsPerPage": perPage,
			"itemsInCurrentPage": len(data), "totalItems": total,
		},
	}}))
}

// visitOf is one native row as Shlink's Visit.
func visitOf(r *nativeRow) shlinkVisit {
	v := shlinkVisit{Date: shlinkDate(r.At), PotentialBot: r.Bot != "none", UserAgent: botAgents[r.Bot], VisitedURL: r.ShortURL}
	if r.Type != "" {
		v.Type, v.VisitedURL = r.Type, r.VisitedURL
	}
	if v.PotentialBot || r.Referrer == nil || r.Country == nil {
		return v
	}
	v.UserAgent = UserAgentOf(r.Browser, r.OS, r.Device)
	switch ref := *r.Referrer; ref {
	case "direct":
	case "other":
		v.Referer = ref
	default:
		v.Referer = "https://" + ref + "/"
	}
	if c := *r.Country; c != "XX" {
		v.VisitLocation = &shlinkVisitLocation{CountryCode: c, CountryName: c}
	}
	return v
}

// shlinkDate is one of linkraft's timestamps in Shlink's format. A row's
// time is spread within its hour (fsm/visitrows.go), which may lie past
// now: such a row is dated now, as no visit happened later.
func shlinkDate(at string) string {
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return at
	}
	if now := time.Now(); t.After(now) {
		t = now
	}
	return t.UTC().Format(shlinkTime)
}

// The User-Agent a row carries: one that linkraft's own classifier, and
// the user-agent parsers Shlink's clients use, read back as the row's
// browser and system.
var (
	botAgents = map[string]string{
		"crawler": "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
		"preview": "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
	}
	platforms = map[string]map[string]string{
		"windows":  {"": "Windows NT 10.0; Win64; x64"},
		"macos":    {"": "Macintosh; Intel Mac OS X 10_15_7"},
		"linux":    {"": "X11; Linux x86_64"},
		"ios":      {"": "iPhone; CPU iPhone OS 17_0 like Mac OS X", "tablet": "iPad; CPU OS 17_0 like Mac OS X"},
		"android":  {"": "Linux; Android 14; K", "tablet": "Linux; Android 14; Tablet"},
		"chromeos": {"": "X11; CrOS x86_64 15633.69.0"},
		"other":    {"": "compatible"},
	}
	browserTokens = map[string]string{
		"chrome":  "AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 %sSafari/537.36",
		"safari":  "AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 %sSafari/605.1.15",
		"firefox": "Gecko/20100101 Firefox/121.0",
		"edge":    "AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 %sSafari/537.36 Edg/120.0.0.0",
		"opera":   "AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 %sSafari/537.36 OPR/105.0.0.0",
		"other":   "Lynx/2.9.0",
	}
)

// UserAgentOf is the User-Agent a visit row carries for linkraft's
// browser, OS and device names.
func UserAgentOf(browser, os, device string) string {
	platform := platforms[os][""]
	if p, ok := platforms[os][device]; ok {
		platform = p
	}
	if platform == "" {
		platform = platforms["other"][""]
	}
	if browser == "firefox" {
		platform += "; rv:121.0"
	}
	token, ok := browserTokens[browser]
	if !ok {
		token = browserTokens["other"]
	}
	mobile := ""
	if device == "mobile" {
		mobile = "Mobile "
	}
	if strings.Contains(token, "%s") {
		token = fmt.Sprintf(token, mobile)
	}
	return "Mozilla/5.0 (" + platform + ") " + token
}

// tagRows is the native rows of ?tag=, once the tag is known: Shlink
// answers a missing tag with its tag-not-found problem.
func (sh shlink) tagRows(ctx *fasthttp.RequestCtx) (string, url.Values, bool) {
	tag, _ := ctx.UserValue("tag").(string)
	if decoded, err := url.PathUnescape(tag); err == nil { // the router hands the segment as sent
		tag = decoded
	}
	// Read before nativeTags: its call replaces the request's query.
	filters := sh.domainFilter(ctx, string(ctx.QueryArgs().Peek("domain")))
	tags, ok := sh.nativeTags(ctx)
	if !ok {
		return "", nil, false
	}
	for _, t := range tags {
		if strings.EqualFold(t.Tag, tag) {
			if filters == nil {
				filters = url.Values{}
			}
			filters.Set("tag", tag)
			return "/api/v1/visits", filters, true
		}
	}
	problemShlink(ctx, fasthttp.StatusNotFound, shlinkError+"tag-not-found", "Tag not found",
		fmt.Sprintf("Tag with name %q could not be found", tag), map[string]any{"tag": tag})
	return "", nil, false
}

// domainRows is the native rows of a domain's links, once the domain is
// known to the key: Shlink answers another with domain-not-found.
func (sh shlink) domainRows(ctx *fasthttp.RequestCtx) (string, url.Values, bool) {
	authority, _ := ctx.UserValue("domain").(string)
	filters := sh.domainFilter(ctx, authority)
	if d := filters.Get("domain"); d != "" && !sh.domainKnown(ctx, d) {
		problemShlink(ctx, fasthttp.StatusNotFound, shlinkError+"domain-not-found", "Domain not found",
			fmt.Sprintf("Domain with authority %q could not be found", authority), map[string]any{"authority": authority})
		return "", nil, false
	}
	return "/api/v1/visits", filters, true
}

// domainKnown reports whether domain is one the key may know of: a link
// it sees is on it, or (to an admin key) it is registered.
func (sh shlink) domainKnown(ctx *fasthttp.RequestCtx, domain string) bool {
	a := sh.n.Call(ctx, "GET", "/api/v1/urls?limit=1&domain="+url.QueryEscape(domain), nil)
	var page struct {
		Links []Link `json:"links"`
	}
	if a.OK() && a.Decode(&page) == nil && len(page.Links) > 0 {
		return true
	}
	list, _, _, ok := sh.nativeDomains(ctx)
	return ok && slices.ContainsFunc(list, func(d nativeDomain) bool { return strings.EqualFold(d.Domain, domain) })
}

// visitsOverview answers Shlink's overview: the rows of every link the
// key sees, and the orphan visits to an admin key, counted.
func (sh shlink) visitsOverview(ctx *fasthttp.RequestCtx) {
	var counts [2]nativeRows
	for i, path := range []string{"/api/v1/visits?limit=1", "/api/v1/visits/orphan?limit=1"} {
		a := sh.n.Call(ctx, "GET", path, nil)
		switch {
		case i == 1 && a.Status == fasthttp.StatusForbidden: // not an admin key: none it may see
		case !a.OK():
			failShlink(ctx, a, "", "")
			return
		default:
			if err := a.Decode(&counts[i]); err != nil {
				problemShlink(ctx, fasthttp.StatusInternalServerError, "about:blank", "Internal error", err.Error(), nil)
				return
			}
		}
	}
	links, orphans := counts[0], counts[1]
	total, orphanTotal := links.NonBots+links.Bots, orphans.NonBots+orphans.Bots
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(map[string]any{"visits": map[string]any{
		"nonOrphanVisits": shlinkVisits{Total: total, NonBots: links.NonBots, Bots: links.Bots},
		"orphanVisits":    shlinkVisits{Total: orphanTotal, NonBots: orphans.NonBots, Bots: orphans.Bots},
	}}))
}

// orphanRows is the native orphan rows of ?type= (Shlink's kind names
// are linkraft's) and ?domain=.
func (sh shlink) orphanRows(ctx *fasthttp.RequestCtx) (string, url.Values, bool) {
	filters := sh.domainFilter(ctx, string(ctx.QueryArgs().Peek("domain")))
	if filters == nil {
		filters = url.Values{}
	}
	switch kind := string(ctx.QueryArgs().Peek("type")); kind {
	case "":
	case "base_url", "invalid_short_url", "regular_404":
		filters.Set("type", kind)
	default:
		invalidShlink(ctx, "type") // base_url, invalid_short_url or regular_404
		return "", nil, false
	}
	return nativeOrphans, filters, true
}

// nativeOrphans is linkraft's orphan visits, an admin key's.
const nativeOrphans = "/api/v1/visits/orphan"

// readsStats reports whether the request's key may read visits: one that
// may is only restricted from orphan visits, as a Shlink key without them
// is; one that may not is refused them as any visits.
func (sh shlink) readsStats(ctx *fasthttp.RequestCtx) bool {
	var key struct {
		Scopes []string `json:"scopes"`
	}
	a := sh.n.Call(ctx, "GET", "/api/v1/key", nil)
	return a.OK() && a.Decode(&key) == nil && slices.Contains(key.Scopes, "stats:read")
}

// deleteOrphanVisits forgets the orphan visits; a key that reads visits
// but may not see orphan ones deletes none, as Shlink's restricted keys.
func (sh shlink) deleteOrphanVisits(ctx *fasthttp.RequestCtx) {
	sh.deleteVisitsAt(ctx, nativeOrphans, "", "")
}

// deleteVisits forgets a link's visits: Shlink's {deletedVisits}.
func (sh shlink) deleteVisits(ctx *fasthttp.RequestCtx) {
	code, domain := sh.codeAndDomain(ctx)
	sh.deleteVisitsAt(ctx, linkPath(code, domain, "/visits"), code, domain)
}

// deleteVisitsAt runs linkraft's visit deletion at path and answers how
// many visits it forgot.
func (sh shlink) deleteVisitsAt(ctx *fasthttp.RequestCtx, path, code, domain string) {
	a := sh.n.Call(ctx, "DELETE", path, nil)
	if a.Status == fasthttp.StatusForbidden && path == nativeOrphans && sh.readsStats(ctx) {
		writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(map[string]int{"deletedVisits": 0}))
		return
	}
	if !a.OK() {
		failShlink(ctx, a, code, domain)
		return
	}
	var body struct {
		Deleted uint64 `json:"deleted_visits"`
	}
	if err := a.Decode(&body); err != nil {
		problemShlink(ctx, fasthttp.StatusInternalServerError, "about:blank", "Internal error", err.Error(), nil)
		return
	}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(map[string]uint64{"deletedVisits": body.Deleted}))
}

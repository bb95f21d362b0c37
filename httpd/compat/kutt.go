package compat

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/codes"
)

func registerKutt(route Route, n Native, c cors) {
	k := kutt{n}
	for _, p := range []string{"/api/v2", "/api"} {
		r := func(method, path string, h fasthttp.RequestHandler) {
			route(method, p+path, "compat_kutt", c.wrap(h))
		}
		r("GET", "/health", k.health)
		r("GET", "/links", k.list)
		r("POST", "/links", credentialFirst(n, true, k.failNative, k.create))
		r("PATCH", "/links/{id}", credentialFirst(n, false, k.failNative, k.update))
		r("DELETE", "/links/{id}", k.remove)
		r("GET", "/links/{id}/stats", k.stats)
		// The npm client (kutt 3.0.2) asks for stats with DELETE.
		r("DELETE", "/links/{id}/stats", k.stats)
		r("GET", "/users", k.users)
		r("POST", "/domains", k.unsupported("adding domains through this API (an admin adds them with POST /admin/domains)"))
		r("DELETE", "/domains/{id}", k.unsupported("removing domains through this API (an admin removes them with DELETE /admin/domains/{domain})"))
	}
}

type kutt struct{ n Native }

// failKutt answers Kutt's error body, {"error": message}.
func failKutt(ctx *fasthttp.RequestCtx, status int, msg string) {
	writeBody(ctx, status, "application/json", marshal(map[string]string{"error": msg}))
}

func (k kutt) failNative(ctx *fasthttp.RequestCtx, a Answer) {
	switch a.Status {
	case fasthttp.StatusUnauthorized:
		failKutt(ctx, a.Status, "Unauthorized.")
	case fasthttp.StatusNotFound, fasthttp.StatusGone:
		failKutt(ctx, fasthttp.StatusNotFound, "Could not find the link.")
	case fasthttp.StatusConflict:
		// A reserved word, or a code in use or deleted (never handed out
		// again); Kutt's messages (links.handler.js, validators.handler.js).
		msg := "Custom URL is already in use."
		if strings.Contains(a.Detail(), "reserved") {
			msg = "You can't use this custom URL."
		}
		failKutt(ctx, fasthttp.StatusBadRequest, msg)
	default:
		failKutt(ctx, a.Status, a.Detail())
	}
	a.PassHeaders(ctx)
}

func (k kutt) unsupported(what string) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		failKutt(ctx, fasthttp.StatusNotImplemented, "linkraft does not support "+what)
	}
}

// kuttID is the id Kutt's clients keep for a link: UUID-shaped (RFC 9562
// version 8, whose bits are the maker's to define) and made from
// linkraft's numeric link id, which never changes and is never reused,
// so the id is stable and leads back to the link.
func kuttID(id uint64) string {
	return fmt.Sprintf("6c6b7266-%04x-8%03x-8%03x-%012x", id>>52, (id>>40)&0xfff, (id>>28)&0xfff, id&0xfffffff)
}

var kuttIDPattern = regexp.MustCompile(`^6c6b7266-([0-9a-f]{4})-8([0-9a-f]{3})-8([0-9a-f]{3})-([0-9a-f]{12})$`)

// linkIDOf is the numeric id a kuttID names; false for another string.
func linkIDOf(s string) (uint64, bool) {
	m := kuttIDPattern.FindStringSubmatch(strings.ToLower(s))
	if m == nil {
		return 0, false
	}
	var parts [4]uint64
	for i := range parts {
		n, err := strconv.ParseUint(m[i+1], 16, 64)
		if err != nil {
			return 0, false
		}
		parts[i] = n
	}
	if parts[3] > 0xfffffff {
		return 0, false
	}
	return parts[0]<<52 | parts[1]<<40 | parts[2]<<28 | parts[3], true
}

// kuttLink is a link as Kutt v2 shows it.
type kuttLink struct {
	ID          string  `json:"id"`
	Address     string  `json:"address"`
	Banned      bool    `json:"banned"`
	CreatedAt   string  `json:"created_at"`
	Link        string  `json:"link"`
	Password    bool    `json:"password"`
	Target      string  `json:"target"`
	Description *string `json:"description"`
	ExpireIn    *string `json:"expire_in"`
	UpdatedAt   string  `json:"updated_at"`
	VisitCount  uint64  `json:"visit_count"`
}

func kuttTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func kuttLinkOf(l *Link) kuttLink {
	k := kuttLink{
		ID: kuttID(l.ID), Address: l.ShortCode, CreatedAt: kuttTime(l.Created()), Link: l.ShortURL,
		Password: l.PasswordProtected, Target: l.OriginalURL, UpdatedAt: kuttTime(l.Updated()), VisitCount: l.ClickCount,
	}
	if l.Title != "" {
		k.Description = &l.Title
	}
	if e := l.Expires(); !e.IsZero() {
		s := kuttTime(e)
		k.ExpireIn = &s
	}
	return k
}

// expireIn reads Kutt's expire_in ("2 hours", "30m", "1 day": the ms
// library's spellings, at least a minute as Kutt asks) as seconds.
func expireIn(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	n, err := strconv.ParseFloat(s[:i], 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("expire_in %q is not a duration such as \"2 hours\"", s)
	}
	unit := strings.TrimSpace(s[i:])
	var d time.Duration
	switch unit {
	case "s", "sec", "secs", "second", "seconds":
		d = time.Second
	case "m", "min", "mins", "minute", "minutes":
		d = time.Minute
	case "h", "hr", "hrs", "hour", "hours":
		d = time.Hour
	case "d", "day", "days":
		d = 24 * time.Hour
	case "w", "week", "weeks":
		d = 7 * 24 * time.Hour
	case "y", "yr", "yrs", "year", "years":
		d = 365*24*time.Hour + 6*time.Hour
	default:
		return 0, fmt.Errorf("expire_in %q: unknown unit %q", s, unit)
	}
	secs := int64(n * float64(d/time.Second))
	if secs < 60 {
		return 0, fmt.Errorf("expire_in must be at least 1 minute")
	}
	return secs, nil
}

// kuttCreate is Kutt's create body.
type kuttCreate struct {
	Target      string `json:"target"`
	CustomURL   string `json:"customurl"`
	Description string `json:"description"`
	ExpireIn    string `json:"expire_in"`
	Password    string `json:"password"`
	Reuse       bool   `json:"reuse"`
	Domain      string `json:"domain"`
}

// Kutt's limits (validators.handler.js createLink) and linkraft's where
// they are narrower: a link's title, which holds Kutt's description, and
// a custom code.
const (
	kuttMaxDescription = 2040
	minCustomCode      = 3
	kuttMaxCustomURL   = 64
)

// schemePattern is a target that names its scheme (or is scheme-relative),
// as Kutt's addProtocol tells them.
var schemePattern = regexp.MustCompile(`^(\w+:|//)`)

func (c *kuttCreate) native(defaultDomain string) (map[string]any, error) {
	target := strings.TrimSpace(c.Target)
	if target == "" {
		return nil, errors.New("Target is missing.")
	}
	// Kutt takes a target without a scheme as http.
	if !schemePattern.MatchString(target) {
		target = "http://" + target
	}
	body := map[string]any{"url": target}
	if code := strings.TrimSpace(c.CustomURL); code != "" {
		switch n := utf8.RuneCountInString(code); {
		case n > kuttMaxCustomURL:
			return nil, errors.New("Custom URL length must be between 1 and 64.")
		case n < minCustomCode:
			return nil, fmt.Errorf("linkraft's custom URLs are %d to %d characters long", minCustomCode, kuttMaxCustomURL)
		}
		body["custom_code"] = code
	}
	if d := strings.TrimSpace(c.Description); d != "" {
		if err := kuttDescription(d); err != nil {
			return nil, err
		}
		body["title"] = d
	}
	if c.ExpireIn != "" {
		secs, err := expireIn(c.ExpireIn)
		if err != nil {
			return nil, err
		}
		body["expires_in_seconds"] = secs
	}
	if c.Password != "" {
		body["password"] = c.Password
	}
	if c.Reuse {
		body["dedupe"] = true
	}
	if c.Domain != "" && !strings.EqualFold(c.Domain, defaultDomain) {
		body["domain"] = c.Domain
	}
	return body, nil
}

func (k kutt) health(ctx *fasthttp.RequestCtx) {
	a := k.n.Call(ctx, "GET", "/health", nil)
	if !a.OK() {
		writeBody(ctx, a.Status, "text/plain; charset=utf-8", []byte("Unavailable"))
		return
	}
	writeBody(ctx, fasthttp.StatusOK, "text/plain; charset=utf-8", []byte("OK"))
}

func (k kutt) create(ctx *fasthttp.RequestCtx) {
	var c kuttCreate
	if err := decodeStrict(ctx.PostBody(), &c); err != nil {
		failKutt(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	body, err := c.native(k.n.DefaultDomain(ctx))
	if err != nil {
		failKutt(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	a := k.n.Call(ctx, "POST", "/api/v1/urls", body)
	if !a.OK() {
		k.failNative(ctx, a)
		return
	}
	var l Link
	if err := a.Decode(&l); err != nil {
		failKutt(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	status := fasthttp.StatusCreated
	if l.Existing { // reuse found it
		status = fasthttp.StatusOK
	}
	writeBody(ctx, status, "application/json", marshal(kuttLinkOf(&l)))
}

// Kutt's list pages: limit 10 unless asked, at most 50 (Kutt's
// parseQuery in server/handlers/helpers.handler.js).
const (
	kuttDefaultLimit = 10
	kuttMaxLimit     = 50
)

// list is GET /api/v2/links?limit=&skip=&search=: one page of the key's
// links, newest first, with how many there are. As Kutt's parseQuery, a
// limit or skip that is not a number (or 0) is its default and a limit
// above 50 is 50; below 0, linkraft takes the default too.
func (k kutt) list(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	limit, skip := phpIntval(string(args.Peek("limit"))), max(phpIntval(string(args.Peek("skip"))), 0)
	if limit < 1 {
		limit = kuttDefaultLimit
	}
	limit = min(limit, kuttMaxLimit)
	// all=true asks an admin for every user's links: linkraft lists what
	// the key sees either way.
	q := url.Values{}
	if search := string(args.Peek("search")); search != "" {
		q.Set("q", search) // Kutt searches the target, address and description
	}
	page, failed, err := listFrom(ctx, k.n, q, skip, limit)
	switch {
	case failed != nil:
		k.failNative(ctx, *failed)
		return
	case err != nil:
		failKutt(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	data := make([]kuttLink, len(page.Links))
	for i := range page.Links {
		data[i] = kuttLinkOf(&page.Links[i])
	}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(map[string]any{
		"total": page.Total, "limit": limit, "skip": skip, "data": data,
	}))
}

// find is the link of the route's {id}: a Kutt id, or a short code.
func (k kutt) find(ctx *fasthttp.RequestCtx) (Link, bool) {
	raw, _ := ctx.UserValue("id").(string)
	var a Answer
	var l Link
	if id, ok := linkIDOf(raw); ok {
		l, a = findByID(ctx, k.n, id)
	} else {
		a = k.n.Call(ctx, "GET", linkPath(raw, "", ""), nil)
		if a.OK() {
			if err := a.Decode(&l); err != nil {
				failKutt(ctx, fasthttp.StatusInternalServerError, err.Error())
				return l, false
			}
		}
	}
	if !a.OK() {
		k.failNative(ctx, a)
		return l, false
	}
	return l, true
}

// kuttUpdate is Kutt's update body.
type kuttUpdate struct {
	Target      *string `json:"target"`
	Address     *string `json:"address"`
	Description *string `json:"description"`
	ExpireIn    *string `json:"expire_in"`
	Password    *string `json:"password"`
}

// update is Kutt's edit. As Kutt's, an empty or unchanged address and an
// empty password on a link without one change nothing; a new address
// renames the link (its old code is retired for good), an empty password
// removes the link's.
func (k kutt) update(ctx *fasthttp.RequestCtx) {
	var u kuttUpdate
	if err := decodeStrict(ctx.PostBody(), &u); err != nil {
		failKutt(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	l, ok := k.find(ctx)
	if !ok {
		return
	}
	body, err := u.native(&l)
	if err != nil {
		failKutt(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	if len(body) == 0 {
		failKutt(ctx, fasthttp.StatusBadRequest, "Should at least update one field.")
		return
	}
	a := k.n.Call(ctx, "PATCH", linkPath(l.ShortCode, l.Domain, ""), body)
	if a.Status == fasthttp.StatusConflict {
		// Kutt's own words for an address in use; linkraft also counts a
		// deleted or renamed link's code as one (never reused).
		failKutt(ctx, fasthttp.StatusBadRequest, "Custom URL is already in use.")
		return
	}
	if !a.OK() {
		k.failNative(ctx, a)
		return
	}
	if err := a.Decode(&l); err != nil {
		failKutt(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	// Kutt sets updated_at with every edit; linkraft's read does not keep
	// when a link last changed, so the edit's answer says it is now.
	edited := kuttLinkOf(&l)
	edited.UpdatedAt = kuttTime(time.Now())
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(edited))
}

// kuttDescription refuses a description over Kutt's 2040 characters in
// Kutt's words, and one over linkraft's title (512 characters, 1024
// bytes) in linkraft's: a title every node keeps is not cut.
func kuttDescription(d string) error {
	switch n := utf8.RuneCountInString(d); {
	case n > kuttMaxDescription:
		return errors.New("Description length must be between 1 and 2040.")
	case n > fsm.MaxTitleLen:
		return fmt.Errorf("linkraft keeps a description of up to %d characters", fsm.MaxTitleLen)
	case len(d) > fsm.MaxTitleBytes:
		return fmt.Errorf("linkraft keeps a description of up to %d bytes in UTF-8", fsm.MaxTitleBytes)
	}
	return nil
}

// native is linkraft's edit body for the update of link l: only the
// fields that change it.
func (u *kuttUpdate) native(l *Link) (map[string]any, error) {
	body := map[string]any{}
	if u.Address != nil {
		address := strings.TrimSpace(*u.Address)
		if codes.IsReserved(address) {
			return nil, errors.New("You can't use this custom URL.")
		}
		if address != "" && address != l.ShortCode {
			body["short_code"] = address
		}
	}
	if u.Target != nil {
		body["original_url"] = *u.Target
	}
	if u.Description != nil {
		if err := kuttDescription(*u.Description); err != nil {
			return nil, err
		}
		body["title"] = *u.Description
	}
	if u.ExpireIn != nil {
		if *u.ExpireIn == "" {
			body["expires_at"] = nil
		} else {
			secs, err := expireIn(*u.ExpireIn)
			if err != nil {
				return nil, err
			}
			body["expires_at"] = nativeTime(time.Now().Add(time.Duration(secs) * time.Second))
		}
	}
	if u.Password != nil {
		switch pw := *u.Password; {
		case pw == "" && l.PasswordProtected:
			body["password"] = nil
		case strings.Trim(pw, "•") == "":
			// Kutt's form shows a set password as dots and sends them
			// back unchanged: they change nothing, nor does "" on a link
			// without a password.
		default:
			body["password"] = pw
		}
	}
	return body, nil
}

func (k kutt) remove(ctx *fasthttp.RequestCtx) {
	l, ok := k.find(ctx)
	if !ok {
		return
	}
	if a := k.n.Call(ctx, "DELETE", linkPath(l.ShortCode, l.Domain, ""), nil); !a.OK() {
		k.failNative(ctx, a)
		return
	}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(map[string]string{"message": "Link has been deleted successfully."}))
}

// kuttStat is one of Kutt's breakdowns: {name, value} per item.
type kuttStat struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// kuttPeriod is one of Kutt's stats periods (visit.queries.js): the
// visits after from, in points views of a unit each, newest last. since
// is how many whole units lie between a visit at t and now.
type kuttPeriod struct {
	name   string
	from   time.Time
	points int
	hourly bool
	since  func(t, now time.Time) int
}

// kuttPeriods are Kutt's four periods at now: 24 hours, 7 and 30 days,
// 12 months.
func kuttPeriods(now time.Time) []kuttPeriod {
	hours := func(t, now time.Time) int { return int(now.Sub(t) / time.Hour) }
	days := func(t, now time.Time) int { return int(now.Sub(t) / (24 * time.Hour)) }
	return []kuttPeriod{
		{"lastDay", now.Add(-24 * time.Hour), 24, true, hours},
		{"lastWeek", now.AddDate(0, 0, -7), 7, false, days},
		{"lastMonth", now.AddDate(0, 0, -30), 30, false, days},
		{"lastYear", now.AddDate(0, -12, 0), 12, false, wholeMonths},
	}
}

// wholeMonths is how many whole calendar months lie between t and now,
// as date-fns' differenceInMonths counts them for Kutt.
func wholeMonths(t, now time.Time) int {
	m := (now.Year()-t.Year())*12 + int(now.Month()) - int(t.Month())
	if m > 0 && now.AddDate(0, -m, 0).Before(t) {
		m--
	}
	return m
}

// views sums clicks per interval (start, clicks) into the period's
// points as Kutt does: a visit after from counts in the point of how many
// units ago it was, the last point being the latest unit.
func (p kuttPeriod) views(points []clickPoint, now time.Time) (views []uint64, total uint64) {
	views = make([]uint64, p.points)
	for _, c := range points {
		if !c.start.After(p.from) {
			continue
		}
		if i := p.points - p.since(c.start, now) - 1; i >= 0 && i < p.points {
			views[i] += c.clicks
			total += c.clicks
		}
	}
	return views, total
}

// kuttNames turns linkraft's breakdown into Kutt's: browser and os under
// Kutt's fixed names, zeros included (linkraft's chromeos is Kutt's
// other); country and referrer as Kutt stores them, lower case. Most
// visits first; Kutt's order among equals.
func kuttNames(dim string, groups []metric) []kuttStat {
	// Kutt's visits table has a column for each browser and system, in
	// this order.
	fixed := map[string][]string{
		"browser": {"chrome", "edge", "firefox", "ie", "opera", "other", "safari"},
		"os":      {"android", "ios", "linux", "macos", "other", "windows"},
	}[dim]
	items := []kuttStat{}
	for _, name := range fixed {
		items = append(items, kuttStat{Name: name})
	}
	for _, g := range groups {
		name := strings.ToLower(g.Value)
		i := slices.IndexFunc(items, func(s kuttStat) bool { return s.Name == name })
		switch {
		case i >= 0:
			items[i].Value += g.Clicks
		case fixed != nil:
			items[slices.IndexFunc(items, func(s kuttStat) bool { return s.Name == "other" })].Value += g.Clicks
		default:
			items = append(items, kuttStat{name, g.Clicks})
		}
	}
	slices.SortStableFunc(items, func(a, b kuttStat) int { return cmp.Compare(b.Value, a.Value) })
	return items
}

// nativeStats runs linkraft's stats of l for query into v.
func (k kutt) nativeStats(ctx *fasthttp.RequestCtx, l *Link, query url.Values, v any) bool {
	a := k.n.Call(ctx, "GET", linkPath(l.ShortCode, l.Domain, "/stats")+sep(l.Domain)+query.Encode(), nil)
	if !a.OK() {
		k.failNative(ctx, a)
		return false
	}
	if err := a.Decode(v); err != nil {
		failKutt(ctx, fasthttp.StatusInternalServerError, err.Error())
		return false
	}
	return true
}

// series is linkraft's clicks of l per hour or day over [from, now).
func (k kutt) series(ctx *fasthttp.RequestCtx, l *Link, interval string, from, now time.Time) ([]clickPoint, bool) {
	var out struct {
		Series []struct {
			Start  string `json:"start"`
			Clicks uint64 `json:"clicks"`
		} `json:"series"`
	}
	q := url.Values{"interval": {interval}, "from": {nativeTime(from)}, "to": {nativeTime(now)}}
	if !k.nativeStats(ctx, l, q, &out) {
		return nil, false
	}
	points := make([]clickPoint, len(out.Series))
	for i, s := range out.Series {
		points[i] = clickPoint{parseTime(&s.Start), s.Clicks}
	}
	return points, true
}

// breakdowns are Kutt's browser, os, country and referrer items of l
// since from.
func (k kutt) breakdowns(ctx *fasthttp.RequestCtx, l *Link, from, now time.Time) (map[string][]kuttStat, bool) {
	stats := map[string][]kuttStat{}
	for _, dim := range []string{"browser", "os", "country", "referrer"} {
		var out struct {
			Visits struct {
				Groups []metric `json:"groups"`
			} `json:"visits"`
		}
		q := url.Values{"group_by": {dim}, "from": {nativeTime(from)}, "to": {nativeTime(now)}}
		if !k.nativeStats(ctx, l, q, &out) {
			return nil, false
		}
		stats[dim] = kuttNames(dim, out.Visits.Groups)
	}
	return stats, true
}

// stats answers Kutt's stats (lastDay, lastWeek, lastMonth, lastYear,
// each with its views and breakdowns) from linkraft's clicks per hour
// and per day and its visitors per day. linkraft keeps them for
// fsm.ClickRetentionHours: older months of lastYear read 0, and a
// period's breakdowns count whole days.
func (k kutt) stats(ctx *fasthttp.RequestCtx) {
	l, ok := k.find(ctx)
	if !ok {
		return
	}
	now := time.Now().UTC()
	kept := now.Add(-time.Duration(fsm.ClickRetentionHours-24) * time.Hour)
	hours, ok := k.series(ctx, &l, "hour", now.Add(-24*time.Hour), now)
	if !ok {
		return
	}
	days, ok := k.series(ctx, &l, "day", kept, now)
	if !ok {
		return
	}
	body := map[string]any{}
	if err := json.Unmarshal(marshal(kuttLinkOf(&l)), &body); err != nil {
		failKutt(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	for _, p := range kuttPeriods(now) {
		points := days
		if p.hourly {
			points = hours
		}
		views, total := p.views(points, now)
		stats, ok := k.breakdowns(ctx, &l, maxTime(p.from, kept), now)
		if !ok {
			return
		}
		body[p.name] = map[string]any{"stats": stats, "views": views, "total": total}
	}
	body["updatedAt"] = kuttTime(now)
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(body))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// sep joins a query to a link path that may have ?domain= already.
func sep(domain string) string {
	if domain != "" {
		return "&"
	}
	return "?"
}

// users is the key's view as Kutt's user: linkraft has no users or
// e-mail addresses; apikey is not shown again (linkraft shows a key once).
func (k kutt) users(ctx *fasthttp.RequestCtx) {
	if a := k.n.Authenticate(ctx, false); !a.OK() {
		k.failNative(ctx, a)
		return
	}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(map[string]any{
		"apikey": "", "email": "", "domains": []any{},
	}))
}

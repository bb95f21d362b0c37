package compat

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
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
		failKutt(ctx, fasthttp.StatusBadRequest, "Custom URL is already in use. ("+a.Detail()+")")
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

func (c *kuttCreate) native(defaultDomain string) (map[string]any, error) {
	if c.Target == "" {
		return nil, fmt.Errorf("Target is missing.")
	}
	body := map[string]any{"url": c.Target}
	if c.CustomURL != "" {
		body["custom_code"] = c.CustomURL
	}
	if c.Description != "" {
		body["title"] = c.Description
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
}

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
	body := map[string]any{}
	if u.Address != nil && *u.Address != l.ShortCode {
		failKutt(ctx, fasthttp.StatusBadRequest, "linkraft does not change a link's address: its code is kept for good")
		return
	}
	if u.Target != nil {
		body["original_url"] = *u.Target
	}
	if u.Description != nil {
		body["title"] = *u.Description
	}
	if u.ExpireIn != nil {
		if *u.ExpireIn == "" {
			body["expires_at"] = nil
		} else {
			secs, err := expireIn(*u.ExpireIn)
			if err != nil {
				failKutt(ctx, fasthttp.StatusBadRequest, err.Error())
				return
			}
			body["expires_at"] = nativeTime(time.Now().Add(time.Duration(secs) * time.Second))
		}
	}
	a := k.n.Call(ctx, "PATCH", linkPath(l.ShortCode, l.Domain, ""), body)
	if !a.OK() {
		k.failNative(ctx, a)
		return
	}
	if err := a.Decode(&l); err != nil {
		failKutt(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(kuttLinkOf(&l)))
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

// stats answers Kutt's stats from linkraft's: for the last day, week,
// month and year (allTime: as far back as linkraft keeps days), the
// browser, OS, country and referrer breakdowns and the views over time.
func (k kutt) stats(ctx *fasthttp.RequestCtx) {
	l, ok := k.find(ctx)
	if !ok {
		return
	}
	now := time.Now().UTC()
	periods := []struct {
		name     string
		from     time.Time
		interval string
		points   int
	}{
		{"lastDay", now.Add(-24 * time.Hour), "hour", 24},
		{"lastWeek", now.AddDate(0, 0, -7), "day", 7},
		{"lastMonth", now.AddDate(0, 0, -30), "day", 30},
		// allTime: as far back as linkraft keeps visits.
		{"allTime", now.Add(-time.Duration(fsm.ClickRetentionHours-24) * time.Hour), "day", fsm.ClickRetentionHours/24 - 1},
	}
	out := map[string]any{}
	for _, p := range periods {
		views := make([]uint64, 0, p.points)
		q := url.Values{"interval": {p.interval}, "from": {nativeTime(p.from)}, "to": {nativeTime(now)}}
		a := k.n.Call(ctx, "GET", linkPath(l.ShortCode, l.Domain, "/stats")+sep(l.Domain)+q.Encode(), nil)
		if !a.OK() {
			k.failNative(ctx, a)
			return
		}
		var series struct {
			Series []struct {
				Clicks uint64 `json:"clicks"`
			} `json:"series"`
		}
		if err := a.Decode(&series); err != nil {
			failKutt(ctx, fasthttp.StatusInternalServerError, err.Error())
			return
		}
		var total uint64
		for _, s := range series.Series {
			views = append(views, s.Clicks)
			total += s.Clicks
		}
		stats := map[string][]kuttStat{}
		for _, dim := range []struct{ kutt, native string }{{"browser", "browser"}, {"os", "os"}, {"country", "country"}, {"referrer", "referrer"}} {
			q := url.Values{"group_by": {dim.native}, "from": {nativeTime(p.from)}, "to": {nativeTime(now)}}
			a := k.n.Call(ctx, "GET", linkPath(l.ShortCode, l.Domain, "/stats")+sep(l.Domain)+q.Encode(), nil)
			if !a.OK() {
				k.failNative(ctx, a)
				return
			}
			var groups struct {
				Visits struct {
					Groups []struct {
						Value  string `json:"value"`
						Clicks uint64 `json:"clicks"`
					} `json:"groups"`
				} `json:"visits"`
			}
			if err := a.Decode(&groups); err != nil {
				failKutt(ctx, fasthttp.StatusInternalServerError, err.Error())
				return
			}
			items := []kuttStat{}
			for _, g := range groups.Visits.Groups {
				items = append(items, kuttStat{g.Value, g.Clicks})
			}
			stats[dim.kutt] = items
		}
		out[p.name] = map[string]any{"stats": stats, "views": views, "total": total}
	}
	body := map[string]any{}
	if err := json.Unmarshal(marshal(kuttLinkOf(&l)), &body); err != nil {
		failKutt(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	for key, v := range out {
		body[key] = v
	}
	body["updatedAt"] = kuttTime(now)
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(body))
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

package compat

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// ShlinkVersion is the Shlink version linkraft answers as in
// /rest/v3/health. Shlink's web client turns features on by this version:
// 4.3.0 turns on what linkraft has (ordering by non-bot visits, hiding
// links past validUntil or maxVisits, deleting a link's visits and orphan
// visits, redirect rules with address and country conditions, lists by
// domain) and none it lacks (conditions on query parameters with any
// value or none and desktop systems, 4.5.0); from 4.0.0 on it no longer
// offers device long URLs or URL validation, which linkraft refuses.
const ShlinkVersion = "4.3.0"

// shlinkError is the type URI prefix of Shlink's problems.
const shlinkError = "https://shlink.io/api/error/"

// shlinkTime is Shlink's timestamp format (PHP's ATOM).
const shlinkTime = "2006-01-02T15:04:05-07:00"

type shlink struct{ n Native }

func registerShlink(route Route, n Native, c cors) {
	sh := shlink{n}
	for _, v := range []string{"1", "2", "3"} {
		p := "/rest/v" + v
		r := func(method, path string, h fasthttp.RequestHandler) {
			route(method, p+path, "compat_shlink", c.wrap(withRequestID(h)))
		}
		// Routes with a body check the credential before they decode it.
		withBody := func(create bool, h fasthttp.RequestHandler) fasthttp.RequestHandler {
			return credentialFirst(n, create, sh.refuse, h)
		}
		if v == "1" { // Shlink also answers its health unversioned
			route("GET", "/rest/health", "compat_shlink", c.wrap(withRequestID(sh.health)))
		}
		r("GET", "/health", sh.health)
		r("GET", "/short-urls", sh.list)
		r("POST", "/short-urls", withBody(true, sh.create))
		r("GET", "/short-urls/shorten", sh.shorten)
		r("GET", "/short-urls/{shortCode}", sh.get)
		r("PATCH", "/short-urls/{shortCode}", withBody(false, sh.edit))
		r("DELETE", "/short-urls/{shortCode}", sh.remove)
		r("GET", "/tags", sh.tags)
		r("GET", "/tags/stats", sh.tagsStats)
		r("GET", "/domains", sh.domains)
		r("GET", "/mercure-info", sh.mercure)
		r("PUT", "/tags", withBody(false, sh.renameTag))
		r("DELETE", "/tags", sh.deleteTags)
		r("PATCH", "/domains/redirects", withBody(false, sh.setDomainRedirects))
		r("GET", "/short-urls/{shortCode}/redirect-rules", sh.redirectRules)
		r("POST", "/short-urls/{shortCode}/redirect-rules", withBody(false, sh.setRedirectRules))
		registerShlinkVisits(r, sh)
	}
}

// problemShlink answers a Shlink problem document; extra adds the
// fields Shlink adds to some (shortCode, customSlug, domain).
func problemShlink(ctx *fasthttp.RequestCtx, status int, typ, title, detail string, extra map[string]any) {
	doc := map[string]any{"type": typ, "title": title, "detail": detail, "status": status}
	for k, v := range extra {
		doc[k] = v
	}
	writeBody(ctx, status, "application/problem+json", marshal(doc))
}

// invalidShlink is Shlink's answer to invalid data: "Provided data is
// not valid", naming the invalid fields.
func invalidShlink(ctx *fasthttp.RequestCtx, fields ...string) {
	if fields == nil {
		fields = []string{}
	}
	problemShlink(ctx, fasthttp.StatusBadRequest, shlinkError+"invalid-data", "Invalid data", "Provided data is not valid",
		map[string]any{"invalidElements": fields})
}

// refuseShlink answers a field Shlink takes and linkraft cannot honour:
// Shlink's invalid data naming it, with linkraft's reason as the detail.
func refuseShlink(ctx *fasthttp.RequestCtx, field, reason string) {
	fields := []string{}
	if field != "" {
		fields = append(fields, field)
	}
	problemShlink(ctx, fasthttp.StatusBadRequest, shlinkError+"invalid-data", "Invalid data", reason,
		map[string]any{"invalidElements": fields})
}

// invalidFields is Shlink's invalid data: the names of every invalid
// field of a request.
type invalidFields []string

func (f invalidFields) Error() string { return "invalid: " + strings.Join(f, ", ") }

// orNil is f as an error: nil when no field is invalid.
func (f invalidFields) orNil() error {
	if len(f) == 0 {
		return nil
	}
	return f
}

// failInvalid answers err as Shlink's invalid-data naming the fields of
// an invalidFields, or the field a refusal names.
func failInvalid(ctx *fasthttp.RequestCtx, err error) {
	var f invalidFields
	var r refusal
	switch {
	case errors.As(err, &f):
		invalidShlink(ctx, f...)
	case errors.As(err, &r):
		refuseShlink(ctx, r.field, r.reason)
	default:
		invalidShlink(ctx)
	}
}

// refusal is a field Shlink takes and linkraft cannot honour, and why.
type refusal struct{ field, reason string }

func (r refusal) Error() string { return r.reason }

// phpArray is the values of the array parameter name in each of the forms
// Shlink (PHP) reads: name[]=a, name[0]=a (http_build_query, Guzzle) and
// name=a, in the order they come.
func phpArray(args *fasthttp.Args, name string) []string {
	var out []string
	args.VisitAll(func(k, v []byte) {
		key, ok := strings.CutPrefix(string(k), name)
		if !ok {
			return
		}
		if key != "" {
			index, ok := strings.CutPrefix(key, "[")
			if index, ok = strings.CutSuffix(index, "]"); !ok || strings.Trim(index, "0123456789") != "" {
				return
			}
		}
		out = append(out, string(v))
	})
	return out
}

// refuse answers a refused credential as Shlink does.
func (shlink) refuse(ctx *fasthttp.RequestCtx, a Answer) { failShlink(ctx, a, "", "") }

// failShlink answers a native error answer as Shlink would: its
// authentication problems, not found, a taken slug, invalid data, and
// linkraft's own status (rate limits, no leader) otherwise.
func failShlink(ctx *fasthttp.RequestCtx, a Answer, code, domain string) {
	switch a.Status {
	case fasthttp.StatusUnauthorized:
		switch {
		case ctx.UserValue(shortenKey) != nil && len(ctx.Request.Header.Peek("X-Api-Key")) == 0:
			problemShlink(ctx, a.Status, shlinkError+"missing-authentication", "Invalid authorization",
				`Expected authentication to be provided in "apiKey" query param`, nil)
		case len(ctx.Request.Header.Peek("X-Api-Key")) == 0 && len(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)) == 0:
			problemShlink(ctx, a.Status, shlinkError+"missing-authentication", "Invalid authorization",
				"Expected one of the following authentication headers, [\"X-Api-Key\"], but none were provided", nil)
		default:
			problemShlink(ctx, a.Status, shlinkError+"invalid-api-key", "Invalid API key",
				"Provided API key does not exist or is invalid.", nil)
		}
	case fasthttp.StatusNotFound, fasthttp.StatusGone:
		extra := map[string]any{"shortCode": code}
		if domain != "" {
			extra["domain"] = domain
		}
		detail := fmt.Sprintf("No URL found with short code %q", code)
		if domain != "" {
			detail += fmt.Sprintf(" for domain %q", domain)
		}
		if a.Status == fasthttp.StatusGone {
			detail += " (it has expired)"
		}
		problemShlink(ctx, fasthttp.StatusNotFound, shlinkError+"short-url-not-found", "Short URL not found", detail, extra)
	case fasthttp.StatusConflict:
		extra := map[string]any{"customSlug": code}
		if domain != "" {
			extra["domain"] = domain
		}
		problemShlink(ctx, fasthttp.StatusBadRequest, shlinkError+"non-unique-slug", "Invalid custom slug",
			conflictDetail(code, domain), extra)
	case fasthttp.StatusBadRequest, fasthttp.StatusRequestEntityTooLarge, fasthttp.StatusUnsupportedMediaType:
		if field, ok := shlinkFieldOf(a.Detail()); ok {
			invalidShlink(ctx, field)
		} else {
			invalidShlink(ctx)
		}
	default:
		problemShlink(ctx, a.Status, "about:blank", fasthttp.StatusMessage(a.Status), a.Detail(), nil)
	}
	a.PassHeaders(ctx)
}

// shlinkShortURL is Shlink's ShortUrl.
type shlinkShortURL struct {
	ShortCode        string       `json:"shortCode"`
	ShortURL         string       `json:"shortUrl"`
	LongURL          string       `json:"longUrl"`
	DateCreated      string       `json:"dateCreated"`
	VisitsSummary    shlinkVisits `json:"visitsSummary"`
	Tags             []string     `json:"tags"`
	Meta             shlinkMeta   `json:"meta"`
	Domain           *string      `json:"domain"`
	Title            *string      `json:"title"`
	Crawlable        bool         `json:"crawlable"`
	ForwardQuery     bool         `json:"forwardQuery"`
	HasRedirectRules bool         `json:"hasRedirectRules"`
}

type shlinkVisits struct {
	Total   uint64 `json:"total"`
	NonBots uint64 `json:"nonBots"`
	Bots    uint64 `json:"bots"`
}

type shlinkMeta struct {
	ValidSince *string `json:"validSince"`
	ValidUntil *string `json:"validUntil"`
	MaxVisits  *uint64 `json:"maxVisits"`
}

func shlinkTimeOf(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(shlinkTime)
	return &s
}

// shortURLOf is a linkraft link as Shlink shows it. linkraft's clicks
// leave bots out and its read does not count them: total and nonBots are
// the clicks, bots 0 (docs/COMPATIBILITY.md).
func shortURLOf(l *Link) shlinkShortURL {
	s := shlinkShortURL{
		ShortCode: l.ShortCode, ShortURL: l.ShortURL, LongURL: l.OriginalURL,
		DateCreated:   *shlinkTimeOf(l.Created()),
		VisitsSummary: shlinkVisits{Total: l.ClickCount, NonBots: l.ClickCount},
		Tags:          l.Tags,
		Meta:          shlinkMeta{ValidSince: shlinkTimeOf(l.Since()), ValidUntil: shlinkTimeOf(l.Expires()), MaxVisits: l.MaxVisits},
		ForwardQuery:  l.ForwardQuery, HasRedirectRules: len(l.Rules) > 0, Crawlable: l.Crawlable,
	}
	if s.Tags == nil {
		s.Tags = []string{}
	}
	if l.Domain != "" {
		s.Domain = &l.Domain
	}
	if l.Title != "" {
		s.Title = &l.Title
	}
	return s
}

func (sh shlink) health(ctx *fasthttp.RequestCtx) {
	a := sh.n.Call(ctx, "GET", "/health", nil)
	status := "pass"
	if !a.OK() {
		status = "fail"
	}
	body := marshal(map[string]any{
		"status": status, "version": ShlinkVersion,
		"links": map[string]string{"about": "https://shlink.io", "project": "https://github.com/shlinkio/shlink"},
	})
	writeBody(ctx, a.Status, "application/health+json", body)
}

func (sh shlink) mercure(ctx *fasthttp.RequestCtx) {
	problemShlink(ctx, fasthttp.StatusNotImplemented, shlinkError+"mercure-not-configured", "Mercure not configured",
		"This Shlink instance is not integrated with a mercure hub.", nil)
}

func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the body is not the JSON object this API takes: %w", err)
	}
	return nil
}

// codeAndDomain are the short code of a Shlink route and its ?domain=;
// the default domain named by its authority is the default domain.
func (sh shlink) codeAndDomain(ctx *fasthttp.RequestCtx) (string, string) {
	code, _ := ctx.UserValue("shortCode").(string)
	// The router hands the segment as sent: a code in another script
	// comes percent-encoded, and no code holds a '%'.
	if decoded, err := url.PathUnescape(code); err == nil {
		code = decoded
	}
	domain := string(ctx.QueryArgs().Peek("domain"))
	if strings.EqualFold(domain, sh.n.DefaultDomain(ctx)) {
		domain = ""
	}
	return code, domain
}

func (sh shlink) get(ctx *fasthttp.RequestCtx) {
	code, domain := sh.codeAndDomain(ctx)
	a := sh.n.Call(ctx, "GET", linkPath(code, domain, ""), nil)
	if a.Status == fasthttp.StatusGone {
		// linkraft's read answers an expired link 410; Shlink shows a
		// disabled link as any other, and so does linkraft's list.
		if l, ok := sh.listedLink(ctx, code, domain); ok {
			writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(shortURLOf(&l)))
			return
		}
	}
	sh.writeLink(ctx, a, code, domain)
}

// listedLink finds the link of code on domain in linkraft's list, which
// holds expired links too.
func (sh shlink) listedLink(ctx *fasthttp.RequestCtx, code, domain string) (Link, bool) {
	q := url.Values{"q": {code}, "domain": {domain}, "limit": {"1000"}}
	a := sh.n.Call(ctx, "GET", "/api/v1/urls?"+q.Encode(), nil)
	var page struct {
		Links []Link `json:"links"`
	}
	if !a.OK() || a.Decode(&page) != nil {
		return Link{}, false
	}
	i := slices.IndexFunc(page.Links, func(l Link) bool { return l.ShortCode == code })
	if i < 0 {
		return Link{}, false
	}
	return page.Links[i], true
}

func (sh shlink) writeLink(ctx *fasthttp.RequestCtx, a Answer, code, domain string) {
	if l, ok := linkOfShlink(ctx, a, code, domain); ok {
		writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(shortURLOf(&l)))
	}
}

// linkOfShlink reads the link a native call answered; false once it has
// answered the client Shlink's problem for a refusal or a bad answer.
func linkOfShlink(ctx *fasthttp.RequestCtx, a Answer, code, domain string) (Link, bool) {
	var l Link
	if !a.OK() {
		failShlink(ctx, a, code, domain)
		return l, false
	}
	if err := a.Decode(&l); err != nil {
		problemShlink(ctx, fasthttp.StatusInternalServerError, "about:blank", "Internal error", err.Error(), nil)
		return l, false
	}
	return l, true
}

// shlinkEditFields maps Shlink's edit fields to linkraft's; null clears.
var shlinkEditFields = map[string]string{
	"longUrl": "original_url", "title": "title", "tags": "tags", "validSince": "valid_since",
	"validUntil": "expires_at", "maxVisits": "max_visits", "forwardQuery": "forward_query", "crawlable": "crawlable",
}

// nativeEdit is linkraft's edit body for a Shlink edit body; pastOK is
// asked whether a past validUntil is taken (Native's AllowPastExpiry)
// when the body sets one, past here or not: a date that passes before
// the leader reads the edit is taken too.
func nativeEdit(raw []byte, pastOK func() bool) (map[string]json.RawMessage, error) {
	var in map[string]json.RawMessage
	if err := decodeShlink(raw, &in); err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	for k, v := range in {
		if k == "validateUrl" || k == "deviceLongUrls" {
			if err := ignoredEditField(k, v); err != nil {
				return nil, err
			}
			continue
		}
		field, ok := shlinkEditFields[k]
		if !ok {
			return nil, invalidFields{k} // a field Shlink's edit does not have
		}
		native, err := shlinkEditValue(k, v, pastOK)
		if err != nil {
			return nil, err
		}
		out[field] = native
	}
	return out, nil
}

// ignoredEditField refuses a Shlink edit field that changes nothing here
// unless it is empty: validateUrl (Shlink 3 ignores it too) never, and
// deviceLongUrls when it names a URL.
func ignoredEditField(k string, v json.RawMessage) error {
	if k == "validateUrl" {
		return nil
	}
	var d map[string]*string
	if json.Unmarshal(v, &d) == nil && !slices.ContainsFunc([]*string{d["android"], d["ios"], d["desktop"]},
		func(s *string) bool { return s != nil && *s != "" }) {
		return nil
	}
	return refusal{"deviceLongUrls", "deviceLongUrls are not supported by this API: set linkraft rules with a device condition instead"}
}

// isNull reports whether a JSON value is null.
func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

// shlinkEditValue is linkraft's value of Shlink edit field k; null
// clears (linkraft clears a title with "", tags with [], and crawlable
// is false).
func shlinkEditValue(k string, v json.RawMessage, pastOK func() bool) (json.RawMessage, error) {
	if isNull(v) {
		switch k {
		case "crawlable":
			return json.RawMessage("false"), nil
		case "title":
			return json.RawMessage(`""`), nil
		case "tags":
			return json.RawMessage(`[]`), nil
		}
		return v, nil
	}
	switch k {
	case "validSince", "validUntil":
		return shlinkEditTime(k, v, pastOK)
	case "maxVisits":
		var n uint64
		if err := json.Unmarshal(v, &n); err != nil || n == 0 {
			return nil, invalidFields{k} // a whole number of at least 1, or null
		}
	case "tags":
		var tags []string
		if err := json.Unmarshal(v, &tags); err != nil {
			return nil, invalidFields{k}
		}
		return json.Marshal(shlinkTags(tags))
	case "title":
		var t string
		if err := json.Unmarshal(v, &t); err != nil {
			return nil, invalidFields{k}
		}
		return json.Marshal(shlinkTitle(t))
	}
	return v, nil
}

// shlinkEditTime is linkraft's time for Shlink's validSince or
// validUntil: an ISO 8601 date such as 2030-01-02T15:04:05+00:00; a
// validUntil already past disables the link, or is refused
// (errPastValidUntil) unless pastOK.
func shlinkEditTime(k string, v json.RawMessage, pastOK func() bool) (json.RawMessage, error) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, invalidFields{k}
	}
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, invalidFields{k}
	}
	if k == "validUntil" {
		if allowed := pastOK(); !allowed && !at.After(time.Now()) {
			return nil, errPastValidUntil
		}
	}
	return json.Marshal(nativeTime(at))
}

func (sh shlink) edit(ctx *fasthttp.RequestCtx) {
	code, domain := sh.codeAndDomain(ctx)
	body, err := nativeEdit(ctx.PostBody(), func() bool { return sh.n.AllowPastExpiry(ctx) })
	if err != nil {
		failBody(ctx, err)
		return
	}
	if len(body) == 0 { // Shlink answers an edit of nothing with the link
		sh.writeLink(ctx, sh.n.Call(ctx, "GET", linkPath(code, domain, ""), nil), code, domain)
		return
	}
	a := sh.n.Call(ctx, "PATCH", linkPath(code, domain, ""), body)
	sh.writeLink(ctx, a, code, domain)
}

func (sh shlink) remove(ctx *fasthttp.RequestCtx) {
	code, domain := sh.codeAndDomain(ctx)
	a := sh.n.Call(ctx, "DELETE", linkPath(code, domain, ""), nil)
	if !a.OK() {
		failShlink(ctx, a, code, domain)
		return
	}
	ctx.Response.Reset()
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// shlinkListQuery is a Shlink list's query, read.
type shlinkListQuery struct {
	native          url.Values // what linkraft's list filters itself
	search          string     // lowercase
	defaultDomain   string
	tags, notTags   []string
	allTags, allNot bool
	from, to        time.Time
	excludeMax      bool
	excludePast     bool
	orderBy         string
	desc            bool
	page, perPage   int
	keyName         string // apiKeyName: only the links of the key of this name
}

// parseShlinkList reads a list's query. Arrays come as tags[]=a&tags[]=b
// (the client's spelling), tags[0]=a (PHP's) or tags=a. Its error is the
// invalidFields of every invalid parameter.
func parseShlinkList(args *fasthttp.Args, defaultDomain string) (shlinkListQuery, error) {
	q := shlinkListQuery{native: url.Values{}, page: 1, perPage: 10, defaultDomain: defaultDomain,
		search: strings.ToLower(string(args.Peek("searchTerm")))}
	var bad invalidFields
	q.readTags(args, &bad)
	if args.Has("domain") {
		d := string(args.Peek("domain"))
		if d == "DEFAULT" || strings.EqualFold(d, defaultDomain) {
			d = ""
		}
		q.native.Set("domain", d)
	}
	q.keyName = string(args.Peek("apiKeyName"))
	q.readDates(args, &bad)
	q.excludeMax = string(args.Peek("excludeMaxVisitsReached")) == "true"
	q.excludePast = string(args.Peek("excludePastValidUntil")) == "true"
	if err := q.readOrder(string(args.Peek("orderBy"))); err != nil {
		bad = append(bad, "orderBy")
	}
	q.readPage(args, &bad)
	// Shlink names the invalid parameters in the order its ShortUrlsParams
	// declares them (ListShortUrlsTest::errorIsReturnedWhenProvidingInvalidValues
	// expects ["orderBy", "tagsMode"]).
	const order = " page itemsPerPage tags orderBy startDate endDate tagsMode excludeTags excludeTagsMode "
	slices.SortStableFunc(bad, func(a, b string) int {
		return strings.Index(order, " "+a+" ") - strings.Index(order, " "+b+" ")
	})
	return q, bad.orNil()
}

// readTags reads the tags a list keeps and leaves out, and whether a link
// needs all of them or any.
func (q *shlinkListQuery) readTags(args *fasthttp.Args, bad *invalidFields) {
	q.tags, q.notTags = phpArray(args, "tags"), phpArray(args, "excludeTags")
	for _, m := range []struct {
		name string
		all  *bool
	}{{"tagsMode", &q.allTags}, {"excludeTagsMode", &q.allNot}} {
		switch v := string(args.Peek(m.name)); v {
		case "", "any":
		case "all":
			*m.all = true
		default:
			*bad = append(*bad, m.name) // any or all
		}
	}
	if len(q.tags) == 1 { // linkraft's list filters one tag itself
		q.native.Set("tag", q.tags[0])
	}
}

// readDates reads the span a list's links were created in.
func (q *shlinkListQuery) readDates(args *fasthttp.Args, bad *invalidFields) {
	for _, t := range []struct {
		name string
		at   *time.Time
	}{{"startDate", &q.from}, {"endDate", &q.to}} {
		if v := args.Peek(t.name); len(v) > 0 {
			at, err := time.Parse(time.RFC3339, string(v))
			if err != nil {
				*bad = append(*bad, t.name) // an ISO 8601 date such as 2030-01-02T15:04:05+00:00
				continue
			}
			*t.at = at
		}
	}
}

// readOrder reads orderBy: a field, then -ASC or -DESC.
func (q *shlinkListQuery) readOrder(o string) error {
	if o == "" {
		return nil
	}
	field, dir, _ := strings.Cut(o, "-")
	switch field {
	case "longUrl", "shortCode", "dateCreated", "title", "visits", "nonBotVisits":
	default:
		return fmt.Errorf("orderBy %q: use longUrl, shortCode, dateCreated, title, visits or nonBotVisits with -ASC or -DESC", o)
	}
	switch strings.ToUpper(dir) {
	case "", "ASC":
	case "DESC":
		q.desc = true
	default:
		return fmt.Errorf("orderBy %q: the direction is ASC or DESC", o)
	}
	q.orderBy = field
	return nil
}

// readPage reads the page asked for and its size (-1: every link).
func (q *shlinkListQuery) readPage(args *fasthttp.Args, bad *invalidFields) {
	for _, p := range []struct {
		name string
		to   *int
		min  int
	}{{"page", &q.page, 1}, {"itemsPerPage", &q.perPage, -1}} {
		if v := args.Peek(p.name); len(v) > 0 {
			n, err := strconv.Atoi(string(v))
			if err != nil || n < p.min || n == 0 {
				*bad = append(*bad, p.name) // a whole number of at least 1 (itemsPerPage: or -1)
				continue
			}
			*p.to = n
		}
	}
}

// keeps is what linkraft's list cannot filter itself.
func (q *shlinkListQuery) keeps(l *Link, now time.Time) bool {
	has := func(tag string) bool {
		return slices.ContainsFunc(l.Tags, func(t string) bool { return strings.EqualFold(t, tag) })
	}
	match := func(tags []string, all bool) bool {
		if all {
			return !slices.ContainsFunc(tags, func(t string) bool { return !has(t) })
		}
		return slices.ContainsFunc(tags, has)
	}
	created := l.Created()
	switch {
	case q.search != "" && !q.found(l):
		return false
	case len(q.tags) > 1 && !match(q.tags, q.allTags):
		return false
	case len(q.notTags) > 0 && match(q.notTags, q.allNot):
		return false
	case !q.from.IsZero() && created.Before(q.from), !q.to.IsZero() && created.After(q.to):
		return false
	case q.excludeMax && l.MaxVisits != nil && l.ClickCount >= *l.MaxVisits:
		return false
	case q.excludePast && !l.Expires().IsZero() && !l.Expires().After(now):
		return false
	}
	return true
}

// found reports whether the list's searchTerm is part of the link's long
// URL, code, title, domain (the default domain's name for its links) or
// one of its tags, as Shlink searches.
func (q *shlinkListQuery) found(l *Link) bool {
	domain := cmp.Or(l.Domain, q.defaultDomain)
	for _, s := range append([]string{l.OriginalURL, l.ShortCode, l.Title, domain}, l.Tags...) {
		if strings.Contains(strings.ToLower(s), q.search) {
			return true
		}
	}
	return false
}

// sort orders links as orderBy asks; linkraft's newest first otherwise.
func (q *shlinkListQuery) sort(links []Link) {
	if q.orderBy == "" {
		return
	}
	key := func(a, b *Link) int {
		switch q.orderBy {
		case "longUrl":
			return cmp.Compare(a.OriginalURL, b.OriginalURL)
		case "shortCode":
			return cmp.Compare(a.ShortCode, b.ShortCode)
		case "title":
			return cmp.Compare(a.Title, b.Title)
		case "visits", "nonBotVisits":
			return cmp.Compare(a.ClickCount, b.ClickCount)
		}
		return cmp.Compare(a.ID, b.ID) // ids grow with creation
	}
	slices.SortStableFunc(links, func(a, b Link) int {
		c := key(&a, &b)
		if q.desc {
			c = -c
		}
		// Ties in the order they were made, as Shlink's list.
		return cmp.Or(c, cmp.Compare(a.ID, b.ID))
	})
}

// byNative reports whether linkraft's list filters and orders q itself,
// so that a page is read from an offset, its total from linkraft's
// counts: no search (Shlink's also matches domains and tags, linkraft's
// q does not), no tag list in all mode or excluded tags, no dates or
// hiding of exhausted or expired links, and an order by creation or
// visits.
func (q *shlinkListQuery) byNative() bool {
	switch q.orderBy {
	case "", "dateCreated", "visits", "nonBotVisits":
	default:
		return false
	}
	return q.search == "" && len(q.tags) <= 1 && len(q.notTags) == 0 && q.from.IsZero() && q.to.IsZero() &&
		!q.excludeMax && !q.excludePast
}

func (sh shlink) list(ctx *fasthttp.RequestCtx) {
	q, err := parseShlinkList(ctx.QueryArgs(), sh.n.DefaultDomain(ctx))
	if err != nil {
		failInvalid(ctx, err)
		return
	}
	none, failed := sh.readKeyName(ctx, &q)
	switch {
	case failed != nil:
		failShlink(ctx, *failed, "", "")
		return
	case none:
		writeShlinkList(ctx, &q, nil, 0, max(q.perPage, 1))
		return
	}
	read := sh.listScanned
	if q.byNative() {
		read = sh.listByOffset
	}
	data, total, perPage, failed, err := read(ctx, &q)
	switch {
	case failed != nil:
		failShlink(ctx, *failed, "", "")
		return
	case err != nil:
		refuseShlink(ctx, "", err.Error())
		return
	}
	writeShlinkList(ctx, &q, data, total, perPage)
}

// writeShlinkList answers a page of a list: {shortUrls:{data,pagination}}.
func writeShlinkList(ctx *fasthttp.RequestCtx, q *shlinkListQuery, data []shlinkShortURL, total, perPage int) {
	if data == nil {
		data = []shlinkShortURL{}
	}
	pages := (total + perPage - 1) / perPage
	body := map[string]any{"shortUrls": map[string]any{
		"data": data,
		"pagination": map[string]int{
			"currentPage": q.page, "pagesCount": pages, "itemsPerPage": perPage,
			"itemsInCurrentPage": len(data), "totalItems": total,
		},
	}}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(body))
}

// pageStart is the offset of q's page of perPage links, capped past
// any list's end (a page number can be larger than links could fill).
func (q *shlinkListQuery) pageStart(perPage int) int {
	if q.page-1 > maxNativeOffset/perPage {
		return maxNativeOffset
	}
	return (q.page - 1) * perPage
}

// listByOffset reads q's page from linkraft's list at its offset, and the
// total from linkraft's counts: what q.byNative allows.
func (sh shlink) listByOffset(ctx *fasthttp.RequestCtx, q *shlinkListQuery) ([]shlinkShortURL, int, int, *Answer, error) {
	perPage := q.perPage
	if perPage < 0 { // -1: every item on one page
		all, failed, err := listFrom(ctx, sh.n, q.native, 0, 0)
		if failed != nil || err != nil {
			return nil, 0, 0, failed, err
		}
		if all.Total > maxScanPages*maxListPage {
			return nil, 0, 0, nil, errTooManyLinks
		}
		perPage = max(all.Total, 1)
	}
	query := url.Values{}
	for k, v := range q.native {
		query[k] = v
	}
	if q.orderBy == "visits" || q.orderBy == "nonBotVisits" {
		query.Set("sort", "clicks") // linkraft counts no bots' clicks
	}
	read := listFrom // newest (most visited) first
	if q.orderBy != "" && !q.desc {
		read = listFromEnd
	}
	page, failed, err := read(ctx, sh.n, query, q.pageStart(perPage), perPage)
	if failed != nil || err != nil {
		return nil, 0, 0, failed, err
	}
	data := make([]shlinkShortURL, len(page.Links))
	for i := range page.Links {
		data[i] = shortURLOf(&page.Links[i])
	}
	return data, page.Total, perPage, nil, nil
}

// listScanned reads every link linkraft's list gives for q, then filters,
// orders and pages them here: for what linkraft's list cannot filter or
// order itself (see byNative), up to maxScanPages pages.
func (sh shlink) listScanned(ctx *fasthttp.RequestCtx, q *shlinkListQuery) ([]shlinkShortURL, int, int, *Answer, error) {
	links, failed, err := scan(ctx, sh.n, q.native)
	if failed != nil || err != nil {
		return nil, 0, 0, failed, err
	}
	now := time.Now()
	kept := links[:0]
	for i := range links {
		if q.keeps(&links[i], now) {
			kept = append(kept, links[i])
		}
	}
	q.sort(kept)
	total := len(kept)
	perPage := q.perPage
	if perPage < 0 { // -1: every item on one page
		perPage = max(total, 1)
	}
	start := min(q.pageStart(perPage), total)
	end := min(start+perPage, total)
	data := make([]shlinkShortURL, 0, end-start)
	for i := start; i < end; i++ {
		data = append(data, shortURLOf(&kept[i]))
	}
	return data, total, perPage, nil, nil
}

// nativeTag is one tag of linkraft's tag list.
type nativeTag struct {
	Tag    string `json:"tag"`
	Links  int    `json:"links"`
	Clicks uint64 `json:"clicks"`
}

func (sh shlink) nativeTags(ctx *fasthttp.RequestCtx) ([]nativeTag, bool) {
	a := sh.n.Call(ctx, "GET", "/api/v1/tags", nil)
	if !a.OK() {
		failShlink(ctx, a, "", "")
		return nil, false
	}
	var body struct {
		Tags []nativeTag `json:"tags"`
	}
	if err := a.Decode(&body); err != nil {
		problemShlink(ctx, fasthttp.StatusInternalServerError, "about:blank", "Internal error", err.Error(), nil)
		return nil, false
	}
	return body.Tags, true
}

// page is one page of a list Shlink paginates.
type page struct {
	number, perPage, total int
	start, end             int // the indexes of its items
}

// paginate is page number of total items, perPage a page (-1: every
// item on one page, which Shlink reports as a page the size of the list).
func paginate(total, number, perPage int) page {
	if perPage < 0 {
		perPage = max(total, 1)
	}
	p := page{number: number, perPage: perPage, total: total}
	p.start = min((number-1)*perPage, total)
	p.end = min(p.start+perPage, total)
	return p
}

// shlink is the page's pagination object.
func (p page) shlink() map[string]int {
	return map[string]int{
		"currentPage": p.number, "pagesCount": (p.total + p.perPage - 1) / p.perPage, "itemsPerPage": p.perPage,
		"itemsInCurrentPage": p.end - p.start, "totalItems": p.total,
	}
}

// shlinkTagsQuery is a tag list's query, read as Shlink's TagsParams
// reads it: a page below 1 is the first, an itemsPerPage below 0 (or
// none) lists every tag, an unknown orderBy field orders by tag.
type shlinkTagsQuery struct {
	search        string
	orderBy       string
	desc          bool
	page, perPage int
}

func parseShlinkTags(args *fasthttp.Args) (shlinkTagsQuery, error) {
	q := shlinkTagsQuery{search: string(args.Peek("searchTerm")), orderBy: "tag", page: 1, perPage: -1}
	if v := args.Peek("page"); len(v) > 0 {
		if n, err := strconv.Atoi(string(v)); err == nil && n > 0 {
			q.page = n
		}
	}
	if v := args.Peek("itemsPerPage"); len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil || n == 0 {
			return q, invalidFields{"itemsPerPage"} // a page holds at least one tag
		}
		q.perPage = max(n, -1)
	}
	field, dir, _ := strings.Cut(string(args.Peek("orderBy")), "-")
	switch field {
	case "shortUrlsCount", "visits", "nonBotVisits":
		q.orderBy = field
	}
	q.desc = strings.EqualFold(dir, "DESC")
	return q, nil
}

// keep is the tags the query lists, in its order.
func (q shlinkTagsQuery) keep(tags []nativeTag) []nativeTag {
	kept := make([]nativeTag, 0, len(tags))
	for _, t := range tags {
		if q.search == "" || strings.Contains(strings.ToLower(t.Tag), strings.ToLower(q.search)) {
			kept = append(kept, t)
		}
	}
	slices.SortStableFunc(kept, func(a, b nativeTag) int {
		var c int
		switch q.orderBy {
		case "shortUrlsCount":
			c = cmp.Compare(a.Links, b.Links)
		case "visits", "nonBotVisits":
			c = cmp.Compare(a.Clicks, b.Clicks)
		}
		if c == 0 {
			c = cmp.Compare(a.Tag, b.Tag)
		}
		if q.desc {
			return -c
		}
		return c
	})
	return kept
}

// listTags answers the page of tags the query asks for, each as show
// makes it.
func listTags[T any](ctx *fasthttp.RequestCtx, sh shlink, show func(nativeTag) T) {
	q, err := parseShlinkTags(ctx.QueryArgs())
	if err != nil {
		failInvalid(ctx, err)
		return
	}
	tags, ok := sh.nativeTags(ctx)
	if !ok {
		return
	}
	kept := q.keep(tags)
	pg := paginate(len(kept), q.page, q.perPage)
	data := make([]T, 0, pg.end-pg.start)
	for _, t := range kept[pg.start:pg.end] {
		data = append(data, show(t))
	}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(map[string]any{"tags": map[string]any{"data": data, "pagination": pg.shlink()}}))
}

// tagStat is Shlink's TagInfo.
type tagStat struct {
	Tag            string       `json:"tag"`
	ShortURLsCount int          `json:"shortUrlsCount"`
	VisitsSummary  shlinkVisits `json:"visitsSummary"`
}

func (sh shlink) tags(ctx *fasthttp.RequestCtx) {
	listTags(ctx, sh, func(t nativeTag) string { return t.Tag })
}

func (sh shlink) tagsStats(ctx *fasthttp.RequestCtx) {
	listTags(ctx, sh, func(t nativeTag) tagStat {
		return tagStat{t.Tag, t.Links, shlinkVisits{Total: t.Clicks, NonBots: t.Clicks}}
	})
}

// readKeyName turns a list's apiKeyName into linkraft's created_by, as
// Shlink 4.6 honours it (ShortUrlsCountFiltering): for the request's own
// key, or any key for an admin key; another key's name is ignored, the
// list still limited as the key is. none: no key has that name, so no
// link is listed (Shlink test-api ListShortUrlsTest, apiKeyName 'invalid').
func (sh shlink) readKeyName(ctx *fasthttp.RequestCtx, q *shlinkListQuery) (none bool, failed *Answer) {
	if q.keyName == "" {
		return false, nil
	}
	own, a := sh.ownKey(ctx)
	if !a.OK() {
		return false, &a
	}
	switch {
	case own.Name == q.keyName:
		q.native.Set("created_by", own.ID)
		return false, nil
	case !slices.Contains(own.Scopes, "admin"):
		return false, nil
	}
	var keys struct {
		Keys []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"keys"`
	}
	if a = sh.n.Call(ctx, "GET", "/admin/keys", nil); !a.OK() {
		return false, &a
	}
	if err := a.Decode(&keys); err != nil {
		return false, &Answer{Status: fasthttp.StatusInternalServerError, Body: []byte(err.Error())}
	}
	// Shlink's key names are unique; linkraft's need not be: the first
	// key of the name by id is taken.
	for _, k := range keys.Keys {
		if k.Name == q.keyName {
			q.native.Set("created_by", k.ID)
			return false, nil
		}
	}
	return true, nil
}

package compat

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

// bitlyPrefix is where Bitly's API v4 lives.
const bitlyPrefix = "/v4/"

// bitlyDomain is Bitly's own short domain. Bitly's clients name it in
// every create and the npm client (bitly 7.1.2) rewrites every id it is
// given to bit.ly/<hash>, so here it means linkraft's default domain.
const bitlyDomain = "bit.ly"

// bitlyTime is Bitly's timestamp: ISO 8601 with a +0000 offset.
const bitlyTime = "2006-01-02T15:04:05-0700"

func registerBitly(route Route, n Native, c cors) {
	b := bitly{n}
	r := func(method, path string, h fasthttp.RequestHandler) {
		route(method, "/v4"+path, "compat_bitly", c.wrap(b.authorized(h)))
	}
	r("POST", "/shorten", credentialFirst(n, true, b.failNative, b.shorten))
	r("POST", "/expand", credentialFirst(n, false, b.failNative, b.expand))
	r("POST", "/bitlinks", credentialFirst(n, true, b.failNative, b.create))
	// A bitlink id is domain/hash, sent in the path as it is: one route
	// takes the id and what follows it (clicks, referrers, …).
	r("GET", "/bitlinks/{bitlink:*}", b.read)
	r("PATCH", "/bitlinks/{bitlink:*}", credentialFirst(n, false, b.failNative, b.update))
	r("DELETE", "/bitlinks/{bitlink:*}", b.remove)
	r("GET", "/user", b.user)
	r("GET", "/groups", b.groups)
	r("GET", "/groups/{guid}", b.group)
	r("GET", "/groups/{guid}/bitlinks", b.listGroup)
	// The rest of Bitly's API (groups, users, campaigns, QR codes, …) is
	// refused in Bitly's error shape rather than with the router's plain
	// 404 or 405, which a Bitly client cannot read.
	for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		route(method, "/v4/{path:*}", "compat_bitly", c.wrap(b.unsupported))
	}
}

type bitly struct{ n Native }

// bitlyError is Bitly's error body.
type bitlyError struct {
	Message     string            `json:"message"`
	Resource    string            `json:"resource"`
	Description string            `json:"description"`
	Errors      []bitlyFieldError `json:"errors"`
}

// bitlyFieldError names the field a 400 is about.
type bitlyFieldError struct {
	Field     string `json:"field"`
	Message   string `json:"message"`
	ErrorCode string `json:"error_code"`
}

// failBitly answers Bitly's error body. message is Bitly's upper-case
// code (NOT_FOUND, FORBIDDEN, INVALID_ARG_LONG_URL, …).
func failBitly(ctx *fasthttp.RequestCtx, status int, message, description string, errs ...bitlyFieldError) {
	if errs == nil {
		errs = []bitlyFieldError{}
	}
	writeBody(ctx, status, "application/json", marshal(bitlyError{
		Message: message, Resource: "bitlinks", Description: description, Errors: errs,
	}))
}

// invalidArg is Bitly's 400 for one field: INVALID_ARG_<FIELD>.
func invalidArg(ctx *fasthttp.RequestCtx, field, description string) {
	failBitly(ctx, fasthttp.StatusBadRequest, "INVALID_ARG_"+strings.ToUpper(field), description,
		bitlyFieldError{Field: field, Message: description, ErrorCode: "invalid"})
}

// bitlyFieldOf is the Bitly field a field of linkraft's own create and
// edit comes from, to name the field of a refusal; false for none.
func bitlyFieldOf(native string) (string, bool) {
	switch native {
	case "url", "original_url":
		return "long_url", true
	case "title", "domain":
		return native, true
	case "tags", "tag":
		return "tags", true
	case "workspace":
		return "group_guid", true
	}
	return "", false
}

// failNative answers a native call's refusal as Bitly would: a refused
// token is 403 FORBIDDEN (Bitly does not answer 401), a link the key does
// not see or that has expired NOT_FOUND, invalid input INVALID_ARG_<FIELD>
// where linkraft's message names the field.
func (b bitly) failNative(ctx *fasthttp.RequestCtx, a Answer) {
	detail := a.Detail()
	switch a.Status {
	case fasthttp.StatusUnauthorized, fasthttp.StatusForbidden:
		failBitly(ctx, fasthttp.StatusForbidden, "FORBIDDEN", detail)
	case fasthttp.StatusNotFound, fasthttp.StatusGone:
		failBitly(ctx, fasthttp.StatusNotFound, "NOT_FOUND", detail)
	case fasthttp.StatusBadRequest, fasthttp.StatusUnprocessableEntity:
		first, _, _ := strings.Cut(detail, " ")
		if field, ok := bitlyFieldOf(strings.Trim(first, ":,")); ok {
			invalidArg(ctx, field, detail)
		} else {
			failBitly(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", detail)
		}
	case fasthttp.StatusTooManyRequests:
		failBitly(ctx, a.Status, "RATE_LIMIT_EXCEEDED", detail)
	case fasthttp.StatusServiceUnavailable:
		failBitly(ctx, a.Status, "TEMPORARILY_UNAVAILABLE", detail)
	default:
		message := "INTERNAL_ERROR"
		if a.Status < 500 {
			message = strings.ToUpper(strings.ReplaceAll(fasthttp.StatusMessage(a.Status), " ", "_"))
		}
		failBitly(ctx, a.Status, message, detail)
	}
	a.PassHeaders(ctx)
}

func (b bitly) unsupported(ctx *fasthttp.RequestCtx) {
	failBitly(ctx, fasthttp.StatusNotImplemented, "NOT_IMPLEMENTED",
		fmt.Sprintf("linkraft does not answer %s %s of Bitly's API: it answers shorten, expand, bitlinks create, get, update, delete, clicks, clicks/summary, referrers, referring_domains, countries and devices, a group's bitlinks, the user and groups",
			ctx.Method(), ctx.Path()))
}

// authorized takes Bitly's credential: "Authorization: Bearer <token>",
// or the token alone, as the npm client sends it. linkraft's own
// X-Api-Key works too. Without any, Bitly answers 403.
func (b bitly) authorized(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		h := &ctx.Request.Header
		auth := strings.TrimSpace(string(h.Peek(fasthttp.HeaderAuthorization)))
		switch {
		case auth == "":
			if len(h.Peek("X-Api-Key")) == 0 {
				failBitly(ctx, fasthttp.StatusForbidden, "FORBIDDEN", "no access token: send Authorization: Bearer <linkraft key>")
				return
			}
		case len(auth) <= len("bearer ") || !strings.EqualFold(auth[:len("bearer ")], "bearer "):
			useKey(ctx, auth)
		}
		next(ctx)
	}
}

// bitlinkRef is a bitlink id as linkraft reads it: the link's domain (""
// for the default domain) and code.
type bitlinkRef struct{ domain, code string }

// parseBitlink reads a bitlink id, domain/hash; a whole short URL and a
// bare hash (the default domain's) are taken too. bit.ly and the names in
// defaults (the default domain's, the request's Host) mean the default
// domain.
func parseBitlink(id string, defaults ...string) (bitlinkRef, bool) {
	for _, scheme := range []string{"https://", "http://"} {
		if len(id) > len(scheme) && strings.EqualFold(id[:len(scheme)], scheme) {
			id = id[len(scheme):]
		}
	}
	domain, code := "", id
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		domain, code = strings.ToLower(id[:i]), id[i+1:]
	}
	if code == "" || domain == "" && strings.Contains(id, "/") {
		return bitlinkRef{}, false
	}
	if domain == bitlyDomain || slices.ContainsFunc(defaults, func(d string) bool { return d != "" && strings.EqualFold(d, domain) }) {
		domain = ""
	}
	return bitlinkRef{domain, code}, true
}

// splitBitlinkPath splits what follows /v4/bitlinks/ into the bitlink id
// and the resource after it ("", "clicks", "clicks/summary", …). The id
// is domain/hash when its first segment is a host name (a code never has
// a dot or a colon), else a bare hash.
func splitBitlinkPath(p string) (id, rest string) {
	segs := strings.Split(strings.Trim(p, "/"), "/")
	n := 1
	if len(segs) > 1 && strings.ContainsAny(segs[0], ".:") {
		n = 2
	}
	return strings.Join(segs[:n], "/"), strings.Join(segs[n:], "/")
}

// ref reads a bitlink id of this request.
func (b bitly) ref(ctx *fasthttp.RequestCtx, id string) (bitlinkRef, bool) {
	r, ok := parseBitlink(id, b.defaults(ctx)...)
	if !ok {
		failBitly(ctx, fasthttp.StatusNotFound, "NOT_FOUND", fmt.Sprintf("%q is not a bitlink: domain/hash", id))
	}
	return r, ok
}

// onLink runs a native call on the bitlink's link. A domain that is not
// the default's names a registered domain; when that has no such link the
// default domain's is asked, as the name may be another of the default
// domain (a node's own address, an earlier base URL).
func (b bitly) onLink(ctx *fasthttp.RequestCtx, method string, r bitlinkRef, suffix string, query url.Values, body any) Answer {
	uri := func(domain string) string {
		p := linkPath(r.code, domain, suffix)
		if len(query) > 0 {
			p += sep(domain) + query.Encode()
		}
		return p
	}
	a := b.n.Call(ctx, method, uri(r.domain), body)
	if r.domain != "" && a.Status == fasthttp.StatusNotFound {
		a = b.n.Call(ctx, method, uri(""), body)
	}
	return a
}

// bitlink is a link as Bitly shows it (BitlinkBody).
type bitlink struct {
	References     map[string]string `json:"references"`
	Link           string            `json:"link"`
	ID             string            `json:"id"`
	LongURL        string            `json:"long_url"`
	Title          string            `json:"title,omitempty"`
	Archived       bool              `json:"archived"`
	CreatedAt      string            `json:"created_at"`
	CustomBitlinks []string          `json:"custom_bitlinks"`
	Tags           []string          `json:"tags"`
	Deeplinks      []any             `json:"deeplinks"`
	LaunchpadIDs   []string          `json:"launchpad_ids"`
	QRCodeIDs      []string          `json:"qr_code_ids"`
	IsDeleted      bool              `json:"is_deleted"`
}

// bitlinkID is the link's bitlink id: its domain, or the default
// domain's name, and its code.
func (b bitly) bitlinkID(ctx *fasthttp.RequestCtx, l *Link) string {
	domain := l.Domain
	if domain == "" {
		domain = b.n.DefaultDomain(ctx)
	}
	return domain + "/" + l.ShortCode
}

func bitlyTimeOf(t time.Time) string { return t.UTC().Format(bitlyTime) }

func (b bitly) bitlinkOf(ctx *fasthttp.RequestCtx, l *Link) bitlink {
	out := bitlink{
		References: map[string]string{}, Link: l.ShortURL, ID: b.bitlinkID(ctx, l), LongURL: l.OriginalURL,
		Title: l.Title, CreatedAt: bitlyTimeOf(l.Created()),
		CustomBitlinks: []string{}, Tags: l.Tags, Deeplinks: []any{}, LaunchpadIDs: []string{}, QRCodeIDs: []string{},
	}
	if out.Tags == nil {
		out.Tags = []string{}
	}
	// Bitly's groups are linkraft's workspaces.
	if l.Workspace != "" {
		scheme := "https://"
		if !ctx.IsTLS() {
			scheme = "http://"
		}
		out.References["group"] = scheme + string(ctx.Host()) + "/v4/groups/" + url.PathEscape(l.Workspace)
	}
	return out
}

// decodeLink reads a native answer's link; false (answered) when it
// failed.
func (b bitly) decodeLink(ctx *fasthttp.RequestCtx, a Answer) (Link, bool) {
	var l Link
	if !a.OK() {
		b.failNative(ctx, a)
		return l, false
	}
	if err := a.Decode(&l); err != nil {
		failBitly(ctx, fasthttp.StatusInternalServerError, "INTERNAL_ERROR", err.Error())
		return l, false
	}
	return l, true
}

// bitlyCreate is the body of POST /v4/shorten and POST /v4/bitlinks.
type bitlyCreate struct {
	LongURL   string            `json:"long_url"`
	Domain    string            `json:"domain"`
	GroupGUID string            `json:"group_guid"`
	Title     string            `json:"title"`
	Tags      []string          `json:"tags"`
	Deeplinks []json.RawMessage `json:"deeplinks"`
}

// native is linkraft's create body. Bitly answers a long URL shortened
// before in the group with its bitlink (200), so the create dedupes in
// the key's workspace; a group is a workspace. defaults are the names of
// the default domain.
func (c *bitlyCreate) native(defaults ...string) (map[string]any, *bitlyFieldError) {
	switch {
	case c.LongURL == "":
		return nil, &bitlyFieldError{"long_url", "long_url is required", "missing"}
	case len(c.Deeplinks) > 0:
		return nil, &bitlyFieldError{"deeplinks", "linkraft has no deep links (send a device rule with linkraft's own API)", "not_supported"}
	}
	body := map[string]any{"url": c.LongURL, "dedupe": true}
	if c.Domain != "" && !strings.EqualFold(c.Domain, bitlyDomain) &&
		!slices.ContainsFunc(defaults, func(d string) bool { return d != "" && strings.EqualFold(d, c.Domain) }) {
		body["domain"] = c.Domain
	}
	if c.GroupGUID != "" {
		body["workspace"] = c.GroupGUID
	}
	if c.Title != "" {
		body["title"] = c.Title
	}
	if len(c.Tags) > 0 {
		body["tags"] = c.Tags
	}
	return body, nil
}

// decodeBitly reads a JSON body into v; unknown fields are refused, with
// Bitly's INVALID_ARG_<FIELD> where the field is known.
func decodeBitly(ctx *fasthttp.RequestCtx, body []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			f = strings.Trim(f, `"`)
			invalidArg(ctx, f, "linkraft does not take "+f+" here")
			return false
		}
		failBitly(ctx, fasthttp.StatusBadRequest, "INVALID_BODY", "the body is not the JSON object Bitly's API takes: "+msg)
		return false
	}
	return true
}

func (b bitly) defaults(ctx *fasthttp.RequestCtx) []string {
	host, _, _ := strings.Cut(string(ctx.Host()), ":")
	return []string{b.n.DefaultDomain(ctx), string(ctx.Host()), host}
}

// createFrom makes the link of c: 201 when new, 200 when the URL had one.
func (b bitly) createFrom(ctx *fasthttp.RequestCtx, c *bitlyCreate) {
	body, ferr := c.native(b.defaults(ctx)...)
	if ferr != nil {
		invalidArg(ctx, ferr.Field, ferr.Message)
		return
	}
	l, ok := b.decodeLink(ctx, b.n.Call(ctx, "POST", "/api/v1/urls", body))
	if !ok {
		return
	}
	status := fasthttp.StatusCreated
	if l.Existing {
		status = fasthttp.StatusOK
	}
	writeBody(ctx, status, "application/json", marshal(b.bitlinkOf(ctx, &l)))
}

// shorten is POST /v4/shorten: long_url, domain, group_guid. (The npm
// client sends domain bit.ly with every call.)
func (b bitly) shorten(ctx *fasthttp.RequestCtx) {
	var c struct {
		LongURL   string `json:"long_url"`
		Domain    string `json:"domain"`
		GroupGUID string `json:"group_guid"`
	}
	if !decodeBitly(ctx, ctx.PostBody(), &c) {
		return
	}
	b.createFrom(ctx, &bitlyCreate{LongURL: c.LongURL, Domain: c.Domain, GroupGUID: c.GroupGUID})
}

// create is POST /v4/bitlinks: shorten's fields and title, tags,
// deeplinks.
func (b bitly) create(ctx *fasthttp.RequestCtx) {
	var c bitlyCreate
	if !decodeBitly(ctx, ctx.PostBody(), &c) {
		return
	}
	b.createFrom(ctx, &c)
}

// expand is POST /v4/expand: bitlink_id. The npm client adds domain,
// which the id already carries.
func (b bitly) expand(ctx *fasthttp.RequestCtx) {
	var e struct {
		BitlinkID string `json:"bitlink_id"`
		Domain    string `json:"domain"`
	}
	if !decodeBitly(ctx, ctx.PostBody(), &e) {
		return
	}
	if e.BitlinkID == "" {
		invalidArg(ctx, "bitlink_id", "bitlink_id is required")
		return
	}
	r, ok := b.ref(ctx, e.BitlinkID)
	if !ok {
		return
	}
	l, ok := b.decodeLink(ctx, b.onLink(ctx, "GET", r, "", nil, nil))
	if !ok {
		return
	}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(map[string]string{
		"link": l.ShortURL, "id": b.bitlinkID(ctx, &l), "long_url": l.OriginalURL, "created_at": bitlyTimeOf(l.Created()),
	}))
}

// read answers GET /v4/bitlinks/{bitlink} and the metrics under it.
func (b bitly) read(ctx *fasthttp.RequestCtx) {
	raw, _ := ctx.UserValue("bitlink").(string)
	id, rest := splitBitlinkPath(raw)
	switch rest {
	case "", "clicks", "clicks/summary", "referrers", "referring_domains", "countries", "devices":
	default:
		b.unsupported(ctx)
		return
	}
	r, ok := b.ref(ctx, id)
	if !ok {
		return
	}
	switch rest {
	case "":
		if l, ok := b.decodeLink(ctx, b.onLink(ctx, "GET", r, "", nil, nil)); ok {
			writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(b.bitlinkOf(ctx, &l)))
		}
	case "clicks", "clicks/summary":
		b.clicks(ctx, r, rest == "clicks/summary")
	default:
		b.metrics(ctx, r, rest)
	}
}

// remove is DELETE /v4/bitlinks/{bitlink} (Bitly's deleteBitlink, of
// the current API): linkraft's delete, which tombstones the code for
// good. It answers LinkDeletionResponse, {"links_deleted": [{"id"}]}.
func (b bitly) remove(ctx *fasthttp.RequestCtx) {
	raw, _ := ctx.UserValue("bitlink").(string)
	id, rest := splitBitlinkPath(raw)
	if rest != "" {
		b.unsupported(ctx)
		return
	}
	r, ok := b.ref(ctx, id)
	if !ok {
		return
	}
	// As onLink: a domain without the link may name the default domain.
	a := b.n.Call(ctx, "DELETE", linkPath(r.code, r.domain, ""), nil)
	if r.domain != "" && a.Status == fasthttp.StatusNotFound {
		r.domain = ""
		a = b.n.Call(ctx, "DELETE", linkPath(r.code, "", ""), nil)
	}
	if !a.OK() {
		b.failNative(ctx, a)
		return
	}
	deleted := Link{ShortCode: r.code, Domain: r.domain}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(map[string]any{
		"links_deleted": []map[string]string{{"id": b.bitlinkID(ctx, &deleted)}},
	}))
}

// readOnly reports a field of a bitlink an update may carry back
// unchanged (clients send the bitlink they read): Bitly ignores them, and
// so does linkraft.
func readOnly(field string) bool {
	switch field {
	case "references", "link", "id", "created_at", "created_by", "client_id", "custom_bitlinks",
		"launchpad_ids", "qr_code_ids", "is_deleted", "domain":
		return true
	}
	return false
}

// bitlyEdit turns an update body into linkraft's edit: title and tags
// (null clears), long_url; archived only false, deeplinks only empty.
func bitlyEdit(raw []byte) (map[string]any, *bitlyFieldError) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, &bitlyFieldError{"body", "the body is not a JSON object: " + err.Error(), "invalid"}
	}
	out := map[string]any{}
	for k, v := range in {
		if err := bitlyEditField(out, k, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// bitlyEditField adds the update's field k, valued v, to linkraft's edit.
func bitlyEditField(out map[string]any, k string, v json.RawMessage) *bitlyFieldError {
	null := string(bytes.TrimSpace(v)) == "null"
	switch {
	case k == "title":
		var s string
		if !null && json.Unmarshal(v, &s) != nil {
			return &bitlyFieldError{k, "title must be a string", "invalid"}
		}
		out["title"] = s
	case k == "tags":
		var tags []string
		if !null && json.Unmarshal(v, &tags) != nil {
			return &bitlyFieldError{k, "tags must be a list of strings", "invalid"}
		}
		if tags == nil {
			tags = []string{}
		}
		out["tags"] = tags
	case k == "long_url":
		var s string
		if json.Unmarshal(v, &s) != nil || s == "" {
			return &bitlyFieldError{k, "long_url must be a URL", "invalid"}
		}
		out["original_url"] = s
	case k == "archived" || k == "deeplinks":
		return bitlyUnsupportedField(k, v, null)
	case readOnly(k):
	default:
		return &bitlyFieldError{k, "linkraft does not take " + k + " in an update", "invalid"}
	}
	return nil
}

// bitlyUnsupportedField refuses an update's archived or deeplinks, unless
// it asks for what linkraft does anyway: not archived, no deep links.
func bitlyUnsupportedField(k string, v json.RawMessage, null bool) *bitlyFieldError {
	if k == "archived" {
		var archived bool
		if !null && json.Unmarshal(v, &archived) != nil {
			return &bitlyFieldError{k, "archived must be true or false", "invalid"}
		}
		if archived {
			return &bitlyFieldError{k, "linkraft does not archive links (delete one with linkraft's API)", "not_supported"}
		}
		return nil
	}
	var d []json.RawMessage
	if !null && json.Unmarshal(v, &d) != nil || len(d) > 0 {
		return &bitlyFieldError{k, "linkraft has no deep links (send a device rule with linkraft's own API)", "not_supported"}
	}
	return nil
}

// update is PATCH /v4/bitlinks/{bitlink}.
func (b bitly) update(ctx *fasthttp.RequestCtx) {
	raw, _ := ctx.UserValue("bitlink").(string)
	id, rest := splitBitlinkPath(raw)
	if rest != "" {
		b.unsupported(ctx)
		return
	}
	body, ferr := bitlyEdit(ctx.PostBody())
	switch {
	case ferr != nil && ferr.Field == "body":
		failBitly(ctx, fasthttp.StatusBadRequest, "INVALID_BODY", ferr.Message)
		return
	case ferr != nil:
		invalidArg(ctx, ferr.Field, ferr.Message)
		return
	}
	r, ok := b.ref(ctx, id)
	if !ok {
		return
	}
	if l, ok := b.decodeLink(ctx, b.onLink(ctx, "PATCH", r, "", nil, body)); ok {
		writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(b.bitlinkOf(ctx, &l)))
	}
}

// metricsQuery is what Bitly's metrics take: a unit of time, how many
// units back from unit_reference (-1: all), and size (the most items of a
// breakdown).
type metricsQuery struct {
	unit      string
	units     int
	reference time.Time
	size      int
}

// parseMetricsQuery reads unit (default day), units (default -1),
// unit_reference (default now) and size (default 50, at most 1000).
func parseMetricsQuery(args *fasthttp.Args, now time.Time) (metricsQuery, *bitlyFieldError) {
	q := metricsQuery{unit: "day", units: -1, reference: now, size: 50}
	if v := string(args.Peek("unit")); v != "" {
		switch v {
		case "hour", "day", "week", "month":
			q.unit = v
		case "minute":
			return q, &bitlyFieldError{"unit", "linkraft counts clicks per hour: use hour, day, week or month", "not_supported"}
		default:
			return q, &bitlyFieldError{"unit", "unit must be hour, day, week or month", "invalid"}
		}
	}
	if v := string(args.Peek("units")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n == 0 || n < -1 {
			return q, &bitlyFieldError{"units", "units must be a positive number, or -1 for all", "invalid"}
		}
		q.units = n
	}
	if v := string(args.Peek("unit_reference")); v != "" {
		t, err := parseISO(v)
		if err != nil {
			return q, &bitlyFieldError{"unit_reference", "unit_reference must be an ISO 8601 time such as 2026-11-22T10:00:00+0000", "invalid"}
		}
		q.reference = t
	}
	if v := string(args.Peek("size")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return q, &bitlyFieldError{"size", "size must be a number from 1 to 1000", "invalid"}
		}
		q.size = n
	}
	return q, nil
}

// parseISO reads the ISO 8601 times Bitly's clients send: RFC 3339 and
// Bitly's own +0000 offsets.
func parseISO(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05Z0700", "2006-01-02T15:04:05.999999999Z0700", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("not an ISO 8601 time: %q", s)
}

// unitStart is the start of the unit of time (UTC) that holds t: hours,
// days, weeks from Monday, calendar months.
func unitStart(unit string, t time.Time) time.Time {
	t = t.UTC()
	switch unit {
	case "hour":
		return t.Truncate(time.Hour)
	case "week":
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	case "month":
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// addUnits moves a unit's start n units on (back when n < 0).
func addUnits(unit string, t time.Time, n int) time.Time {
	switch unit {
	case "hour":
		return t.Add(time.Duration(n) * time.Hour)
	case "week":
		return t.AddDate(0, 0, 7*n)
	case "month":
		return t.AddDate(0, n, 0)
	}
	return t.AddDate(0, 0, n)
}

// span is the time a metrics query covers, [from, to), in whole units:
// to ends the unit of the reference; from is units units before, or for
// -1 the first unit linkraft keeps whole (kept is the oldest hour it
// keeps; longer units are counted in whole days). A span reaching before
// that is refused: linkraft cannot count what it no longer keeps, and a
// partial unit would be a wrong count.
func (q metricsQuery) span(kept time.Time) (from, to time.Time, err error) {
	if q.unit != "hour" {
		kept = unitStart("day", kept.Add(24*time.Hour-1))
	}
	newest := unitStart(q.unit, q.reference)
	to = addUnits(q.unit, newest, 1)
	if q.units == -1 {
		from = unitStart(q.unit, kept)
		if from.Before(kept) {
			from = addUnits(q.unit, from, 1)
		}
		return from, to, nil
	}
	from = addUnits(q.unit, newest, -(q.units - 1))
	if from.Before(kept) {
		return from, to, fmt.Errorf("linkraft keeps clicks for %d days: the %d %ss up to %s begin before %s",
			fsm.ClickRetentionHours/24, q.units, q.unit, q.reference.UTC().Format(bitlyTime), kept.UTC().Format(bitlyTime))
	}
	return from, to, nil
}

// bucketClicks sums linkraft's clicks per interval (start, clicks) into
// the units of [from, to), newest first as Bitly lists them.
func bucketClicks(unit string, from, to time.Time, points []clickPoint) []map[string]any {
	var starts []time.Time
	for t := from; t.Before(to); t = addUnits(unit, t, 1) {
		starts = append(starts, t)
	}
	clicks := make([]uint64, len(starts))
	for _, p := range points {
		s := unitStart(unit, p.start)
		if i, ok := slices.BinarySearchFunc(starts, s, func(a, b time.Time) int { return a.Compare(b) }); ok {
			clicks[i] += p.clicks
		}
	}
	out := make([]map[string]any, 0, len(starts))
	for i := len(starts) - 1; i >= 0; i-- {
		out = append(out, map[string]any{"clicks": clicks[i], "date": bitlyTimeOf(starts[i])})
	}
	return out
}

// keptHours is the oldest hour of clicks linkraft keeps at now.
func keptHours(now time.Time) time.Time {
	return now.UTC().Truncate(time.Hour).Add(-time.Duration(fsm.ClickRetentionHours-1) * time.Hour)
}

// clickPoint is one interval of linkraft's click series.
type clickPoint struct {
	start  time.Time
	clicks uint64
}

// clicks answers /clicks (link_clicks per unit) and /clicks/summary
// (total_clicks) from linkraft's clicks per hour, which it keeps for
// fsm.ClickRetentionHours: hours are asked by the hour, longer units by
// the day and summed. A summary of all units (-1) is the link's click
// count, kept for good.
func (b bitly) clicks(ctx *fasthttp.RequestCtx, r bitlinkRef, summary bool) {
	now := time.Now()
	q, ferr := parseMetricsQuery(ctx.QueryArgs(), now)
	if ferr != nil {
		invalidArg(ctx, ferr.Field, ferr.Message)
		return
	}
	kept := keptHours(now)
	from, to, err := q.span(kept)
	if err != nil {
		invalidArg(ctx, "units", err.Error())
		return
	}
	interval := "day" // longer units are summed from days
	if q.unit == "hour" {
		interval = "hour"
	}
	query := url.Values{"interval": {interval}, "from": {nativeTime(from)}, "to": {nativeTime(to)}}
	a := b.onLink(ctx, "GET", r, "/stats", query, nil)
	if !a.OK() {
		b.failNative(ctx, a)
		return
	}
	var stats struct {
		Clicks    uint64 `json:"clicks"`
		CreatedAt string `json:"created_at"`
		Series    []struct {
			Start  string `json:"start"`
			Clicks uint64 `json:"clicks"`
		} `json:"series"`
	}
	if err := a.Decode(&stats); err != nil {
		failBitly(ctx, fasthttp.StatusInternalServerError, "INTERNAL_ERROR", err.Error())
		return
	}
	points := make([]clickPoint, len(stats.Series))
	for i, s := range stats.Series {
		points[i].start, points[i].clicks = parseTime(&s.Start), s.Clicks
	}
	if c := unitStart(q.unit, parseTime(&stats.CreatedAt)); q.units == -1 && c.After(from) {
		from = c // all units: those since the link was made
	}
	buckets := bucketClicks(q.unit, from, to, points)
	out := map[string]any{"unit": q.unit, "units": q.units, "unit_reference": bitlyTimeOf(q.reference)}
	if summary {
		total := stats.Clicks
		if q.units != -1 {
			total = 0
			for _, p := range points {
				total += p.clicks
			}
		}
		out["total_clicks"] = total
	} else {
		out["link_clicks"] = buckets
	}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(out))
}

// metrics answers /referrers, /referring_domains (linkraft keeps
// referrers by host: both are the same breakdown), /countries and
// /devices from linkraft's visitors per day by referrer host, country and
// device: units of a day or longer, or all the days linkraft keeps (-1,
// whatever the unit).
func (b bitly) metrics(ctx *fasthttp.RequestCtx, r bitlinkRef, facet string) {
	now := time.Now()
	q, ferr := parseMetricsQuery(ctx.QueryArgs(), now)
	if ferr != nil {
		invalidArg(ctx, ferr.Field, ferr.Message)
		return
	}
	if q.unit == "hour" && q.units != -1 {
		invalidArg(ctx, "unit", "linkraft keeps "+facet+" per day: use day, week or month, or units -1")
		return
	}
	dq := q
	if dq.unit == "hour" {
		dq.unit = "day"
	}
	kept := unitStart("day", now).AddDate(0, 0, -fsm.ClickRetentionHours/24)
	from, to, err := dq.span(kept)
	if err != nil {
		invalidArg(ctx, "units", err.Error())
		return
	}
	if from.Before(kept) {
		from = kept
	}
	by := map[string]string{"referrers": "referrer", "referring_domains": "referrer", "countries": "country", "devices": "device"}[facet]
	query := url.Values{"group_by": {by}, "from": {nativeTime(from)}, "to": {nativeTime(to)}}
	a := b.onLink(ctx, "GET", r, "/stats", query, nil)
	if !a.OK() {
		b.failNative(ctx, a)
		return
	}
	var stats struct {
		Visits struct {
			Groups []metric `json:"groups"`
		} `json:"visits"`
	}
	if err := a.Decode(&stats); err != nil {
		failBitly(ctx, fasthttp.StatusInternalServerError, "INTERNAL_ERROR", err.Error())
		return
	}
	metrics := topMetrics(stats.Visits.Groups, q.size)
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(map[string]any{
		"unit": q.unit, "units": q.units, "unit_reference": bitlyTimeOf(q.reference), "facet": facet, "metrics": metrics,
	}))
}

// metric is one item of a breakdown, as linkraft and Bitly both show it.
type metric struct {
	Value  string `json:"value"`
	Clicks uint64 `json:"clicks"`
}

// topMetrics is Bitly's metrics: the size items with the most clicks,
// most first (ties by value, so the answer is the same on every node).
func topMetrics(groups []metric, size int) []metric {
	out := slices.Clone(groups)
	slices.SortFunc(out, func(x, y metric) int {
		if c := cmp.Compare(y.Clicks, x.Clicks); c != 0 {
			return c
		}
		return strings.Compare(x.Value, y.Value)
	})
	if out == nil {
		out = []metric{}
	}
	return out[:min(len(out), size)]
}

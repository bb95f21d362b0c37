package compat

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
)

// yourlsPath is YOURLS' one API endpoint.
const yourlsPath = "/yourls-api.php"

// YOURLSVersion is the YOURLS version linkraft answers as
// (action=version).
const YOURLSVersion = "1.9.2"

// yourlsDate is YOURLS' date format, PHP's "Y-m-d H:i:s" (in UTC here).
const yourlsDate = "2006-01-02 15:04:05"

// yourlsIP is the ip field of every link. YOURLS records the address that
// made a link; linkraft never stores addresses, and clients need the
// field present.
const yourlsIP = "0.0.0.0"

func registerYOURLS(route Route, n Native) {
	y := yourls{n}
	route("GET", yourlsPath, "compat_yourls", y.serve)
	route("POST", yourlsPath, "compat_yourls", y.serve)
}

type yourls struct{ n Native }

// doc is an answer in YOURLS' key order, which its XML keeps.
type doc []field

type field struct {
	key string
	val any // string, a number, doc, or nil
}

func (d doc) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range d {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(f.val)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// writeXML writes d as YOURLS' XML: one element per key.
func (d doc) writeXML(b *bytes.Buffer) {
	for _, f := range d {
		b.WriteString("<" + f.key + ">")
		switch v := f.val.(type) {
		case doc:
			v.writeXML(b)
		case nil:
		default:
			_ = xml.EscapeText(b, []byte(fmt.Sprint(v)))
		}
		b.WriteString("</" + f.key + ">")
	}
}

func (d doc) get(key string) any {
	for _, f := range d {
		if f.key == key {
			return f.val
		}
	}
	return nil
}

// params are the request's arguments, the query's over a POST form's
// (PHP's $_REQUEST), copied before any native call replaces the request.
type params map[string]string

func paramsOf(ctx *fasthttp.RequestCtx) params {
	p := params{}
	if ctx.IsPost() {
		ctx.PostArgs().VisitAll(func(k, v []byte) { p[string(k)] = string(v) })
	}
	ctx.QueryArgs().VisitAll(func(k, v []byte) { p[string(k)] = string(v) })
	return p
}

func (p params) get(name string) string { return p[name] }

// answer writes d in the request's format with status as the HTTP status
// (YOURLS sends its statusCode as the status).
func (y yourls) answer(ctx *fasthttp.RequestCtx, p params, status int, d doc) {
	switch format := p.get("format"); format {
	case "json", "jsonp":
		body := marshal(d)
		if cb := p.get("callback"); cb != "" && validCallback(cb) {
			writeBody(ctx, status, "application/javascript; charset=utf-8",
				[]byte(cb+"("+strings.TrimSpace(string(body))+")"))
			return
		}
		writeBody(ctx, status, "application/json; charset=utf-8", body)
	case "simple":
		simple := d.get("simple")
		if simple == nil {
			simple = d.get("message")
		}
		writeBody(ctx, status, "text/plain; charset=utf-8", []byte(fmt.Sprint(simple)))
	default: // xml, YOURLS' default
		var b bytes.Buffer
		b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<result>")
		d.writeXML(&b)
		b.WriteString("</result>")
		writeBody(ctx, status, "application/xml; charset=utf-8", b.Bytes())
	}
}

// validCallback keeps a JSONP callback to a JavaScript name, so a link
// cannot make the endpoint answer a script of the caller's choice.
func validCallback(cb string) bool {
	if len(cb) > 64 {
		return false
	}
	for _, r := range cb {
		if !(r == '_' || r == '$' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// fail answers an error as YOURLS does: message, errorCode and
// statusCode, and the HTTP status.
func (y yourls) fail(ctx *fasthttp.RequestCtx, p params, status int, message string, a *Answer) {
	y.answer(ctx, p, status, doc{
		{"errorCode", strconv.Itoa(status)}, {"message", message}, {"simple", message},
		{"statusCode", status}, {"callback", p.get("callback")},
	})
	if a != nil {
		a.PassHeaders(ctx)
	}
}

// failNative answers a native call's refusal: 401 and 403 as YOURLS'
// login failure (403), the rest with linkraft's status and message.
func (y yourls) failNative(ctx *fasthttp.RequestCtx, p params, a Answer) {
	switch a.Status {
	case fasthttp.StatusUnauthorized:
		y.fail(ctx, p, fasthttp.StatusForbidden, "Invalid username or password", &a)
	case fasthttp.StatusNotFound, fasthttp.StatusGone:
		y.fail(ctx, p, fasthttp.StatusNotFound, "Error: short URL not found", &a)
	default:
		y.fail(ctx, p, a.Status, a.Detail(), &a)
	}
}

func (y yourls) serve(ctx *fasthttp.RequestCtx) {
	p := paramsOf(ctx)
	// The key: signature=<key>, or username=<anything>&password=<key>.
	// linkraft's keys are the secret: YOURLS' time-limited signatures
	// (signature=md5(timestamp+token)) are not taken.
	// linkraft's own credential headers work too.
	key := p.get("signature")
	if key == "" {
		key = p.get("password")
	}
	switch h := &ctx.Request.Header; {
	case key != "":
		useKey(ctx, key)
	case len(h.Peek("X-Api-Key")) == 0 && len(h.Peek(fasthttp.HeaderAuthorization)) == 0:
		y.fail(ctx, p, fasthttp.StatusForbidden, "Please log in", nil)
		return
	}
	switch action := p.get("action"); action {
	case "shorturl":
		y.shorten(ctx, p)
	case "expand":
		y.expand(ctx, p)
	case "url-stats":
		y.urlStats(ctx, p)
	case "stats":
		y.stats(ctx, p)
	case "db-stats":
		y.dbStats(ctx, p)
	case "version":
		y.version(ctx, p)
	case "":
		y.fail(ctx, p, fasthttp.StatusBadRequest, "Missing or wrong action parameter", nil)
	default:
		y.fail(ctx, p, fasthttp.StatusBadRequest, "Unknown or missing \"action\" parameter", nil)
	}
}

// linkDoc is a link as YOURLS' url object shows it.
func linkDoc(l *Link) doc {
	return doc{
		{"keyword", l.ShortCode}, {"url", l.OriginalURL}, {"title", l.Title},
		{"date", l.Created().UTC().Format(yourlsDate)}, {"ip", yourlsIP},
	}
}

// shorten is action=shorturl. YOURLS keeps one link per URL by default
// (YOURLS_UNIQUE_URLS): a URL already shortened is the failure error:url
// with that link, which linkraft's dedupe finds.
func (y yourls) shorten(ctx *fasthttp.RequestCtx, p params) {
	long, keyword, title := p.get("url"), p.get("keyword"), p.get("title")
	if long == "" {
		y.answer(ctx, p, fasthttp.StatusBadRequest, doc{
			{"status", "fail"}, {"code", "error:nourl"}, {"message", "Missing or malformed URL"},
			{"errorCode", "400"}, {"statusCode", 400}, {"callback", p.get("callback")},
		})
		return
	}
	body := map[string]any{"url": long, "dedupe": true}
	if keyword != "" {
		body["custom_code"] = keyword
	}
	if title != "" {
		body["title"] = title
	}
	a := y.n.Call(ctx, "POST", "/api/v1/urls", body)
	if !a.OK() {
		switch {
		case a.Status == fasthttp.StatusConflict || keyword != "" && a.Status == fasthttp.StatusBadRequest && strings.Contains(a.Detail(), "custom_code"):
			// YOURLS answers a taken keyword as a valid request that
			// failed: status 200, statusCode 200.
			msg := fmt.Sprintf("Short URL %s already exists in database or is reserved", keyword)
			if a.Status == fasthttp.StatusBadRequest {
				msg = a.Detail()
			}
			y.answer(ctx, p, fasthttp.StatusOK, doc{
				{"status", "fail"}, {"code", "error:keyword"}, {"message", msg},
				{"errorCode", "400"}, {"statusCode", 200}, {"callback", p.get("callback")},
			})
		case a.Status == fasthttp.StatusBadRequest || a.Status == fasthttp.StatusRequestEntityTooLarge:
			y.answer(ctx, p, fasthttp.StatusBadRequest, doc{
				{"status", "fail"}, {"code", "error:nourl"}, {"message", "Missing or malformed URL: " + a.Detail()},
				{"errorCode", "400"}, {"statusCode", 400}, {"callback", p.get("callback")},
			})
		default:
			y.failNative(ctx, p, a)
		}
		return
	}
	var l Link
	if err := a.Decode(&l); err != nil {
		y.fail(ctx, p, fasthttp.StatusInternalServerError, err.Error(), nil)
		return
	}
	if l.Existing {
		y.answer(ctx, p, fasthttp.StatusOK, doc{
			{"status", "fail"}, {"code", "error:url"}, {"url", linkDoc(&l)},
			{"message", l.OriginalURL + " already exists in database"}, {"title", l.Title}, {"shorturl", l.ShortURL},
			{"errorCode", "400"}, {"statusCode", 200}, {"callback", p.get("callback")},
		})
		return
	}
	y.answer(ctx, p, fasthttp.StatusOK, doc{
		{"url", linkDoc(&l)}, {"status", "success"}, {"message", l.OriginalURL + " added to database"},
		{"title", l.Title}, {"shorturl", l.ShortURL}, {"statusCode", 200}, {"callback", p.get("callback")},
	})
}

// lookup reads the link of shorturl, a keyword or a whole short URL
// (https://brand.example/abc names abc in domain brand.example, or in the
// default domain when brand.example has no such link).
func (y yourls) lookup(ctx *fasthttp.RequestCtx, p params) (Link, bool) {
	short := p.get("shorturl")
	code, domain := short, ""
	if u, err := url.Parse(short); err == nil && u.Host != "" {
		code = strings.Trim(u.Path, "/")
		if !strings.EqualFold(u.Host, y.n.DefaultDomain(ctx)) {
			domain = strings.ToLower(u.Host)
		}
	}
	if code == "" || strings.ContainsAny(code, "/?#") {
		y.fail(ctx, p, fasthttp.StatusNotFound, "Error: short URL not found", nil)
		return Link{}, false
	}
	a := y.n.Call(ctx, "GET", linkPath(code, domain, ""), nil)
	if domain != "" && (a.Status == fasthttp.StatusNotFound) {
		// Not a registered domain's link: the host may be another name of
		// the default domain (a node's own address, another base URL).
		a = y.n.Call(ctx, "GET", linkPath(code, "", ""), nil)
	}
	if !a.OK() {
		y.failNative(ctx, p, a)
		return Link{}, false
	}
	var l Link
	if err := a.Decode(&l); err != nil {
		y.fail(ctx, p, fasthttp.StatusInternalServerError, err.Error(), nil)
		return l, false
	}
	return l, true
}

func (y yourls) expand(ctx *fasthttp.RequestCtx, p params) {
	l, ok := y.lookup(ctx, p)
	if !ok {
		return
	}
	y.answer(ctx, p, fasthttp.StatusOK, doc{
		{"keyword", l.ShortCode}, {"shorturl", l.ShortURL}, {"longurl", l.OriginalURL}, {"title", l.Title},
		{"simple", l.OriginalURL}, {"message", "success"}, {"statusCode", 200},
	})
}

// statsDoc is a link as YOURLS' stats show it.
func statsDoc(l *Link) doc {
	return doc{
		{"shorturl", l.ShortURL}, {"url", l.OriginalURL}, {"title", l.Title},
		{"timestamp", l.Created().UTC().Format(yourlsDate)}, {"ip", yourlsIP},
		{"clicks", strconv.FormatUint(l.ClickCount, 10)},
	}
}

func (y yourls) urlStats(ctx *fasthttp.RequestCtx, p params) {
	l, ok := y.lookup(ctx, p)
	if !ok {
		return
	}
	y.answer(ctx, p, fasthttp.StatusOK, doc{{"statusCode", 200}, {"message", "success"}, {"link", statsDoc(&l)}})
}

// every is every link the key sees, through linkraft's list.
func (y yourls) every(ctx *fasthttp.RequestCtx, p params) ([]Link, bool) {
	links, failed, err := scan(ctx, y.n, url.Values{})
	switch {
	case failed != nil:
		y.failNative(ctx, p, *failed)
		return nil, false
	case err != nil:
		y.fail(ctx, p, fasthttp.StatusBadRequest, err.Error(), nil)
		return nil, false
	}
	return links, true
}

func totals(links []Link) doc {
	var clicks uint64
	for i := range links {
		clicks += links[i].ClickCount
	}
	return doc{{"total_links", strconv.Itoa(len(links))}, {"total_clicks", strconv.FormatUint(clicks, 10)}}
}

// stats is action=stats: filter top (most clicked), bottom (least),
// last (newest) or rand, limit (default 10) links from start.
func (y yourls) stats(ctx *fasthttp.RequestCtx, p params) {
	limit, start := 10, 0
	for _, a := range []struct {
		name string
		to   *int
	}{{"limit", &limit}, {"start", &start}} {
		if v := p.get(a.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				y.fail(ctx, p, fasthttp.StatusBadRequest, a.name+" must be a whole number", nil)
				return
			}
			*a.to = n
		}
	}
	links, ok := y.every(ctx, p)
	if !ok {
		return
	}
	sorted := slices.Clone(links) // linkraft's list is newest first: "last"
	switch filter := p.get("filter"); filter {
	case "top", "":
		slices.SortStableFunc(sorted, func(a, b Link) int { return compareClicks(b, a) })
	case "bottom":
		slices.SortStableFunc(sorted, func(a, b Link) int { return compareClicks(a, b) })
	case "last":
	case "rand", "random":
		rand.Shuffle(len(sorted), func(i, j int) { sorted[i], sorted[j] = sorted[j], sorted[i] })
	default:
		y.fail(ctx, p, fasthttp.StatusBadRequest, "filter must be top, bottom, last or rand", nil)
		return
	}
	sorted = sorted[min(start, len(sorted)):]
	sorted = sorted[:min(limit, len(sorted))]
	out := doc{}
	for i := range sorted {
		out = append(out, field{"link_" + strconv.Itoa(i+1), statsDoc(&sorted[i])})
	}
	d := doc{}
	if len(out) > 0 {
		d = append(d, field{"links", out})
	}
	d = append(d, field{"stats", totals(links)}, field{"statusCode", 200}, field{"message", "success"})
	y.answer(ctx, p, fasthttp.StatusOK, d)
}

func compareClicks(a, b Link) int {
	switch {
	case a.ClickCount < b.ClickCount:
		return -1
	case a.ClickCount > b.ClickCount:
		return 1
	}
	return 0
}

func (y yourls) dbStats(ctx *fasthttp.RequestCtx, p params) {
	links, ok := y.every(ctx, p)
	if !ok {
		return
	}
	y.answer(ctx, p, fasthttp.StatusOK, doc{{"db-stats", totals(links)}, {"statusCode", 200}, {"message", "success"}})
}

// version proves the key and answers YOURLS' version.
func (y yourls) version(ctx *fasthttp.RequestCtx, p params) {
	if a := y.n.Authenticate(ctx, false); !a.OK() {
		y.failNative(ctx, p, a)
		return
	}
	y.answer(ctx, p, fasthttp.StatusOK, doc{{"version", YOURLSVersion}, {"db_version", "1"}, {"statusCode", 200}, {"message", "success"}})
}

package compat

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math/rand/v2"
	"net/url"
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

// writeXML writes d as YOURLS' XML (spatie/array-to-xml through PHP's
// DOMDocument): one element per key, an empty one as <key/>.
func (d doc) writeXML(b *bytes.Buffer) {
	for _, f := range d {
		var inner bytes.Buffer
		switch v := f.val.(type) {
		case doc:
			v.writeXML(&inner)
		case nil:
		default:
			_ = xml.EscapeText(&inner, []byte(fmt.Sprint(v)))
		}
		if inner.Len() == 0 {
			b.WriteString("<" + f.key + "/>")
			continue
		}
		b.WriteString("<" + f.key + ">")
		b.Write(inner.Bytes())
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

// yourlsStatsSimple is format=simple's answer to the stats actions.
const yourlsStatsSimple = "Need either XML or JSON format for stats"

// callbackOf is the JSONP callback: callback, else jsonp (YOURLS'
// alias); set tells whether either was sent.
func (p params) callbackOf() (cb string, set bool) {
	if cb, ok := p["callback"]; ok {
		return cb, true
	}
	cb, ok := p["jsonp"]
	return cb, ok
}

// answer writes d in the request's format with status as the HTTP status
// (YOURLS sends its statusCode, else its errorCode, as the status), as
// yourls_api_output does: d's simple is format=simple's text and is left
// out of the other formats; a sent callback (or jsonp) is added as
// callback; no format is xml, and a format YOURLS does not know (empty
// included) is simple.
func (y yourls) answer(ctx *fasthttp.RequestCtx, p params, status int, d doc) {
	var simple any = ""
	out := make(doc, 0, len(d)+1)
	for _, f := range d {
		switch f.key {
		case "simple":
			simple = f.val
		case "callback":
		default:
			out = append(out, f)
		}
	}
	cb, set := p.callbackOf()
	if set || d.get("callback") != nil {
		out = append(out, field{"callback", cb})
	}
	format, given := p["format"]
	if !given {
		format = "xml"
	}
	switch format {
	case "jsonp":
		if !validCallback(cb) {
			// YOURLS 1.10's answer to a callback that is not a
			// JavaScript name (or none at all).
			writeBody(ctx, fasthttp.StatusBadRequest, "application/json; charset=utf-8",
				[]byte(`{"errorCode":"400","error":"Invalid callback parameter"}`))
			return
		}
		writeBody(ctx, status, "application/javascript; charset=utf-8",
			[]byte(cb+"("+strings.TrimSpace(string(marshal(out)))+")"))
	case "json":
		writeBody(ctx, status, "application/json; charset=utf-8", bytes.TrimSpace(marshal(out)))
	case "xml":
		// spatie/array-to-xml's document, as YOURLS 1.8+ sends it.
		var b bytes.Buffer
		b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<root>")
		out.writeXML(&b)
		b.WriteString("</root>\n")
		writeBody(ctx, status, "application/xml; charset=utf-8", b.Bytes())
	default: // simple, and any other format
		writeBody(ctx, status, "text/plain; charset=utf-8", []byte(fmt.Sprint(simple)))
	}
}

// validCallback keeps a JSONP callback to a JavaScript name, so a link
// cannot make the endpoint answer a script of the caller's choice
// (YOURLS 1.10 allows [a-zA-Z0-9_$.]+).
func validCallback(cb string) bool {
	if cb == "" || len(cb) > 64 {
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
// statusCode, and the HTTP status; format=simple prints the message.
func (y yourls) fail(ctx *fasthttp.RequestCtx, p params, status int, message string, a *Answer) {
	y.answer(ctx, p, status, doc{
		{"errorCode", strconv.Itoa(status)}, {"message", message}, {"simple", message},
		{"statusCode", status},
	})
	if a != nil {
		a.PassHeaders(ctx)
	}
}

// loginFail answers a refused login as YOURLS' auth.php does: simple and
// message, errorCode 403 and callback (always present).
func (y yourls) loginFail(ctx *fasthttp.RequestCtx, p params, message string, a *Answer) {
	y.answer(ctx, p, fasthttp.StatusForbidden, doc{
		{"simple", message}, {"message", message}, {"errorCode", "403"}, {"callback", ""},
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
		y.loginFail(ctx, p, "Invalid username or password", &a)
	case fasthttp.StatusNotFound, fasthttp.StatusGone:
		y.fail(ctx, p, fasthttp.StatusNotFound, "Error: short URL not found", &a)
	default:
		y.fail(ctx, p, a.Status, a.Detail(), &a)
	}
}

func (y yourls) serve(ctx *fasthttp.RequestCtx) {
	p := paramsOf(ctx)
	// The key: signature=<key>, or username=<anything>&password=<key>;
	// or a time-limited signature of the key's signature token
	// (timestamp=, signature=, hash=); linkraft's own credential headers
	// work too.
	if ts := p.get("timestamp"); ts != "" {
		if y.signedBy(ctx, p, ts) {
			y.act(ctx, p)
		}
		return
	}
	key := p.get("signature")
	if key == "" {
		key = p.get("password")
	}
	switch h := &ctx.Request.Header; {
	case key != "":
		useKey(ctx, key)
	case len(h.Peek("X-Api-Key")) == 0 && len(h.Peek(fasthttp.HeaderAuthorization)) == 0:
		y.loginFail(ctx, p, "Please log in", nil)
		return
	}
	y.act(ctx, p)
}

// signedBy makes the key a time-limited signature was made with the
// request's credential, as YOURLS' yourls_check_signature_timestamp
// accepts one: the hash named by hash= (md5, sha256, sha384, sha512),
// else the one the signature's length says (md5 before YOURLS 1.7.7,
// sha256 since), of the timestamp and the token in either order, the
// timestamp within 12 hours of now. It answers a refusal itself.
func (y yourls) signedBy(ctx *fasthttp.RequestCtx, p params, timestamp string) bool {
	sig := strings.ToLower(p.get("signature"))
	algorithm := p.get("hash")
	if algorithm == "" {
		algorithm = map[int]string{32: "md5", 64: "sha256"}[len(sig)]
	}
	ok, busy := y.n.Sign(ctx, timestamp, sig, algorithm)
	switch {
	case busy:
		y.fail(ctx, p, fasthttp.StatusServiceUnavailable, "Too many signed requests to check at once: retry", nil)
		ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, "1")
	case !ok:
		y.loginFail(ctx, p, "Invalid username or password", nil)
	}
	return ok
}

// act runs the request's action, its credential in place.
func (y yourls) act(ctx *fasthttp.RequestCtx, p params) {
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
	default:
		const msg = "Unknown or missing \"action\" parameter"
		y.answer(ctx, p, fasthttp.StatusBadRequest, doc{{"errorCode", "400"}, {"message", msg}, {"simple", msg}})
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
			{"errorCode", "400"}, {"statusCode", "400"}, {"simple", ""},
		})
		return
	}
	if y.isShortURL(ctx, long) {
		y.answer(ctx, p, fasthttp.StatusBadRequest, doc{
			{"status", "fail"}, {"code", "error:noloop"}, {"message", "URL is a short URL"},
			{"errorCode", "400"}, {"statusCode", "400"}, {"simple", ""},
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
			// YOURLS 1.9.2+ answers a taken keyword with 400.
			msg := fmt.Sprintf("Short URL %s already exists in database or is reserved", keyword)
			if a.Status == fasthttp.StatusBadRequest {
				msg = a.Detail()
			}
			y.answer(ctx, p, fasthttp.StatusBadRequest, doc{
				{"status", "fail"}, {"code", "error:keyword"}, {"message", msg},
				{"errorCode", "400"}, {"statusCode", "400"}, {"simple", ""},
			})
		case a.Status == fasthttp.StatusBadRequest || a.Status == fasthttp.StatusRequestEntityTooLarge:
			y.answer(ctx, p, fasthttp.StatusBadRequest, doc{
				{"status", "fail"}, {"code", "error:nourl"}, {"message", "Missing or malformed URL: " + a.Detail()},
				{"errorCode", "400"}, {"statusCode", "400"}, {"simple", ""},
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
		// YOURLS 1.9.2+: 400, the existing link with its clicks, and
		// format=simple prints its short URL.
		short := strings.TrimPrefix(strings.TrimPrefix(l.ShortURL, "https://"), "http://")
		y.answer(ctx, p, fasthttp.StatusBadRequest, doc{
			{"status", "fail"}, {"code", "error:url"},
			{"url", append(linkDoc(&l), field{"clicks", strconv.FormatUint(l.ClickCount, 10)})},
			{"message", fmt.Sprintf("%s already exists in database (short URL: %s)", l.OriginalURL, short)},
			{"title", l.Title}, {"shorturl", l.ShortURL},
			{"errorCode", "400"}, {"statusCode", "400"}, {"simple", l.ShortURL},
		})
		return
	}
	y.answer(ctx, p, fasthttp.StatusOK, doc{
		{"url", linkDoc(&l)}, {"status", "success"}, {"message", l.OriginalURL + " added to database"},
		{"title", l.Title}, {"shorturl", l.ShortURL}, {"statusCode", 200}, {"simple", l.ShortURL},
	})
}

// isShortURL tells whether long is one of linkraft's short URLs that the
// key sees (YOURLS' error:noloop): a link's code, alone in the path, of
// the default domain or a registered one.
func (y yourls) isShortURL(ctx *fasthttp.RequestCtx, long string) bool {
	u, err := url.Parse(long)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	code := strings.TrimPrefix(u.Path, "/")
	if code == "" || strings.Contains(code, "/") {
		return false
	}
	domain := ""
	if !strings.EqualFold(u.Host, y.n.DefaultDomain(ctx)) {
		domain = strings.ToLower(u.Host)
	}
	return y.n.Call(ctx, "GET", linkPath(code, domain, ""), nil).OK()
}

// lookup reads the link of shorturl, a keyword or a whole short URL
// (https://brand.example/abc names abc in domain brand.example, or in the
// default domain when brand.example has no such link).
// An unknown link is answered by missing, with the keyword asked for.
func (y yourls) lookup(ctx *fasthttp.RequestCtx, p params, missing func(keyword string, a *Answer)) (Link, bool) {
	short := p.get("shorturl")
	code, domain := short, ""
	if u, err := url.Parse(short); err == nil && u.Host != "" {
		code = strings.Trim(u.Path, "/")
		if !strings.EqualFold(u.Host, y.n.DefaultDomain(ctx)) {
			domain = strings.ToLower(u.Host)
		}
	}
	if code == "" || strings.ContainsAny(code, "/?#") {
		missing(code, nil)
		return Link{}, false
	}
	a := y.n.Call(ctx, "GET", linkPath(code, domain, ""), nil)
	if domain != "" && (a.Status == fasthttp.StatusNotFound) {
		// Not a registered domain's link: the host may be another name of
		// the default domain (a node's own address, another base URL).
		a = y.n.Call(ctx, "GET", linkPath(code, "", ""), nil)
	}
	switch {
	case a.Status == fasthttp.StatusNotFound || a.Status == fasthttp.StatusGone:
		missing(code, &a)
		return Link{}, false
	case !a.OK():
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
	l, ok := y.lookup(ctx, p, func(keyword string, a *Answer) {
		// YOURLS' expand of an unknown keyword.
		y.answer(ctx, p, fasthttp.StatusNotFound, doc{
			{"keyword", keyword}, {"simple", "not found"}, {"message", "Error: short URL not found"}, {"errorCode", "404"},
		})
		if a != nil {
			a.PassHeaders(ctx)
		}
	})
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
	l, ok := y.lookup(ctx, p, func(_ string, a *Answer) {
		// yourls_get_link_stats of an unknown keyword.
		y.answer(ctx, p, fasthttp.StatusNotFound, doc{
			{"statusCode", 404}, {"message", "Error: short URL not found"}, {"simple", yourlsStatsSimple},
		})
		if a != nil {
			a.PassHeaders(ctx)
		}
	})
	if !ok {
		return
	}
	y.answer(ctx, p, fasthttp.StatusOK, doc{
		{"statusCode", 200}, {"message", "success"}, {"link", statsDoc(&l)}, {"simple", yourlsStatsSimple},
	})
}

// counts is how many links the key sees and their clicks, from linkraft's
// list's totals: YOURLS' db-stats.
func (y yourls) counts(ctx *fasthttp.RequestCtx, p params) (countedPage, bool) {
	return y.window(ctx, p, url.Values{}, 0, 0)
}

// window is up to limit links of linkraft's list for query from offset,
// with the totals, answering a failure in YOURLS' shape.
func (y yourls) window(ctx *fasthttp.RequestCtx, p params, query url.Values, offset, limit int) (countedPage, bool) {
	page, failed, err := listFrom(ctx, y.n, query, offset, limit)
	switch {
	case failed != nil:
		y.failNative(ctx, p, *failed)
		return page, false
	case err != nil:
		y.fail(ctx, p, fasthttp.StatusInternalServerError, err.Error(), nil)
		return page, false
	}
	return page, true
}

func totals(page *countedPage) doc {
	return doc{{"total_links", strconv.Itoa(page.Total)}, {"total_clicks", strconv.FormatUint(page.TotalClicks, 10)}}
}

// phpIntval is PHP's intval of a request argument: its leading
// decimal number, 0 when there is none.
func phpIntval(v string) int {
	v = strings.TrimLeft(v, " \t\n\r\v\f")
	end := 0
	if end < len(v) && (v[0] == '-' || v[0] == '+') {
		end++
	}
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	n, _ := strconv.Atoi(v[:end])
	return n
}

// maxStatsLinks bounds the links one action=stats lists: linkraft's
// limit on what an adapter reads for one answer.
const maxStatsLinks = maxScanPages * maxListPage

// stats is action=stats: filter top (most clicked; also any filter
// YOURLS does not know), bottom (least), last (newest) or rand, limit
// links from start. As YOURLS' API, no limit (or 0, or not a number)
// lists no links, only the totals.
func (y yourls) stats(ctx *fasthttp.RequestCtx, p params) {
	limit, start := min(max(phpIntval(p.get("limit")), 0), maxStatsLinks), max(phpIntval(p.get("start")), 0)
	all, ok := y.counts(ctx, p)
	if !ok {
		return
	}
	var links []Link
	if limit > 0 && start < all.Total {
		if links, ok = y.statsLinks(ctx, p, p.get("filter"), all.Total, start, limit); !ok {
			return
		}
	}
	out := doc{}
	for i := range links {
		out = append(out, field{"link_" + strconv.Itoa(i+1), statsDoc(&links[i])})
	}
	d := doc{}
	if len(out) > 0 {
		d = append(d, field{"links", out})
	}
	d = append(d, field{"stats", totals(&all)}, field{"statusCode", 200}, field{"message", "success"},
		field{"simple", yourlsStatsSimple})
	y.answer(ctx, p, fasthttp.StatusOK, d)
}

// statsLinks is the links action=stats lists of total, limit from start
// in filter's order, each through one page of linkraft's list.
func (y yourls) statsLinks(ctx *fasthttp.RequestCtx, p params, filter string, total, start, limit int) ([]Link, bool) {
	byClicks := url.Values{"sort": {"clicks"}} // most clicked first, newest first among equals
	switch filter {
	case "last": // linkraft's order: newest first
		page, ok := y.window(ctx, p, url.Values{}, start, limit)
		return page.Links, ok
	case "bottom": // the most clicked first, read from its end
		page, failed, err := listFromEnd(ctx, y.n, byClicks, start, limit)
		switch {
		case failed != nil:
			y.failNative(ctx, p, *failed)
			return nil, false
		case err != nil:
			y.fail(ctx, p, fasthttp.StatusInternalServerError, err.Error(), nil)
			return nil, false
		}
		return page.Links, true
	case "rand", "random":
		return y.randomLinks(ctx, p, total, min(limit, total-start))
	}
	page, ok := y.window(ctx, p, byClicks, start, limit) // top, and YOURLS' default
	return page.Links, ok
}

// randomLinks is n links of total drawn at random: each one link of
// linkraft's list at a random offset, or, when n is most of them, the
// whole list shuffled.
func (y yourls) randomLinks(ctx *fasthttp.RequestCtx, p params, total, n int) ([]Link, bool) {
	if n*4 > total {
		page, ok := y.window(ctx, p, url.Values{}, 0, min(total, maxStatsLinks))
		rand.Shuffle(len(page.Links), func(i, j int) { page.Links[i], page.Links[j] = page.Links[j], page.Links[i] })
		return page.Links[:min(n, len(page.Links))], ok
	}
	picked := map[int]bool{}
	var links []Link
	for len(picked) < n {
		at := rand.IntN(total)
		if picked[at] {
			continue
		}
		picked[at] = true
		page, ok := y.window(ctx, p, url.Values{}, at, 1)
		if !ok {
			return nil, false
		}
		links = append(links, page.Links...)
	}
	return links, true
}

func (y yourls) dbStats(ctx *fasthttp.RequestCtx, p params) {
	all, ok := y.counts(ctx, p)
	if !ok {
		return
	}
	y.answer(ctx, p, fasthttp.StatusOK, doc{
		{"db-stats", totals(&all)}, {"statusCode", 200}, {"simple", yourlsStatsSimple}, {"message", "success"},
	})
}

// version proves the key and answers YOURLS' version.
func (y yourls) version(ctx *fasthttp.RequestCtx, p params) {
	if a := y.n.Authenticate(ctx, false); !a.OK() {
		y.failNative(ctx, p, a)
		return
	}
	d := doc{{"version", YOURLSVersion}, {"simple", YOURLSVersion}}
	if p.get("db") == "1" {
		d = append(d, field{"db_version", "1"})
	}
	y.answer(ctx, p, fasthttp.StatusOK, d)
}

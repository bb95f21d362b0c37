// Package compat answers the APIs of the shorteners people move to
// linkraft from (Shlink, YOURLS, Kutt, Bitly), so that their clients keep
// working. Each API is a thin adapter: it turns the client's request into
// calls of linkraft's own routes (Native) and their answers back into the
// API's own shapes. Every check, key, scope, workspace, domain, rate
// limit, hashing budget and the read-after-write of linkraft's own API
// therefore hold here too, because they are the same code: an adapter
// never reads or writes the state itself.
package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// Native runs linkraft's own API for an adapter.
type Native interface {
	// Call runs linkraft's route for method and uri (a path with its
	// query) with a JSON body (nil for none) on the client's request ctx:
	// its credential, its address and its connection. ctx's response is
	// left empty for the adapter to write.
	Call(ctx *fasthttp.RequestCtx, method, uri string, body any) Answer
	// Authenticate checks the request's credential as linkraft's routes
	// do, from the headers alone; create says the route creates links,
	// which an operator may open to clients without a key. An adapter
	// calls it before it decodes a body, so that a client without a
	// valid key costs no more than the check.
	Authenticate(ctx *fasthttp.RequestCtx, create bool) Answer
	// Sign makes the key whose signature token a time-limited signature
	// (YOURLS' timestamp, signature and hash algorithm) was made with
	// the request's credential, for clients that do not name their key;
	// ok is false when no live key's was, busy when the node spent its
	// budget for such searches.
	Sign(ctx *fasthttp.RequestCtx, timestamp, signature, algorithm string) (ok, busy bool)
	// AllowPastExpiry lets the create or edit this request makes next
	// take an expiry in the past, which disables the link until an edit
	// enables it (Shlink's past validUntil), and reports whether it
	// did: not before every server of the cluster keeps such links
	// (fsm.LevelDisabled). linkraft's own API refuses a past expiry.
	AllowPastExpiry(ctx *fasthttp.RequestCtx) bool
	// Version is this build's version.
	Version() string
	// DefaultDomain is the host of the default domain's short URLs as the
	// request sees it (the base URL's, else the request's Host).
	DefaultDomain(ctx *fasthttp.RequestCtx) string
}

// Answer is what a native call answered.
type Answer struct {
	Status int
	Body   []byte
	// RetryAfter and Challenge are the answer's Retry-After and
	// WWW-Authenticate, which an adapter passes on.
	RetryAfter, Challenge string
}

// OK reports a 2xx answer.
func (a Answer) OK() bool { return a.Status >= 200 && a.Status < 300 }

// Decode reads the answer's JSON body into v.
func (a Answer) Decode(v any) error {
	if err := json.Unmarshal(a.Body, v); err != nil {
		return fmt.Errorf("decode linkraft's answer (%d): %w", a.Status, err)
	}
	return nil
}

// Detail is the message of an error answer (linkraft's problem+json).
func (a Answer) Detail() string {
	var p struct {
		Detail string `json:"detail"`
	}
	if json.Unmarshal(a.Body, &p) == nil && p.Detail != "" {
		return p.Detail
	}
	return fasthttp.StatusMessage(a.Status)
}

// PassHeaders copies the answer's Retry-After and WWW-Authenticate to the
// adapter's response, which must have been written already.
func (a Answer) PassHeaders(ctx *fasthttp.RequestCtx) {
	if a.RetryAfter != "" {
		ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, a.RetryAfter)
	}
	if a.Challenge != "" {
		ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, a.Challenge)
	}
}

// Link is a link as linkraft's own read and list answer it.
type Link struct {
	ID                uint64   `json:"id"`
	ShortCode         string   `json:"short_code"`
	ShortURL          string   `json:"short_url"`
	OriginalURL       string   `json:"original_url"`
	Workspace         string   `json:"workspace"`
	CreatedAt         string   `json:"created_at"`
	ExpiresAt         *string  `json:"expires_at"`
	Existing          bool     `json:"existing"`
	Domain            string   `json:"domain"`
	Title             string   `json:"title"`
	Tags              []string `json:"tags"`
	MaxVisits         *uint64  `json:"max_visits"`
	ValidSince        *string  `json:"valid_since"`
	PasswordProtected bool     `json:"password_protected"`
	ForwardQuery      bool     `json:"forward_query"`
	PublicStats       bool     `json:"public_stats"`
	Rules             []Rule   `json:"rules"`
	Crawlable         bool     `json:"crawlable"`
	ClickCount        uint64   `json:"click_count"`
	LastAccessedAt    *string  `json:"last_accessed_at"`
}

// Rule is one of a link's redirect rules as linkraft's API shows and
// takes it.
type Rule struct {
	When RuleWhen `json:"when"`
	URL  string   `json:"url"`
}

// RuleWhen is a rule's conditions; every one set must hold.
type RuleWhen struct {
	Device   string            `json:"device,omitempty"`
	Language string            `json:"language,omitempty"`
	Query    map[string]string `json:"query,omitempty"`
	Country  string            `json:"country,omitempty"`
	After    string            `json:"after,omitempty"`
	Before   string            `json:"before,omitempty"`
	Browser  string            `json:"browser,omitempty"`
	IP       []string          `json:"ip,omitempty"`
}

// Created is when the link was made.
func (l *Link) Created() time.Time { return parseTime(&l.CreatedAt) }

// Expires is when the link expires, zero for never.
func (l *Link) Expires() time.Time { return parseTime(l.ExpiresAt) }

// Since is the link's valid_since, zero for none.
func (l *Link) Since() time.Time { return parseTime(l.ValidSince) }

// Updated is when the link last changed as far as the read shows it: its
// creation (linkraft keeps when the target changed in the history, not in
// the read).
func (l *Link) Updated() time.Time { return l.Created() }

// parseTime reads one of linkraft's RFC 3339 timestamps; zero for none
// (linkraft writes them, so a bad one cannot happen).
func parseTime(s *string) time.Time {
	if s == nil {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339, *s)
	return t
}

// nativeTime is t as linkraft's API takes it.
func nativeTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// listPage is one page of linkraft's list.
type listPage struct {
	Links      []Link  `json:"links"`
	NextCursor *string `json:"next_cursor"`
}

// maxScanPages bounds how many pages of linkraft's list (of maxListPage
// links each) an adapter reads for one answer: a Shlink list filtered in
// ways linkraft's list cannot filter itself (scan), or one page of every
// link (itemsPerPage=-1).
const (
	maxScanPages = 100
	maxListPage  = 1000
)

// maxNativeOffset is the largest offset linkraft's list takes.
const maxNativeOffset = 1 << 30

// errTooManyLinks is a list an adapter refused to read whole.
var errTooManyLinks = fmt.Errorf("more than %d links match: narrow the list (search, tags, domain)", maxScanPages*maxListPage)

// countedPage is linkraft's list read from an offset: up to the links
// asked for, and how many links match the list's filters, with their
// clicks.
type countedPage struct {
	Links       []Link  `json:"links"`
	NextCursor  *string `json:"next_cursor"`
	Total       int     `json:"total"`
	TotalClicks uint64  `json:"total_clicks"`
}

// listFrom reads up to limit links (0: none, only the totals) of
// linkraft's list for query (its own filters: q, tag, domain, workspace,
// sort) from offset, with count=true. linkraft's list seeks to an offset
// and keeps its totals (docs/API.md, "Listing"), so this costs about a
// native page of limit links, not a read of every link. A failed call is
// returned as the answer, to be mapped by the adapter.
func listFrom(ctx *fasthttp.RequestCtx, n Native, query url.Values, offset, limit int) (countedPage, *Answer, error) {
	q := url.Values{"count": {"true"}}
	for k, v := range query {
		q[k] = v
	}
	offset = min(offset, maxNativeOffset) // no list is longer: past its end
	var out countedPage
	for first := true; ; first = false {
		q.Set("offset", strconv.Itoa(offset))
		q.Set("limit", strconv.Itoa(min(max(limit, 1), maxListPage)))
		a := n.Call(ctx, "GET", "/api/v1/urls?"+q.Encode(), nil)
		if !a.OK() {
			return out, &a, nil
		}
		var page countedPage
		if err := a.Decode(&page); err != nil {
			return out, nil, err
		}
		if first {
			out.Total, out.TotalClicks = page.Total, page.TotalClicks
			q.Del("count") // a search's total is counted by a walk: once is enough
		}
		taken := page.Links[:min(limit, len(page.Links))]
		out.Links = append(out.Links, taken...)
		limit -= len(taken)
		offset += len(taken)
		if limit <= 0 || page.NextCursor == nil {
			return out, nil, nil
		}
	}
}

// listFromEnd is listFrom counting offset from the list's end: its links
// read backwards (oldest first; least clicked first with sort=clicks).
// The total is counted first, without the sort, which costs nothing.
func listFromEnd(ctx *fasthttp.RequestCtx, n Native, query url.Values, offset, limit int) (countedPage, *Answer, error) {
	unsorted := url.Values{}
	for k, v := range query {
		if k != "sort" {
			unsorted[k] = v
		}
	}
	all, failed, err := listFrom(ctx, n, unsorted, 0, 0)
	if failed != nil || err != nil || offset >= all.Total || limit == 0 {
		return all, failed, err
	}
	from := max(all.Total-offset-limit, 0)
	page, failed, err := listFrom(ctx, n, query, from, all.Total-offset-from)
	slices.Reverse(page.Links)
	return page, failed, err
}

// scan reads every link linkraft's list gives for query, newest first
// unless query sorts, up to maxScanPages pages: only for what linkraft's
// list cannot filter itself (Shlink's tags in all mode, excluded tags,
// dates). A failed page is returned as the answer, to be mapped by the
// adapter.
func scan(ctx *fasthttp.RequestCtx, n Native, query url.Values) ([]Link, *Answer, error) {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Set("limit", strconv.Itoa(maxListPage))
	var all []Link
	for range maxScanPages {
		a := n.Call(ctx, "GET", "/api/v1/urls?"+q.Encode(), nil)
		if !a.OK() {
			return nil, &a, nil
		}
		var page listPage
		if err := a.Decode(&page); err != nil {
			return nil, nil, err
		}
		all = append(all, page.Links...)
		if page.NextCursor == nil {
			return all, nil, nil
		}
		q.Set("cursor", *page.NextCursor)
	}
	return nil, nil, errTooManyLinks
}

// findByID finds the link with linkraft's numeric id through linkraft's
// own list, whose cursor lists the links below an id: the one link below
// id+1 is the link, if the key sees it.
func findByID(ctx *fasthttp.RequestCtx, n Native, id uint64) (Link, Answer) {
	q := url.Values{"limit": {"1"}, "cursor": {strconv.FormatUint(id+1, 10)}}
	a := n.Call(ctx, "GET", "/api/v1/urls?"+q.Encode(), nil)
	if !a.OK() {
		return Link{}, a
	}
	var page listPage
	if err := a.Decode(&page); err != nil || len(page.Links) == 0 || page.Links[0].ID != id {
		return Link{}, Answer{Status: fasthttp.StatusNotFound}
	}
	return page.Links[0], a
}

// linkPath is linkraft's route of a link: its code and, outside the
// default domain, ?domain=.
func linkPath(code, domain, suffix string) string {
	p := "/api/v1/urls/" + url.PathEscape(code) + suffix
	if domain != "" {
		p += "?domain=" + url.QueryEscape(domain)
	}
	return p
}

// useKey makes key the request's credential for the native calls, as
// linkraft's X-Api-Key, for APIs that carry it elsewhere (a query
// argument, a bare Authorization header).
func useKey(ctx *fasthttp.RequestCtx, key string) {
	ctx.Request.Header.Del(fasthttp.HeaderAuthorization)
	ctx.Request.Header.Set("X-Api-Key", key)
}

// writeBody answers with a body of its own content type.
func writeBody(ctx *fasthttp.RequestCtx, status int, contentType string, body []byte) {
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.SetContentType(contentType)
	ctx.SetBody(body)
}

// marshal is JSON without HTML escaping, so URLs read as sent.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Every value an adapter answers is plain data.
		panic(fmt.Sprintf("compat: encode answer: %v", err))
	}
	return b.Bytes()
}

// credentialFirst runs h only once n accepted the request's credential,
// answering a refusal with fail in the API's own shape: a body is decoded
// only for a client linkraft would serve. create is Authenticate's.
func credentialFirst(n Native, create bool, fail func(*fasthttp.RequestCtx, Answer), h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if a := n.Authenticate(ctx, create); !a.OK() {
			fail(ctx, a)
			return
		}
		h(ctx)
	}
}

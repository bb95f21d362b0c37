package compat

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// Bitly's GET /v4/groups/{group_guid}/bitlinks (getBitlinksByGroup):
// a group's links, newest first, a page of size at a time. A page is
// found with page (Bitly 4.0.0: the page's number) or search_after (the
// current API: the token the previous page's next link carries, here the
// id of the last link shown, which linkraft's own list takes as its
// cursor); the filters are checked against each link as linkraft's list
// walks the group.

const (
	bitlyDefaultSize = 50
	bitlyMaxSize     = 1000
)

// bitlyListQuery is what a list asks for.
type bitlyListQuery struct {
	size, page int
	// after is search_after: only links below this id; 0 for none.
	after uint64
	// text is query or keyword, handed to linkraft's list as q.
	text string
	// tags: links with any of them (handed to linkraft's list when one).
	tags                        []string
	createdBefore, createdAfter time.Time
	// hostPath is hostname_path_query: the target's host and path hold it.
	hostPath string
	// expired and expiring are is_expired and has_expiration: "" for both.
	expired, expiring string
	// none: a filter only links with what linkraft never has would pass
	// (archived=on, deeplinks=on, …): the list is empty.
	none bool
}

// bitlyListParam reads one of the list's query parameters into q.
type bitlyListParam func(q *bitlyListQuery, values []string) *bitlyFieldError

// bitlyListParamOf is how getBitlinksByGroup's parameter name is
// honoured; false for a name it does not take, which is refused.
func bitlyListParamOf(name string) (bitlyListParam, bool) {
	switch name {
	case "size":
		return bitlyIntParam(name, 1, bitlyMaxSize, func(q *bitlyListQuery, n int) { q.size = n }), true
	case "page":
		return bitlyIntParam(name, 1, 1<<20, func(q *bitlyListQuery, n int) { q.page = n }), true
	case "search_after":
		return bitlySearchAfter, true
	case "query", "keyword":
		return bitlyTextParam(name), true
	case "hostname_path_query":
		return func(q *bitlyListQuery, v []string) *bitlyFieldError { q.hostPath = strings.ToLower(v[0]); return nil }, true
	case "created_before":
		return bitlyEpochParam(name, func(q *bitlyListQuery, t time.Time) { q.createdBefore = t }), true
	case "created_after":
		return bitlyEpochParam(name, func(q *bitlyListQuery, t time.Time) { q.createdAfter = t }), true
	case "tags", "tags[]":
		return bitlyTagsParam, true
	case "archived", "deeplinks", "domain_deeplinks", "custom_bitlink", "has_qr_codes":
		// linkraft links are never archived and have no deep links, custom
		// bitlinks or Bitly QR codes (their bitlinks show none): asking for
		// only those is an empty list, the rest is every link.
		return bitlyNeverParam(name), true
	case "is_expired":
		return bitlyStateParam(name, func(q *bitlyListQuery, s string) { q.expired = s }), true
	case "has_expiration":
		return bitlyStateParam(name, func(q *bitlyListQuery, s string) { q.expiring = s }), true
	}
	// What linkraft does not keep cannot be filtered on.
	why := map[string]string{
		"modified_after": "linkraft's links carry no modification time",
		"campaign_guid":  "linkraft has no campaigns",
		"channel_guid":   "linkraft has no channels",
		"launchpad_ids":  "linkraft has no launchpads",
		"encoding_login": "linkraft's links do not show who created them",
	}[name]
	if why == "" {
		return nil, false
	}
	return bitlyRefusedParam(name, why), true
}

func bitlyIntParam(field string, lo, hi int, set func(*bitlyListQuery, int)) bitlyListParam {
	return func(q *bitlyListQuery, v []string) *bitlyFieldError {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < lo || n > hi {
			return &bitlyFieldError{field, field + " must be a whole number from " + strconv.Itoa(lo) + " to " + strconv.Itoa(hi), "invalid"}
		}
		set(q, n)
		return nil
	}
}

func bitlySearchAfter(q *bitlyListQuery, v []string) *bitlyFieldError {
	n, err := strconv.ParseUint(v[0], 10, 64)
	if err != nil || n == 0 {
		return &bitlyFieldError{"search_after", "search_after takes only the token of a pagination next link", "invalid"}
	}
	q.after = n
	return nil
}

// bitlyTextParam reads query or keyword: linkraft's list searches one
// text, so two different ones are refused.
func bitlyTextParam(field string) bitlyListParam {
	return func(q *bitlyListQuery, v []string) *bitlyFieldError {
		if q.text != "" && q.text != v[0] {
			return &bitlyFieldError{field, "linkraft searches one text: send query or keyword, or the same in both", "not_supported"}
		}
		q.text = v[0]
		return nil
	}
}

// bitlyEpochParam reads a Unix time in seconds.
func bitlyEpochParam(field string, set func(*bitlyListQuery, time.Time)) bitlyListParam {
	return func(q *bitlyListQuery, v []string) *bitlyFieldError {
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || n < 0 {
			return &bitlyFieldError{field, field + " must be a Unix time in seconds", "invalid"}
		}
		set(q, time.Unix(n, 0))
		return nil
	}
}

func bitlyTagsParam(q *bitlyListQuery, v []string) *bitlyFieldError {
	for _, t := range v {
		if t != "" {
			q.tags = append(q.tags, t)
		}
	}
	return nil
}

// onOffBoth reads one of Bitly's on/off/both filters.
func onOffBoth(field, v string) (string, *bitlyFieldError) {
	switch v {
	case "on", "off", "both":
		return v, nil
	}
	return "", &bitlyFieldError{field, field + " must be on, off or both", "invalid"}
}

func bitlyNeverParam(field string) bitlyListParam {
	return func(q *bitlyListQuery, v []string) *bitlyFieldError {
		s, ferr := onOffBoth(field, v[0])
		if s == "on" {
			q.none = true
		}
		return ferr
	}
}

func bitlyStateParam(field string, set func(*bitlyListQuery, string)) bitlyListParam {
	return func(q *bitlyListQuery, v []string) *bitlyFieldError {
		s, ferr := onOffBoth(field, v[0])
		if s != "both" {
			set(q, s)
		}
		return ferr
	}
}

func bitlyRefusedParam(field, why string) bitlyListParam {
	return func(*bitlyListQuery, []string) *bitlyFieldError {
		return &bitlyFieldError{field, why + ": the list cannot be filtered on " + field, "not_supported"}
	}
}

// parseBitlyList reads a list's query; an empty value counts as absent.
func parseBitlyList(args *fasthttp.Args) (bitlyListQuery, *bitlyFieldError) {
	q := bitlyListQuery{size: bitlyDefaultSize, page: 1}
	values := map[string][]string{}
	var names []string
	args.VisitAll(func(k, v []byte) {
		name := string(k)
		if _, ok := values[name]; !ok {
			names = append(names, name)
		}
		values[name] = append(values[name], string(v))
	})
	for _, name := range names {
		v := values[name]
		if v[0] == "" && len(v) == 1 {
			continue
		}
		param, ok := bitlyListParamOf(name)
		if !ok {
			return q, &bitlyFieldError{name, "linkraft does not take " + name + " in a list of bitlinks", "invalid"}
		}
		if ferr := param(&q, v); ferr != nil {
			return q, ferr
		}
	}
	return q, nil
}

// native is linkraft's list query for the group's links: the filters
// linkraft's list applies itself.
func (q *bitlyListQuery) native(group string) url.Values {
	v := url.Values{"workspace": {group}}
	if q.text != "" {
		v.Set("q", q.text)
	}
	if len(q.tags) == 1 {
		v.Set("tag", q.tags[0])
	}
	return v
}

// keeps reports whether l passes the filters linkraft's list does not
// apply at now.
func (q *bitlyListQuery) keeps(l *Link, now time.Time) bool {
	created := l.Created()
	expires := l.Expires()
	expired := !expires.IsZero() && !expires.After(now)
	switch {
	case !q.createdBefore.IsZero() && !created.Before(q.createdBefore),
		!q.createdAfter.IsZero() && !created.After(q.createdAfter),
		len(q.tags) > 1 && !slices.ContainsFunc(l.Tags, func(t string) bool {
			return slices.ContainsFunc(q.tags, func(want string) bool { return strings.EqualFold(t, want) })
		}),
		q.hostPath != "" && !strings.Contains(hostAndPath(l.OriginalURL), q.hostPath),
		q.expired != "" && expired != (q.expired == "on"),
		q.expiring != "" && (l.ExpiresAt != nil) != (q.expiring == "on"):
		return false
	}
	return true
}

// hostAndPath is a target's host and path, lower case, without its
// query and fragment, as hostname_path_query searches it.
func hostAndPath(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return strings.ToLower(target)
	}
	return strings.ToLower(u.Host + u.Path)
}

// bitlyPage is one page of a list: its links, how many links passed the
// filters before them, and whether one more follows.
type bitlyPage struct {
	links  []Link
	before int
	more   bool
}

// walk reads linkraft's list of the group from the query's position and
// returns the page. A failed native page is returned as the answer, for
// Bitly's error shape.
func (b bitly) walk(ctx *fasthttp.RequestCtx, q *bitlyListQuery, group string, now time.Time) (bitlyPage, *Answer, error) {
	skip := 0
	if q.after == 0 {
		skip = (q.page - 1) * q.size
	}
	p := bitlyPage{links: []Link{}}
	native := q.native(group)
	native.Set("limit", strconv.Itoa(min(maxListPage, skip+q.size+1)))
	if q.after != 0 {
		native.Set("cursor", strconv.FormatUint(q.after, 10))
	}
	for range maxScanPages {
		a := b.n.Call(ctx, "GET", "/api/v1/urls?"+native.Encode(), nil)
		if !a.OK() {
			return p, &a, nil
		}
		var lp listPage
		if err := a.Decode(&lp); err != nil {
			return p, nil, err
		}
		for i := range lp.Links {
			switch l := &lp.Links[i]; {
			case !q.keeps(l, now):
			case p.before < skip:
				p.before++
			case len(p.links) == q.size:
				p.more = true
				return p, nil, nil
			default:
				p.links = append(p.links, *l)
			}
		}
		if lp.NextCursor == nil {
			return p, nil, nil
		}
		native.Set("cursor", *lp.NextCursor)
		native.Set("limit", strconv.Itoa(maxListPage))
	}
	return p, nil, errTooManyLinks
}

// bitlyPagination is Bitly's Pagination: links to the pages before and
// after ("" for none), the page's size and number, and the number of
// links, given where it is known without counting the group (on the last
// page reached by number).
type bitlyPagination struct {
	Prev        string `json:"prev"`
	Next        string `json:"next"`
	Size        int    `json:"size"`
	Page        int    `json:"page"`
	Total       *int   `json:"total,omitempty"`
	SearchAfter string `json:"search_after,omitempty"`
}

// pagination is the Pagination of page p. self is the URL of the
// request without its query, and query its query, read before any native
// call (which reuses the request).
func (q *bitlyListQuery) pagination(self string, query url.Values, p bitlyPage) bitlyPagination {
	out := bitlyPagination{Size: q.size, Page: q.page}
	pageURL := func(number int, after *Link) string {
		v := url.Values{}
		for k, vals := range query {
			v[k] = vals
		}
		v.Del("search_after")
		v.Set("page", strconv.Itoa(number))
		if after != nil {
			v.Set("search_after", strconv.FormatUint(after.ID, 10))
		}
		return self + "?" + v.Encode()
	}
	if q.page > 1 {
		out.Prev = pageURL(q.page-1, nil)
	}
	switch {
	case p.more:
		last := &p.links[len(p.links)-1]
		out.Next = pageURL(q.page+1, last)
		out.SearchAfter = strconv.FormatUint(last.ID, 10)
	case q.after == 0:
		// The walk began at the first link: it counted them all.
		total := p.before + len(p.links)
		out.Total = &total
	}
	return out
}

// requestPage is the request's URL without its query, and its query.
func requestPage(ctx *fasthttp.RequestCtx) (string, url.Values) {
	scheme := "https://"
	if !ctx.IsTLS() {
		scheme = "http://"
	}
	query := url.Values{}
	ctx.QueryArgs().VisitAll(func(k, v []byte) { query.Add(string(k), string(v)) })
	return scheme + string(ctx.Host()) + string(ctx.Path()), query
}

// listGroup is GET /v4/groups/{group_guid}/bitlinks.
func (b bitly) listGroup(ctx *fasthttp.RequestCtx) {
	group, _ := ctx.UserValue("guid").(string)
	self, query := requestPage(ctx)
	q, ferr := parseBitlyList(ctx.QueryArgs())
	k, ok := b.ownKey(ctx)
	switch {
	case !ok:
		return
	case !k.everyWorkspace() && !slices.Contains(k.Workspaces, group):
		failBitly(ctx, fasthttp.StatusNotFound, "NOT_FOUND", "no group "+group+" for this token: groups are the key's workspaces")
		return
	case ferr != nil:
		invalidArg(ctx, ferr.Field, ferr.Message)
		return
	}
	p := bitlyPage{links: []Link{}}
	if !q.none {
		var failed *Answer
		var err error
		p, failed, err = b.walk(ctx, &q, group, time.Now())
		switch {
		case failed != nil:
			b.failNative(ctx, *failed)
			return
		case err != nil:
			failBitly(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST",
				"linkraft read the group's links as far as it reads for one page without reaching it: follow the previous page's next link (search_after), or narrow the filters")
			return
		}
	}
	out := make([]bitlink, len(p.links))
	for i := range p.links {
		out[i] = b.bitlinkOf(ctx, &p.links[i])
	}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(map[string]any{
		"links": out, "pagination": q.pagination(self, query, p),
	}))
}

package fsm

import (
	"cmp"
	"iter"
	"slices"
	"strings"
	"weak"
)

// Filter narrows a link list. The zero Filter keeps every link.
type Filter struct {
	Tag    string // links with this tag, compared case-insensitively
	Text   string // links whose code, target or title holds this, case-insensitively
	Domain string // links in this domain ("" with AnyDomain false: the default one)
	// AnyDomain lists links of every domain; Domain is then ignored.
	AnyDomain bool
	// Domains, when not nil, keeps only links in these domains (those of a
	// key limited to domains).
	Domains []string
	// Author, when not "", keeps only the links the key of this id created
	// (authors.go): a list then walks that key's links, not its workspaces'.
	Author string
}

func (q *Filter) empty() bool {
	return q.Tag == "" && q.Text == "" && q.AnyDomain && q.Domains == nil && q.Author == ""
}

// keeps reports whether the link passes the filter.
func (q *Filter) keeps(l *Link) bool {
	if q.Author != "" && l.Author != q.Author {
		return false
	}
	if !q.AnyDomain && l.Domain != q.Domain || q.Domains != nil && !slices.Contains(q.Domains, l.Domain) {
		return false
	}
	if q.Tag != "" && !l.Options.HasTag(q.Tag) {
		return false
	}
	if q.Text == "" {
		return true
	}
	title := ""
	if l.Options != nil {
		title = l.Options.Title
	}
	return containsFold(l.Code, q.Text) || containsFold(l.URL, q.Text) || containsFold(title, q.Text)
}

// containsFold reports whether s holds sub, ASCII letters compared without
// case (the texts searched are codes, URLs and titles; a title's non-ASCII
// letters match exactly).
func containsFold(s, sub string) bool {
	if len(sub) > len(s) {
		return false
	}
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// Page is one page of a list and, when it was asked for, how many links
// pass the list's filter on every page (Total), with their clicks.
type Page struct {
	Links []Link
	Next  uint64 // the cursor of the next page (0: none)
	Total ListTotal
}

// Search returns up to limit links of the workspaces (nil: all of them)
// that pass the filter, newest first below the id before (0: from the
// newest), and the cursor of the next page (0: none).
func (f *FSM) Search(workspaces []string, q Filter, before uint64, limit int) (links []Link, next uint64) {
	if q.empty() {
		return f.List(workspaces, before, limit)
	}
	p := f.ListPage(workspaces, q, before, 0, limit, false)
	return p.Links, p.Next
}

// ListPage returns up to limit links of the workspaces (nil: all of them)
// that pass the filter, newest first below the id before (0: from the
// newest) and past the first offset of those, the cursor of the next page
// and, with count, the Total of the links that pass the filter.
//
// Its cost: an offset into a list that keeps every link of its workspaces
// (no tag, text or narrower domain, or one every link passes) is a seek,
// a few binary searches per workspace; otherwise the list walks the
// links it passes over. The total is read from counts kept per
// workspace, domain and tag, except with a text filter: then it walks
// every link of the workspaces, as a search that finds few links does
// (docs/API.md, "What a list costs"). With an author it walks only that
// key's links, and counts them so: no count is kept per key.
func (f *FSM) ListPage(workspaces []string, q Filter, before uint64, offset, limit int, count bool) Page {
	workspaces = uniqueNames(workspaces)
	f.mu.RLock()
	defer f.mu.RUnlock()
	var page Page
	walkCount := count && (q.Text != "" || q.Author != "") // no count is kept of either
	if count && !walkCount {
		page.Total = f.s.counts.total(f.workspaceIDs(workspaces), q.domainSet(), q.Tag)
	}
	// A text filter's total counts the links above the cursor too: its
	// walk starts at the newest and lists only those below before.
	var above uint64
	if walkCount {
		above, before = before, 0
	}
	w := f.newestFirst(workspaces, q.Author, before)
	if q.Text == "" && q.Tag == "" && (q.domainSet() == nil || q.Author == "" && f.keepsEvery(workspaces, &q)) {
		w.skip(offset)
		offset = 0
	}
	limit = max(limit, 1)
	for p, ok := w.next(); ok; p, ok = w.next() {
		l := walkedLink(f.s, p)
		if !q.keeps(&l) {
			continue
		}
		if walkCount {
			page.Total.Links++
			page.Total.Clicks += l.Clicks
		}
		switch {
		case above != 0 && l.ID >= above:
		case offset > 0:
			offset--
		case len(page.Links) < limit:
			page.Links = append(page.Links, l)
		case page.Next == 0:
			page.Next = page.Links[limit-1].ID // another link follows the page
			if !walkCount {
				return page
			}
		}
	}
	return page
}

// uniqueNames is names without repeats (nil stays nil: every workspace).
func uniqueNames(names []string) []string {
	if names == nil {
		return nil
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// workspaceIDs is the interned numbers of the named workspaces (nil:
// every one), unknown names left out.
func (f *FSM) workspaceIDs(names []string) []uint32 {
	lt := &f.s.links
	if names == nil {
		ids := make([]uint32, len(lt.workspaces.names))
		for i := range ids {
			ids[i] = uint32(i)
		}
		return ids
	}
	var ids []uint32
	for _, n := range names {
		if id, ok := lt.workspaceID(n); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// domainSet is the domains the filter keeps, nil for any.
func (q *Filter) domainSet() []string {
	var set []string
	switch {
	case q.AnyDomain && q.Domains == nil:
		return nil
	case q.AnyDomain:
		set = slices.Clone(q.Domains)
	case q.Domains == nil || slices.Contains(q.Domains, q.Domain):
		set = []string{q.Domain}
	default:
		return []string{}
	}
	slices.Sort(set)
	return slices.Compact(set)
}

// keepsEvery reports, from the counts, whether every link of the
// workspaces is in a domain q keeps: a key limited to domains, say, that
// lists workspaces holding only those.
func (f *FSM) keepsEvery(workspaces []string, q *Filter) bool {
	ids := f.workspaceIDs(workspaces)
	return f.s.counts.total(ids, q.domainSet(), "").Links == f.s.counts.total(ids, nil, "").Links
}

// ClickedPage is MostClicked with, when count, the page's Total.
func (f *FSM) ClickedPage(workspaces []string, q Filter, offset, limit int, count bool) (page Page, next int) {
	workspaces = uniqueNames(workspaces)
	f.mu.RLock()
	defer f.mu.RUnlock()
	var all []Link
	w := f.newestFirst(workspaces, q.Author, 0)
	for p, ok := w.next(); ok; p, ok = w.next() {
		if l := walkedLink(f.s, p); q.keeps(&l) {
			all = append(all, l)
			page.Total.Links++
			page.Total.Clicks += l.Clicks
		}
	}
	if !count {
		page.Total = ListTotal{}
	}
	slices.SortStableFunc(all, func(a, b Link) int { return cmp.Compare(b.Clicks, a.Clicks) })
	if offset >= len(all) {
		return page, 0
	}
	end := min(offset+limit, len(all))
	if end < len(all) {
		next = end
	}
	page.Links = all[offset:end]
	return page, next
}

// MostClicked returns links of the workspaces that pass the filter, most
// clicked first (newest first among equals), skipping the first offset;
// next is the offset of the following page, 0 when there is none.
func (f *FSM) MostClicked(workspaces []string, q Filter, offset, limit int) (links []Link, next int) {
	page, next := f.ClickedPage(workspaces, q, offset, limit, false)
	return page.Links, next
}

// TagCount is one tag with how many links carry it and their clicks.
type TagCount struct {
	Tag    string // lower case: tags are compared without case
	Links  int
	Clicks uint64
}

// Tags counts the tags of the workspaces' links (nil: every workspace),
// by tag; domains, when not nil, keeps only links in those domains. It
// reads the counts kept per workspace, domain and tag, not the links.
func (f *FSM) Tags(workspaces, domains []string) []TagCount {
	return f.TagsOf(workspaces, domains, "")
}

// TagsOf is Tags of the links the key author created ("": any). With an
// author it walks that key's links: no count is kept per key.
func (f *FSM) TagsOf(workspaces, domains []string, author string) []TagCount {
	workspaces = uniqueNames(workspaces)
	if len(domains) > 1 { // a domain named twice counts once
		domains = slices.Compact(slices.Sorted(slices.Values(domains)))
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	tagged := f.s.counts.tagCounts(f.workspaceIDs(workspaces), domains)
	if author != "" {
		tagged = f.authorTagCounts(workspaces, domains, author)
	}
	counts := map[string]*TagCount{}
	for tag, t := range tagged {
		c := counts[tag]
		if c == nil {
			c = &TagCount{Tag: tag}
			counts[tag] = c
		}
		c.Links += t.Links
		c.Clicks += t.Clicks
	}
	out := make([]TagCount, 0, len(counts))
	for _, c := range counts {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b TagCount) int { return cmp.Compare(a.Tag, b.Tag) })
	return out
}

// StateVersion identifies the state a read saw: it changes with every
// applied entry and every restore, so what a reader derives from the
// state holds while the version is the same (robots.txt is kept so).
// Versions compare with ==.
type StateVersion struct {
	applied uint64
	// state tells a restored state from the one it replaced: both read
	// applied 0 until the next entry. Weak, so that a version a cache
	// keeps never keeps a replaced state's memory.
	state weak.Pointer[state]
}

// StateVersion is the state's version now.
func (f *FSM) StateVersion() StateVersion {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.version()
}

// version is StateVersion; f.mu is held.
func (f *FSM) version() StateVersion {
	return StateVersion{applied: f.applied.Load(), state: weak.Make(f.s)}
}

// Crawlable is what robots.txt allows of a domain.
type Crawlable struct {
	Codes []string // sorted, at most the limit asked
	// Until is when the answer may change without a write: the first
	// expiry among the codes listed, 0 when none expires.
	Until int64
	// Version is the state the answer was read from.
	Version StateVersion
}

// Crawlable is the codes, sorted, of at most limit live, unexpired
// crawlable links of domain ("" for the default one) at time now: what
// robots.txt allows. It reads the crawlable index (crawlable.go) up to the
// limit: the domain's first crawlable links in code order, whatever the
// number of links.
func (f *FSM) Crawlable(domain string, limit int, now int64) Crawlable {
	f.mu.RLock()
	defer f.mu.RUnlock()
	codes, until := f.s.links.crawlable(domain, limit, now)
	return Crawlable{Codes: codes, Until: until, Version: f.version()}
}

// CrawlableCodes is Crawlable's codes.
func (f *FSM) CrawlableCodes(domain string, limit int, now int64) []string {
	return f.Crawlable(domain, limit, now).Codes
}

// authorTagCounts yields, per live link the key author created in the
// workspaces and domains (nil: any), each of its tags once with the
// link's clicks, as listCounts.tagged counts them.
func (f *FSM) authorTagCounts(workspaces, domains []string, author string) iter.Seq2[string, ListTotal] {
	return func(yield func(string, ListTotal) bool) {
		for _, list := range f.s.links.listsOf(workspaces, author) {
			for p := range list.values() {
				l := f.s.links.counted(p, &f.s.opts)
				if domains != nil && !slices.Contains(domains, l.domain) {
					continue
				}
				for i, tag := range l.tags {
					if slices.ContainsFunc(l.tags[:i], func(t string) bool { return strings.EqualFold(t, tag) }) {
						continue
					}
					if !yield(strings.ToLower(tag), ListTotal{Links: 1, Clicks: l.clicks}) {
						return
					}
				}
			}
		}
	}
}

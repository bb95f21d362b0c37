package fsm

import (
	"cmp"
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
}

func (q *Filter) empty() bool { return q.Tag == "" && q.Text == "" && q.AnyDomain && q.Domains == nil }

// keeps reports whether the link passes the filter.
func (q *Filter) keeps(l *Link) bool {
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

// Search returns up to limit links of the workspaces (nil: all of them)
// that pass the filter, newest first below the id before (0: from the
// newest), and the cursor of the next page (0: none). It walks the
// workspaces' links, so it costs their number, not the page's.
func (f *FSM) Search(workspaces []string, q Filter, before uint64, limit int) (links []Link, next uint64) {
	if q.empty() {
		return f.List(workspaces, before, limit)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, p := range f.s.links.positionsNewestFirst(workspaces) {
		l := f.s.link(p)
		if before != 0 && l.ID >= before || !q.keeps(&l) {
			continue
		}
		if len(links) == limit {
			return links, links[limit-1].ID
		}
		links = append(links, l)
	}
	return links, 0
}

// MostClicked returns links of the workspaces that pass the filter, most
// clicked first (newest first among equals), skipping the first offset;
// next is the offset of the following page, 0 when there is none.
func (f *FSM) MostClicked(workspaces []string, q Filter, offset, limit int) (links []Link, next int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var all []Link
	for _, p := range f.s.links.positionsNewestFirst(workspaces) {
		if l := f.s.link(p); q.keeps(&l) {
			all = append(all, l)
		}
	}
	slices.SortStableFunc(all, func(a, b Link) int { return cmp.Compare(b.Clicks, a.Clicks) })
	if offset >= len(all) {
		return nil, 0
	}
	end := min(offset+limit, len(all))
	if end < len(all) {
		next = end
	}
	return all[offset:end], next
}

// TagCount is one tag with how many links carry it and their clicks.
type TagCount struct {
	Tag    string // lower case: tags are compared without case
	Links  int
	Clicks uint64
}

// Tags counts the tags of the workspaces' links (nil: every workspace),
// by tag; domains, when not nil, keeps only links in those domains.
func (f *FSM) Tags(workspaces, domains []string) []TagCount {
	f.mu.RLock()
	defer f.mu.RUnlock()
	counts := map[string]*TagCount{}
	for _, p := range f.s.links.positionsNewestFirst(workspaces) {
		o := f.s.opts.get(p)
		if o == nil || domains != nil && !slices.Contains(domains, f.s.links.domainIndex(f.s.links.recs.text.code(f.s.links.recs.at(p)))) {
			continue
		}
		for _, t := range o.Tags {
			t = strings.ToLower(t)
			c := counts[t]
			if c == nil {
				c = &TagCount{Tag: t}
				counts[t] = c
			}
			c.Links++
			c.Clicks += f.s.links.recs.at(p).clicks
		}
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
	// expiry among the domain's crawlable links, 0 when none expires.
	Until int64
	// Version is the state the answer was read from.
	Version StateVersion
}

// Crawlable is the codes, sorted, of at most limit live, unexpired
// crawlable links of domain ("" for the default one) at time now: what
// robots.txt allows. It reads only the links with options, but all of
// them: a reader serving it often keeps it (see Crawlable.Until and
// Version).
func (f *FSM) Crawlable(domain string, limit int, now int64) Crawlable {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := Crawlable{Version: f.version()}
	for p, o := range f.s.opts.all() {
		r := f.s.links.recs.at(p)
		if !o.Crawlable || !r.live() || r.expired(now) {
			continue
		}
		d, code := SplitCode(f.s.links.recs.text.code(r))
		if d != domain {
			continue
		}
		out.Codes = append(out.Codes, code)
		if r.expiresAt != 0 && (out.Until == 0 || r.expiresAt < out.Until) {
			out.Until = r.expiresAt
		}
	}
	slices.Sort(out.Codes)
	out.Codes = out.Codes[:min(len(out.Codes), limit)]
	return out
}

// CrawlableCodes is Crawlable's codes.
func (f *FSM) CrawlableCodes(domain string, limit int, now int64) []string {
	return f.Crawlable(domain, limit, now).Codes
}

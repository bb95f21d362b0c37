package fsm

import (
	"iter"
	"slices"
	"strings"
)

// hashIndex maps keys to positions without storing the keys: each slot
// holds 31 bits of the key's hash and the position, and a lookup confirms
// a candidate by comparing the key kept where the position points.
// Open addressing with linear probing; deletion shifts later entries back
// instead of leaving tombstones. At most 3/4 full, a slot of 8 bytes costs
// 11-21 bytes per entry, against ~40 for a Go map from a string key, and
// holds no pointers for the garbage collector to follow.
//
// The caller hashes and compares; the index never sees a key.
type hashIndex struct {
	slots []uint64 // used bit | 31 hash bits | 32-bit position; 0 is empty
	used  int
}

const (
	minIndexSlots = 64
	slotUsed      = 1 << 63
	hashBits      = 1<<31 - 1
)

func slot(h, p uint32) uint64          { return slotUsed | uint64(h&hashBits)<<32 | uint64(p) }
func slotHash(s uint64) uint32         { return uint32(s>>32) & hashBits }
func slotPos(s uint64) uint32          { return uint32(s) }
func (x *hashIndex) mask() int         { return len(x.slots) - 1 }
func (x *hashIndex) home(h uint32) int { return int(h&hashBits) & x.mask() }

// lookup returns the first position with hash h for which match is true.
func (x *hashIndex) lookup(h uint32, match func(p uint32) bool) (uint32, bool) {
	if len(x.slots) == 0 {
		return 0, false
	}
	for i := x.home(h); ; i = (i + 1) & x.mask() {
		s := x.slots[i]
		if s == 0 {
			return 0, false
		}
		if slotHash(s) == h&hashBits && match(slotPos(s)) {
			return slotPos(s), true
		}
	}
}

// insert adds position p under hash h. The caller makes sure no entry
// for the same key exists.
func (x *hashIndex) insert(h, p uint32) {
	if (x.used+1)*4 > len(x.slots)*3 {
		x.grow()
	}
	x.place(slot(h, p))
	x.used++
}

func (x *hashIndex) place(s uint64) {
	i := x.home(slotHash(s))
	for x.slots[i] != 0 {
		i = (i + 1) & x.mask()
	}
	x.slots[i] = s
}

func (x *hashIndex) grow() { x.resize(max(minIndexSlots, 2*len(x.slots))) }

// reserve makes room for n more entries at once: the size that growing
// one entry at a time would come to.
func (x *hashIndex) reserve(n int) {
	size := max(minIndexSlots, len(x.slots))
	for (x.used+n)*4 > size*3 {
		size *= 2
	}
	if size > len(x.slots) {
		x.resize(size)
	}
}

func (x *hashIndex) resize(size int) {
	old := x.slots
	x.slots = make([]uint64, size)
	for _, s := range old {
		if s != 0 {
			x.place(s)
		}
	}
}

// remove deletes the entry for position p under hash h, if there is one.
func (x *hashIndex) remove(h, p uint32) {
	if len(x.slots) == 0 {
		return
	}
	want := slot(h, p)
	i := x.home(h)
	for x.slots[i] != want {
		if x.slots[i] == 0 {
			return
		}
		i = (i + 1) & x.mask()
	}
	x.used--
	// Shift back every later entry of the run that may move into the hole
	// (one whose home is not cyclically within (hole, its slot]), so that
	// lookups never stop early at an empty slot.
	hole := i
	for j := (i + 1) & x.mask(); x.slots[j] != 0; j = (j + 1) & x.mask() {
		home := x.home(slotHash(x.slots[j]))
		if (j-home)&x.mask() >= (j-hole)&x.mask() {
			x.slots[hole] = x.slots[j]
			hole = j
		}
	}
	x.slots[hole] = 0
}

// len is the number of entries.
func (x *hashIndex) len() int { return x.used }

// listCounts is how many live links each workspace holds, in each domain
// and with each tag, and their clicks: what a list's total reads instead
// of walking the links. The state keeps it as links are created, removed,
// retagged and clicked, and derives it anew after a restore (countsOf),
// so no snapshot holds it and every build's snapshot restores.
//
// A click changes the counts of its link's workspace, held in a slice by
// workspace number so that the click path hashes nothing for a link in
// the default domain without tags; other domains and tags are maps.
type listCounts struct {
	ws   []wsCounts
	tags map[tagKey]ListTotal
}

// wsCounts is one workspace's counts.
type wsCounts struct {
	all     ListTotal            // in every domain
	home    ListTotal            // in the default domain
	domains map[string]ListTotal // in each other domain that holds links
}

// tagKey names the count of a workspace's links with a tag (lower case),
// in a domain or in every domain (anyDomain).
type tagKey struct {
	ws        uint32
	domain    string
	tag       string
	anyDomain bool
}

// ListTotal is a number of links and the sum of their clicks.
type ListTotal struct {
	Links  int
	Clicks uint64
}

// change is what one write does to a count: links and clicks more, or
// fewer (less).
type change struct {
	links  int
	clicks uint64
	less   bool
}

func (t *ListTotal) apply(c change) {
	if c.less {
		t.Links -= c.links
		t.Clicks -= c.clicks
		return
	}
	t.Links += c.links
	t.Clicks += c.clicks
}

func newListCounts() listCounts { return listCounts{tags: map[tagKey]ListTotal{}} }

// link changes the counts of workspace ws and domain.
func (c *listCounts) link(ws uint32, domain string, ch change) {
	for int(ws) >= len(c.ws) {
		c.ws = append(c.ws, wsCounts{})
	}
	w := &c.ws[ws]
	w.all.apply(ch)
	if domain == "" {
		w.home.apply(ch)
		return
	}
	if w.domains == nil {
		w.domains = map[string]ListTotal{}
	}
	t, ok := w.domains[domain]
	if !ok {
		domain = strings.Clone(domain) // a view of a record's code
	}
	t.apply(ch)
	if t.Links <= 0 {
		delete(w.domains, domain)
		return
	}
	w.domains[domain] = t
}

// tagged changes the counts of each of tags in workspace ws and domain,
// in that domain and in every domain. A tag written twice in other
// letter case counts once, as Filter matches it.
func (c *listCounts) tagged(ws uint32, domain string, tags []string, ch change) {
	for i, tag := range tags {
		if slices.ContainsFunc(tags[:i], func(t string) bool { return strings.EqualFold(t, tag) }) {
			continue
		}
		tag = strings.ToLower(tag)
		c.tag(tagKey{ws: ws, domain: domain, tag: tag}, ch)
		c.tag(tagKey{ws: ws, tag: tag, anyDomain: true}, ch)
	}
}

func (c *listCounts) tag(k tagKey, ch change) {
	t, ok := c.tags[k]
	if !ok {
		k.domain, k.tag = strings.Clone(k.domain), strings.Clone(k.tag)
	}
	t.apply(ch)
	if t.Links <= 0 {
		delete(c.tags, k)
		return
	}
	c.tags[k] = t
}

// total is the count of the links in workspaces wss, in domains (nil:
// any) with tag ("": any). Its cost is the number of workspaces times
// that of domains, never that of links.
func (c *listCounts) total(wss []uint32, domains []string, tag string) ListTotal {
	tag = strings.ToLower(tag)
	var sum ListTotal
	add := func(t ListTotal) { sum.apply(change{links: t.Links, clicks: t.Clicks}) }
	for _, ws := range wss {
		if int(ws) >= len(c.ws) {
			continue
		}
		w := &c.ws[ws]
		switch {
		case domains == nil && tag == "":
			add(w.all)
		case domains == nil:
			add(c.tags[tagKey{ws: ws, tag: tag, anyDomain: true}])
		}
		for _, d := range domains {
			switch {
			case tag != "":
				add(c.tags[tagKey{ws: ws, domain: d, tag: tag}])
			case d == "":
				add(w.home)
			default:
				add(w.domains[d])
			}
		}
	}
	return sum
}

// tagCounts yields each tag's count in workspaces wss and domains (nil:
// any), once per workspace and domain that holds it. It reads every tag
// count, so its cost is the number of tags times the workspaces and
// domains that use them.
func (c *listCounts) tagCounts(wss []uint32, domains []string) iter.Seq2[string, ListTotal] {
	listed := map[uint32]bool{}
	for _, ws := range wss {
		listed[ws] = true
	}
	return func(yield func(string, ListTotal) bool) {
		for k, t := range c.tags {
			kept := k.anyDomain == (domains == nil) && (domains == nil || slices.Contains(domains, k.domain))
			if listed[k.ws] && kept && !yield(k.tag, t) {
				return
			}
		}
	}
}

// countedLink is what the counts know of a live link.
type countedLink struct {
	ws     uint32
	domain string
	tags   []string
	clicks uint64
}

// counted is what the counts know of the live link at p, its tags in
// opts.
func (lt *linkTable) counted(p uint64, opts *optionTable) countedLink {
	return lt.countedOf(lt.recs.at(p), opts)
}

// countedOf is counted of the link whose record the caller has read.
func (lt *linkTable) countedOf(r *record, opts *optionTable) countedLink {
	l := countedLink{ws: r.workspace, domain: lt.domainIndex(r.code), clicks: r.clicks}
	if r.flags&flagOptions != 0 {
		if o := opts.of(r); o != nil {
			l.tags = o.Tags
		}
	}
	return l
}

// add counts a live link, with its tags and clicks; remove takes it out.
func (c *listCounts) add(l countedLink) { c.change(l, l.tags, change{links: 1, clicks: l.clicks}) }
func (c *listCounts) remove(l countedLink) {
	c.change(l, l.tags, change{links: 1, clicks: l.clicks, less: true})
}

// retag moves a live link from the counts of its tags to those of tags.
func (c *listCounts) retag(l countedLink, tags []string) {
	c.tagged(l.ws, l.domain, l.tags, change{links: 1, clicks: l.clicks, less: true})
	c.tagged(l.ws, l.domain, tags, change{links: 1, clicks: l.clicks})
}

// clicked counts n more clicks (forgot: n fewer) of a live link.
func (c *listCounts) clicked(l countedLink, n uint64, forgot bool) {
	if n > 0 {
		c.change(l, l.tags, change{clicks: n, less: forgot})
	}
}

// change applies ch to the counts of l's workspace and domain, and of tags.
func (c *listCounts) change(l countedLink, tags []string, ch change) {
	c.link(l.ws, l.domain, ch)
	c.tagged(l.ws, l.domain, tags, ch)
}

// countsOf derives the counts of every live link of st: after a restore.
func countsOf(st *state) listCounts {
	c := newListCounts()
	st.links.recs.scan(true, func(r *record) bool {
		if r.live() {
			c.add(st.links.countedOf(r, &st.opts))
		}
		return true
	})
	return c
}

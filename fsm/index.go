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

func (x *hashIndex) grow() {
	old := x.slots
	x.slots = make([]uint64, max(minIndexSlots, 2*len(old)))
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
// retagged and clicked, and derives it anew after a restore (countAll),
// so no snapshot holds it and every build's snapshot restores.
type listCounts struct {
	cells map[countKey]ListTotal
}

// countKey names one count: a workspace's links in a domain, or in every
// domain (anyDomain), all of them or those with a tag (lower case).
type countKey struct {
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

func newListCounts() listCounts { return listCounts{cells: map[countKey]ListTotal{}} }

// keys is every count one link with these tags takes part in. A tag
// written twice in other letter case counts once, as Filter matches it.
func countKeys(ws uint32, domain string, tags []string) []countKey {
	keys := make([]countKey, 0, 2+2*len(tags))
	keys = append(keys, countKey{ws: ws, domain: domain}, countKey{ws: ws, anyDomain: true})
	return append(keys, tagKeys(ws, domain, tags)...)
}

// tagKeys is the counts of a link's tags alone.
func tagKeys(ws uint32, domain string, tags []string) []countKey {
	var keys []countKey
	seen := make([]string, 0, len(tags))
	for _, t := range tags {
		t = strings.ToLower(t)
		if slices.Contains(seen, t) {
			continue
		}
		seen = append(seen, t)
		keys = append(keys, countKey{ws: ws, domain: domain, tag: t}, countKey{ws: ws, anyDomain: true, tag: t})
	}
	return keys
}

// add counts links more links with clicks more clicks under keys.
func (c *listCounts) add(keys []countKey, links int, clicks uint64) {
	for _, k := range keys {
		t := c.cells[k]
		t.Links += links
		t.Clicks += clicks
		if _, ok := c.cells[k]; !ok {
			k.domain = strings.Clone(k.domain) // a view of the text arena
		}
		c.cells[k] = t
	}
}

// sub counts links fewer links and clicks fewer clicks under keys,
// dropping a count that falls to no link.
func (c *listCounts) sub(keys []countKey, links int, clicks uint64) {
	for _, k := range keys {
		t := c.cells[k]
		t.Links -= links
		t.Clicks -= clicks
		if t.Links <= 0 {
			delete(c.cells, k)
			continue
		}
		c.cells[k] = t
	}
}

// total is the count of the links in workspaces wss, in domains (nil:
// any) with tag ("": any). Its cost is the number of workspaces times
// that of domains, never that of links.
func (c *listCounts) total(wss []uint32, domains []string, tag string) ListTotal {
	tag = strings.ToLower(tag)
	var sum ListTotal
	add := func(k countKey) {
		t := c.cells[k]
		sum.Links += t.Links
		sum.Clicks += t.Clicks
	}
	for _, ws := range wss {
		if domains == nil {
			add(countKey{ws: ws, anyDomain: true, tag: tag})
			continue
		}
		for _, d := range domains {
			add(countKey{ws: ws, domain: d, tag: tag})
		}
	}
	return sum
}

// tags yields each tag's count in workspaces wss and domains (nil: any),
// once per workspace and domain that holds it. It reads every count, so
// its cost is the number of tags times workspaces and domains in use.
func (c *listCounts) tags(wss []uint32, domains []string) iter.Seq2[string, ListTotal] {
	listed := map[uint32]bool{}
	for _, ws := range wss {
		listed[ws] = true
	}
	return func(yield func(string, ListTotal) bool) {
		for k, t := range c.cells {
			kept := k.anyDomain == (domains == nil) && (domains == nil || slices.Contains(domains, k.domain))
			if k.tag != "" && listed[k.ws] && kept && !yield(k.tag, t) {
				return
			}
		}
	}
}

// linkCounted is what the counts know of the live link at p.
func (s *state) linkCounted(p uint32) (ws uint32, domain string, tags []string, clicks uint64) {
	r := s.links.recs.at(p)
	if o := s.opts.get(p); o != nil && r.flags&flagOptions != 0 {
		tags = o.Tags
	}
	return r.workspace, s.links.domainIndex(s.links.recs.text.code(r)), tags, r.clicks
}

// countLink counts the live link at p, with its tags and clicks.
func (s *state) countLink(p uint32) {
	ws, domain, tags, clicks := s.linkCounted(p)
	s.counts.add(countKeys(ws, domain, tags), 1, clicks)
}

// uncountLink takes the live link at p out of the counts.
func (s *state) uncountLink(p uint32) {
	ws, domain, tags, clicks := s.linkCounted(p)
	s.counts.sub(countKeys(ws, domain, tags), 1, clicks)
}

// retagCounted moves the live link at p from the counts of its tags to
// those of tags.
func (s *state) retagCounted(p uint32, tags []string) {
	ws, domain, old, clicks := s.linkCounted(p)
	s.counts.sub(tagKeys(ws, domain, old), 1, clicks)
	s.counts.add(tagKeys(ws, domain, tags), 1, clicks)
}

// clickCounted counts n more clicks (forgot: n fewer) of the live link at p.
func (s *state) clickCounted(p uint32, n uint64, forgot bool) {
	if n == 0 {
		return
	}
	ws, domain, tags, _ := s.linkCounted(p)
	if forgot {
		s.counts.sub(countKeys(ws, domain, tags), 0, n)
		return
	}
	s.counts.add(countKeys(ws, domain, tags), 0, n)
}

// countAll derives the counts of every live link: after a restore.
func (s *state) countAll() {
	s.counts = newListCounts()
	for p := range s.links.recs.n {
		if s.links.recs.at(p).live() {
			s.countLink(p)
		}
	}
}

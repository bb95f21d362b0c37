package fsm

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Once the cluster is raised to LevelTargets, each link made with an API
// key remembers that key, its author: a key limited to its own links
// (APIKey.OwnLinksOnly, Shlink's AUTHORED_SHORT_URLS role) sees only those,
// and a list may ask for one key's links (Shlink's apiKeyName). Links made
// before, anonymously or with the operator's token have no author.
//
// A record keeps its author in the two bytes its layout left spare: the
// number of the key in authorTable, which also lists each author's live
// links. Only live keys are authors: a revocation takes its key's links'
// author away and frees the number, so numbers in use never exceed MaxKeys
// (the cluster is bounded at LevelTargets) and fit in 16 bits.

// authorTable interns the key ids that authored live links and lists each
// one's live links.
type authorTable struct {
	ids   []string // by number; ids[0] and freed numbers are ""
	nums  map[string]uint16
	links []*positionList // per number: positions of its live links (positions.go)
	free  []uint16        // numbers freed by revocations, reused first
}

func newAuthorTable() authorTable {
	return authorTable{ids: []string{""}, nums: map[string]uint16{}, links: []*positionList{newPositionList()}}
}

// maxAuthors is what 16 bits number; MaxKeys live keys stay well below it.
const maxAuthors = 1<<16 - 1

// intern is the number of key id, a new one if it has none; false when
// every number is taken (which MaxKeys rules out).
func (a *authorTable) intern(id string) (uint16, bool) {
	if n, ok := a.nums[id]; ok {
		return n, true
	}
	var n uint16
	switch {
	case len(a.free) > 0:
		n, a.free = a.free[len(a.free)-1], a.free[:len(a.free)-1]
		a.ids[n] = strings.Clone(id)
	case len(a.ids) <= maxAuthors:
		n = uint16(len(a.ids))
		a.ids, a.links = append(a.ids, strings.Clone(id)), append(a.links, newPositionList())
	default:
		return 0, false
	}
	a.nums[a.ids[n]] = n
	return n, true
}

// linksOf is the positions of key id's live links; the table's own list,
// only to be read.
func (a *authorTable) linksOf(id string) *positionList {
	if n, ok := a.nums[id]; ok {
		return a.links[n]
	}
	return newPositionList()
}

// setAuthor makes key id the author of the live link at p, the newest
// link: positions are appended in order.
func (lt *linkTable) setAuthor(p uint64, id string) {
	n, ok := lt.authors.intern(id)
	if !ok {
		return
	}
	lt.recs.mutable(p).author = n
	lt.authors.links[n].add(p)
}

// unauthor takes the link at p, being removed, out of its author's list.
func (lt *linkTable) unauthor(p uint64) {
	n := lt.recs.at(p).author
	if n == 0 {
		return
	}
	lt.authors.links[n].remove(p)
}

// forgetAuthor takes key id's authorship away from its links, for its
// revocation, and frees its number. Its cost is the key's live links.
func (lt *linkTable) forgetAuthor(id string) {
	n, ok := lt.authors.nums[id]
	if !ok {
		return
	}
	for p := range lt.authors.links[n].values() {
		lt.recs.mutable(p).author = 0
		lt.recs.bound() // a key's links may be millions: written in pieces
	}
	delete(lt.authors.nums, id)
	lt.authors.ids[n], lt.authors.links[n] = "", newPositionList()
	lt.authors.free = append(lt.authors.free, n)
}

// authorOf is the id of the key that created the link at p; "" for none.
func (lt *linkTable) authorOf(p uint64) string { return lt.authors.ids[lt.recs.at(p).author] }

// authorView is what a snapshot keeps of the authors: a copy of the ids by
// number (a revocation frees a number in place).
func (lt *linkTable) authorView() []string { return slices.Clone(lt.authors.ids) }

// writeAuthors writes, from version 12 on, the ids of the keys limited to
// their own links, then the authors of live links sorted by id, then each
// authored live link in id order as its id's step from the previous one
// and its author's place in that list. It holds what the state is, not how
// numbers were handed out, so equal states give equal bytes.
func writeAuthors(snap *snapshot, e *encoder, _ byte, flush func(bool)) {
	encodeStrings(e, ownKeys(snap.keys))
	if !slices.ContainsFunc(snap.authors, func(id string) bool { return id != "" }) {
		// No key authors a link: no walk of every record to find none.
		e.uvarint(0)
		e.uvarint(0)
		return
	}
	used := make([]bool, len(snap.authors))
	authored := 0
	for p := snap.records.first; p < snap.records.n; p++ {
		if r := snap.records.at(p); r.live() && r.author != 0 {
			used[r.author] = true
			authored++
		}
	}
	var sorted []uint16
	for n, u := range used {
		if u {
			sorted = append(sorted, uint16(n))
		}
	}
	slices.SortFunc(sorted, func(a, b uint16) int { return cmp.Compare(snap.authors[a], snap.authors[b]) })
	place := make([]uint64, len(snap.authors))
	e.uvarint(uint64(len(sorted)))
	for i, n := range sorted {
		e.string(snap.authors[n])
		place[n] = uint64(i)
	}
	e.uvarint(uint64(authored))
	var prev uint64
	for p := snap.records.first; p < snap.records.n; p++ {
		if r := snap.records.at(p); r.live() && r.author != 0 {
			e.uvarint(r.id - prev)
			e.uvarint(place[r.author])
			prev = r.id
			flush(false)
		}
	}
}

// readAuthors reads what writeAuthors wrote: every key it names must
// exist, every link be live, in increasing id order.
func readAuthors(st *state, d *decoder, _ byte) error {
	if err := readOwnKeys(st, d); err != nil {
		return err
	}
	var authors []string
	for n := d.count(1); n > 0 && d.err == nil; n-- {
		id := d.string()
		if _, ok := st.keys[id]; d.err == nil && (!ok || len(authors) > 0 && id <= authors[len(authors)-1]) {
			return fmt.Errorf("author %q is no key or out of order", id)
		}
		authors = append(authors, id)
	}
	var id uint64
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		step, i := d.uvarint(), d.uvarint()
		if d.err != nil {
			break
		}
		id += step
		p, ok := st.links.positionOf(id)
		if step == 0 || !ok || i >= uint64(len(authors)) {
			return fmt.Errorf("authored link %d: no such link or author", id)
		}
		st.links.setAuthor(p, authors[i])
	}
	return d.err
}

// readOwnKeys marks the keys limited to their own links: every one named
// must exist and be no admin key, in increasing id order.
func readOwnKeys(st *state, d *decoder) error {
	prev := ""
	for _, id := range decodeStrings(d) {
		k, ok := st.keys[id]
		if d.err != nil {
			return d.err
		}
		if !ok || k.Scopes&ScopeAdmin != 0 || id <= prev {
			return fmt.Errorf("key %q limited to its own links: no such key, an admin key or out of order", id)
		}
		prev = id
		own := *k
		own.OwnLinksOnly = true
		st.keys[id] = &own
	}
	return d.err
}

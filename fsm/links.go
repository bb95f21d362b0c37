package fsm

import (
	"fmt"
	"hash/maphash"
	"iter"
	"maps"
	"slices"
	"sort"
	"strings"
)

// linkTable is the links and their indexes: the records and texts, the
// code and target indexes, the workspaces and each domain's count of live
// links. It knows nothing of options, tombstones, clicks or visitors: the
// state keeps those beside it, by record position.
type linkTable struct {
	recs       recordTable
	codes      codeIndex // live code → record position, on disk (codeindex.go)
	workspaces workspaceTable
	targets    targetIndex // workspace, domain and canonical target → its live links, on disk
	authors    authorTable // the keys that created live links, and their links (authors.go)
	hours      clickHours  // clicks per hour, on disk (clickhours.go)
	// domainLinks counts each registered domain's live links, so a domain
	// is removed only once it has none.
	domainLinks map[string]int
}

func newLinkTable(seed maphash.Seed, eng *engine) linkTable {
	return linkTable{recs: newRecordTable(eng), codes: newCodeIndex(eng, seed), workspaces: newWorkspaceTable(),
		authors: newAuthorTable(), targets: newTargetIndex(eng), hours: newClickHours(eng),
		domainLinks: map[string]int{}}
}

// workspaceTable interns workspace names and lists each one's live links.
type workspaceTable struct {
	names []string
	ids   map[string]uint32
	links []*positionList // per workspace: positions of its live links (positions.go)
}

func newWorkspaceTable() workspaceTable { return workspaceTable{ids: map[string]uint32{}} }

// intern returns the workspace's index, adding it if new. name may be a
// view of a buffer: a new name is copied.
func (w *workspaceTable) intern(name string) uint32 {
	if id, ok := w.ids[name]; ok {
		return id
	}
	name = strings.Clone(name)
	id := uint32(len(w.names))
	w.names = append(w.names, name)
	w.ids[name] = id
	w.links = append(w.links, newPositionList())
	return id
}

// linkOf is the record as a Link, without its Options (which only the
// state can look up).
func (lt *linkTable) linkOf(r *record) Link {
	domain, code := SplitCode(r.code)
	return Link{
		ID: r.id, Code: code, Domain: domain, URL: r.url, Workspace: lt.workspaces.names[r.workspace],
		Canonical: r.canonical(), CreatedAt: r.createdAt, ExpiresAt: r.expiresAt,
		Clicks: r.clicks, LastAccess: r.lastAccess, Author: lt.authors.ids[r.author],
	}
}

// domainIndex is the domain part of a qualified code, as a target's key takes it.
func (lt *linkTable) domainIndex(qualified string) string {
	domain, _ := SplitCode(qualified)
	return domain
}

// lookup returns the position of the live link with this code.
func (lt *linkTable) lookup(code string) (uint64, bool) {
	r, ok := lt.find(code)
	if !ok {
		return 0, false
	}
	return r.pos, true
}

// find is lookup that returns the link's record: a redirect reads it
// once. A code cache hit whose record is in the record cache reads no
// disk and allocates nothing; a slot is only a candidate, taken when its
// record is live and holds this code, else the filter or the engine
// answers.
func (lt *linkTable) find(code string) (*record, bool) {
	h := lt.codes.hash(code)
	if p, ok := lt.codes.cache.get(h); ok && p < lt.recs.n {
		if r := lt.recs.at(p); r.live() && r.code == code {
			return r, true
		}
	}
	if !lt.codes.filter.mayHold(h) {
		return nil, false
	}
	p, ok := lt.codes.position(code)
	if !ok {
		return nil, false
	}
	r := lt.recs.at(p)
	if !r.live() || r.code != code {
		// A clone: code may be a view of a caller's stack array, which must not escape.
		panic(fmt.Sprintf("fsm: the code index holds %q at %d, whose record holds %q (live %v)", strings.Clone(code), p, r.code, r.live()))
	}
	if lt.recs.eng.published {
		// Apply fills it too: it finds only live links (a click's, an
		// edit's), and a click batch names the codes of every node's
		// redirects, which would read the engine each time; not while a
		// restore builds the state.
		lt.codes.cache.put(h, p)
	}
	return r, true
}

// targetOf is the canonical target URL a link is found under: the
// canonical URL a dedupe link was created with (its proposer computed
// it), else canonicalTarget of its URL. The same record gives the same
// key on every node and at every restore.
func (lt *linkTable) targetOf(r *record) string {
	if r.dedupe() {
		return r.canonical()
	}
	return canonicalTarget(r.url)
}

// targetKey is the workspace, domain and canonical target of the live
// link at p.
func (lt *linkTable) targetKey(p uint64) (workspace uint32, domain, canonical string) {
	r := lt.recs.at(p)
	return r.workspace, lt.domainIndex(r.code), lt.targetOf(r)
}

// withTarget lists the live links of a canonical target in a workspace
// and domain, oldest first, each with whether it is marked indexed.
func (lt *linkTable) withTarget(workspace uint32, domain, canonical string) iter.Seq2[uint64, bool] {
	return lt.targets.links(workspace, domain, canonical)
}

// dedupeLookup returns the position of the link that dedupe returns
// before the cluster is raised to LevelTargets: the one dedupe link of
// a canonical URL in a workspace and domain marked indexed.
func (lt *linkTable) dedupeLookup(workspace uint32, domain, canonical string) (uint64, bool) {
	return lt.targets.indexedOf(workspace, domain, canonical)
}

// insert stores a new live link: r with its texts. The canonical URL is
// stored only when it differs from the URL. It returns the position.
// Callers keep ids increasing, so positions are in id order.
func (lt *linkTable) insert(r record, code, url, workspace, canonical string, dedupe bool) uint64 {
	r.flags = flagLive
	stored := ""
	if dedupe {
		r.flags |= flagDedupe
		if canonical != url {
			stored = canonical
		}
	}
	r.setTexts(code, url, stored)
	r.workspace = lt.workspaces.intern(workspace)
	p := lt.recs.append(r)
	lt.codes.insert(r.code, p)
	lt.addTarget(p)
	lt.workspaces.links[r.workspace].add(p)
	if domain := lt.domainIndex(code); domain != "" {
		lt.domainLinks[domain]++
	}
	return p
}

// addTarget puts the live link at p under its target, or sets its mark
// there to its flagIndexed.
func (lt *linkTable) addTarget(p uint64) {
	ws, domain, canonical := lt.targetKey(p)
	lt.targets.add(p, ws, domain, canonical, lt.recs.at(p).flags&flagIndexed != 0)
}

// setIndexed marks the live link at p as its URL's dedupe link or not,
// in its record and under its target.
func (lt *linkTable) setIndexed(p uint64, indexed bool) {
	r := lt.recs.mutable(p)
	if indexed {
		r.flags |= flagIndexed
	} else {
		r.flags &^= flagIndexed
	}
	lt.addTarget(p)
}

func (lt *linkTable) removeTarget(p uint64) {
	ws, domain, canonical := lt.targetKey(p)
	lt.targets.remove(p, ws, domain, canonical)
}

// index makes a new dedupe link the one dedupe returns, unless a live,
// unexpired link already is (the rule before LevelTargets, kept after it
// so that snapshots mark the same links on every node).
func (lt *linkTable) index(p uint64, now int64) {
	r := lt.recs.at(p)
	if !r.dedupe() {
		return
	}
	canonical, domain := r.canonical(), lt.domainIndex(r.code)
	if cur, ok := lt.dedupeLookup(r.workspace, domain, canonical); ok {
		if !lt.recs.at(cur).expired(now) {
			return
		}
		lt.setIndexed(cur, false)
	}
	lt.setIndexed(p, true)
}

// markDisabled records whether the link at p is disabled on purpose:
// whether its expiry, just set by an entry of time now, is at or before
// now. An expiry that time reaches later is no choice of its owner's, and
// the purge removes that link as any expired one. Only a state raised to
// LevelDisabled calls it: older builds keep no such flag.
func (lt *linkTable) markDisabled(p uint64, now int64) {
	r := lt.recs.mutable(p)
	if r.expiresAt != 0 && r.expiresAt <= now {
		r.flags |= flagDisabled
		return
	}
	r.flags &^= flagDisabled
}

// positionOf finds a link by id: positions are in id order (records are
// only appended, ids only grow), dead links' records included. It reads
// at most log2(idsEvery) records, and fills no cache with them.
func (lt *linkTable) positionOf(id uint64) (uint64, bool) {
	t := &lt.recs
	block := sort.Search(len(t.firstIDs), func(i int) bool { return t.firstIDs[i] > id }) - 1
	if block < 0 {
		return t.first, false
	}
	lo := t.first + uint64(block)*idsEvery
	n := min(idsEvery, t.n-lo)
	// Ids grow by one a record where none was skipped (a restore packs
	// live links, leaving gaps): then the first guess is the record, one
	// read instead of a search's ten.
	if guess := id - t.firstIDs[block]; guess < n && t.idAt(lo+guess) == id {
		return lo + guess, true
	}
	p := lo + uint64(sort.Search(int(n), func(i int) bool { return t.idAt(lo+uint64(i)) >= id }))
	return p, p < t.n && t.idAt(p) == id
}

// restoreIndexed makes the link at p the one dedupe returns for its URL.
// That no other link is, checkIndexed checks once the links are in.
func (lt *linkTable) restoreIndexed(p uint64) error {
	if lt.recs.at(p).flags&flagIndexed != 0 {
		return fmt.Errorf("two links hold the dedupe entry of %q", lt.recs.at(p).canonical())
	}
	lt.setIndexed(p, true)
	return nil
}

// checkIndexed refuses a restored state in which two links of a target
// are marked its dedupe link: one walk of the target index, not a lookup
// for each link marked (which made restoring a state of dedupe links
// twice as slow).
func (lt *linkTable) checkIndexed() error {
	if p, twice := lt.targets.indexedTwice(); twice {
		return fmt.Errorf("two links hold the dedupe entry of %q", lt.recs.at(p).canonical())
	}
	return nil
}

// decodeDedupeV1 reads version 1's dedupe section: workspace, NUL and
// canonical URL → code. Each entry must name a link with that workspace
// and canonical URL.
func (lt *linkTable) decodeDedupeV1(d *decoder) error {
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		key, code := d.stringView(), d.stringView()
		if d.err != nil {
			return d.err
		}
		ws, canonical, _ := strings.Cut(key, "\x00")
		p, ok := lt.lookup(code)
		if !ok {
			return fmt.Errorf("dedupe entry for missing code %q", code)
		}
		r := lt.recs.at(p)
		if lt.workspaces.names[r.workspace] != ws || r.canonical() != canonical {
			return fmt.Errorf("dedupe entry %q does not match link %q", key, code)
		}
		if err := lt.restoreIndexed(p); err != nil {
			return err
		}
	}
	if d.err != nil {
		return nil // the caller reports d.err
	}
	return lt.checkIndexed()
}

// remove takes the live link at p out of the indexes and its workspace's
// list and returns its code. Its record and texts stay, marked dead.
func (lt *linkTable) remove(p uint64) string {
	lt.removeTarget(p)
	lt.unauthor(p)
	r := lt.recs.mutable(p)
	r.flags &^= flagLive | flagIndexed
	code := r.code
	lt.codes.remove(code)
	lt.workspaces.links[r.workspace].remove(p)
	if domain := lt.domainIndex(code); domain != "" {
		lt.domainLinks[domain]--
	}
	return code
}

// live is the number of live links.
func (lt *linkTable) live() int { return lt.codes.live }

// linksIn is the number of live links in a registered domain.
func (lt *linkTable) linksIn(domain string) int { return lt.domainLinks[domain] }

// domainsUsed is every domain that held a link since the table was built,
// in no order.
func (lt *linkTable) domainsUsed() iter.Seq[string] { return maps.Keys(lt.domainLinks) }

// workspaceID is the interned number of a workspace that has or had links.
func (lt *linkTable) workspaceID(name string) (uint32, bool) {
	id, ok := lt.workspaces.ids[name]
	return id, ok
}

// workspaceOf is the workspace of the link at p.
func (lt *linkTable) workspaceOf(p uint64) string {
	return lt.workspaces.names[lt.recs.at(p).workspace]
}

// workspaceNames is every interned workspace, by number. The list only
// grows by append, so capping it keeps later names out of a snapshot's view.
func (lt *linkTable) workspaceNames() []string { return slices.Clip(lt.workspaces.names) }

// workspaceLists is the live links of the named workspaces (nil: every
// workspace), one list each, unknown names left out. The lists are the
// table's own: callers only read them.
func (lt *linkTable) workspaceLists(names []string) []*positionList {
	if names == nil {
		return lt.workspaces.links
	}
	var lists []*positionList
	for _, name := range names {
		if ws, ok := lt.workspaces.ids[name]; ok {
			lists = append(lists, lt.workspaces.links[ws])
		}
	}
	return lists
}

// retarget points the link at p to url: it moves to the list of its new
// target, and a dedupe link to its new canonical URL's dedupe entry.
func (lt *linkTable) retarget(p uint64, url, canonical string, now int64) {
	lt.removeTarget(p)
	r := lt.recs.mutable(p)
	r.flags &^= flagIndexed
	stored := ""
	if r.dedupe() && canonical != url {
		stored = canonical
	}
	r.setTexts(r.code, url, stored)
	lt.addTarget(p)
	lt.index(p, now)
}

// listsOf is workspaceLists, or with an author ("": any) the one list of
// the links it created in those workspaces: then the cost is its links'.
func (lt *linkTable) listsOf(names []string, author string) []*positionList {
	if author == "" {
		return lt.workspaceLists(names)
	}
	list := lt.authors.linksOf(author)
	if names == nil {
		return []*positionList{list}
	}
	var wss []uint32
	for _, name := range names {
		if ws, ok := lt.workspaces.ids[name]; ok {
			wss = append(wss, ws)
		}
	}
	in := newPositionList()
	for p := range list.values() {
		if slices.Contains(wss, lt.recs.at(p).workspace) {
			in.add(p)
		}
	}
	return []*positionList{in}
}

// positionsNewestFirst lists the live links of the workspaces (nil: all),
// with an author ("": any) those it created, newest first.
func (lt *linkTable) positionsNewestFirst(workspaces []string, author string) []uint64 {
	out := union(lt.listsOf(workspaces, author))
	slices.Reverse(out) // positions are in id order
	return out
}

// writeLinks writes the live links by id, each with its options from
// version 5 on.
func writeLinks(snap *snapshot, e *encoder, version byte, flush func(bool)) {
	e.uvarint(uint64(snap.live))
	for p := snap.records.first; p < snap.records.n; p++ {
		if r := snap.records.at(p); r.live() {
			snap.encodeLink(e, r, version)
			switch {
			case version >= snapshotV10:
				encodeOptionsExtended(e, snap.optionsOf(r))
			case version >= snapshotV5:
				encodeOptions(e, snap.optionsOf(r))
			}
			flush(false)
		}
	}
}

// encodeLink writes a link as version 2 has it: the canonical URL only
// when it differs from the URL; from version 13 on, its flags say whether
// it was disabled on purpose.
func (snap *snapshot) encodeLink(e *encoder, r *record, version byte) {
	var flags byte
	if r.dedupe() {
		flags |= snapDedupe
	}
	if r.flags&flagIndexed != 0 {
		flags |= snapIndexed
	}
	if r.flags&flagDisabled != 0 && version >= snapshotV13 {
		flags |= snapDisabled
	}
	e.uvarint(r.id)
	e.string(r.code)
	e.string(r.url)
	e.string(snap.workspaces[r.workspace])
	e.string(r.canon)
	e.byte(flags)
	e.varint(r.createdAt)
	e.varint(r.expiresAt)
	e.uvarint(r.clicks)
	e.varint(r.lastAccess)
}

// readLinks inserts the links section, checking each link as it goes.
func readLinks(st *state, d *decoder, version byte) error {
	var prevID uint64
	indexed := 0
	n := d.count(minLinkSize)
	for ; n > 0 && d.err == nil; n-- {
		l := decodeSnapLink(d, version)
		if d.err != nil {
			return d.err
		}
		if err := l.check(prevID, st.lastID, st.raised); err != nil {
			return err
		}
		prevID = l.r.id
		if st.links.recs.full(st.raised) {
			return ErrStateFull
		}
		dedupe := l.flags&snapDedupe != 0
		if dedupe && l.canonical == "" {
			l.canonical = l.url
		}
		p := st.links.insert(l.r, l.code, l.url, l.ws, l.canonical, dedupe)
		if l.flags&snapDisabled != 0 {
			st.links.recs.mutable(p).flags |= flagDisabled
		}
		st.setOptions(p, l.opts)
		if l.flags&snapIndexed != 0 {
			if err := st.links.restoreIndexed(p); err != nil {
				return err
			}
			indexed++
		}
	}
	if d.err != nil {
		return nil // the caller reports d.err
	}
	if indexed >= 2 {
		if err := st.links.checkIndexed(); err != nil {
			return err
		}
	}
	return st.links.uniqueCodes()
}

// uniqueCodes refuses a restored links section that holds a code twice:
// the second link's code key replaced the first's, so the index holds
// fewer keys than live links. Counting them is one walk of the table,
// where a lookup of each code as it arrived cost a seek per link.
func (lt *linkTable) uniqueCodes() error {
	keys := 0
	lt.recs.eng.scan([]byte{codePrefix}, nil, func(_, _ []byte) bool {
		keys++
		return true
	})
	if err := lt.recs.eng.err; err != nil {
		return err // a write that failed is not a code twice
	}
	if keys == lt.codes.live {
		return nil
	}
	var dup string
	lt.recs.scan(true, func(r *record) bool {
		if p, ok := lt.codes.position(r.code); r.live() && (!ok || p != r.pos) {
			dup = r.code
		}
		return dup == ""
	})
	return fmt.Errorf("code %q appears twice", dup)
}

// snapLink is a link as the links section holds it. Its strings are views
// of the decoder's buffer until insert copies them.
type snapLink struct {
	r                        record
	code, url, ws, canonical string
	flags                    byte
	opts                     *Options
}

// decodeSnapLink reads one link of a snapshot of the given version.
func decodeSnapLink(d *decoder, version byte) snapLink {
	l := snapLink{r: record{id: d.uvarint()}}
	l.code, l.url, l.ws, l.canonical = d.stringView(), d.stringView(), d.stringView(), d.stringView()
	switch {
	case version >= snapshotV2:
		l.flags = d.byte()
	case l.canonical != "":
		l.flags = snapDedupe
	}
	l.r.createdAt, l.r.expiresAt, l.r.clicks, l.r.lastAccess = d.varint(), d.varint(), d.uvarint(), d.varint()
	switch {
	case version >= snapshotV10:
		l.opts = decodeOptionsExtended(d)
	case version >= snapshotV5:
		l.opts = decodeOptions(d)
	}
	return l
}

// check refuses a link that Apply could not have made, or that comes out
// of id order: ids above prevID and at most lastID.
func (l *snapLink) check(prevID, lastID uint64, raised int) error {
	if err := l.opts.check(raised); err != nil {
		return fmt.Errorf("link %q: %w", l.code, err)
	}
	// Only a state raised to LevelDisabled (so a snapshot of version 13
	// on: readRaised) disables links.
	allowed := byte(snapDedupe | snapIndexed)
	if raised >= LevelDisabled {
		allowed |= snapDisabled
	}
	switch {
	case l.code == "" || l.url == "" || l.ws == "":
		return fmt.Errorf("link %d has an empty field", l.r.id)
	case len(l.code) > maxCodeLen:
		return fmt.Errorf("link %d has a code of %d bytes", l.r.id, len(l.code))
	case l.r.id <= prevID || l.r.id > lastID:
		return fmt.Errorf("link %q has out-of-order id %d", l.code, l.r.id)
	case l.flags&^allowed != 0 || l.flags&^snapDisabled == snapIndexed || (l.canonical != "" && l.flags&snapDedupe == 0):
		return fmt.Errorf("link %q has flags %#x", l.code, l.flags)
	case l.flags&snapDisabled != 0 && l.r.expiresAt == 0:
		return fmt.Errorf("link %q is disabled without an expiry", l.code)
	}
	return nil
}

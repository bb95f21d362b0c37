package fsm

// Which link a dedupe create returns (DESIGN.md, "Dedupe").
//
// Before the cluster is raised to LevelTargets, the rule every build
// applied: the dedupe link marked indexed for the canonical URL in the
// workspace and domain, unless it expired. From LevelTargets on, any live
// link of the target counts, whatever made it (a create without dedupe,
// an import, a compatible API, a bulk create): the oldest one that would
// redirect at the entry's time. The oldest, as Shlink's findOneMatching
// orders by id: the answer does not change as newer links to the same URL
// come and go, and is the same on every node because positions are in id
// order. Options are not compared, as before: Kutt's reuse and Bitly's
// shorten return the existing link whatever else the request sets. A key
// limited to its own links finds only those (Shlink's findOneMatching
// applies the key's role too).

// found is the position of the link a dedupe create through the counter
// returns, if any.
func (c *codeChoice) found() (uint64, bool) {
	s := c.s
	if s.raised < LevelTargets {
		return s.links.dedupeLookup(c.ws, c.r.Domain, c.canonical)
	}
	var indexedAt uint64
	indexed := false
	for p, marked := range s.links.withTarget(c.ws, c.r.Domain, c.canonical) {
		if c.redirects(p) && s.keys.seesAuthor(c.r.KeyID, s.links.authorOf(p)) {
			return p, true
		}
		if marked {
			indexedAt, indexed = p, true
		}
	}
	// The walk saw every link of the target: the new link's index will
	// not look again (linkTable.index).
	s.links.targets.note(c.ws, c.r.Domain, c.canonical, indexedAt, indexed)
	return 0, false
}

// dedupeTarget is the canonical URL dedupe compares with a create's, in
// a state raised to raised: before LevelTargets a dedupe link's own (""
// for any other link, which dedupe never returned), from it on any
// link's target.
func (lt *linkTable) dedupeTarget(r *record, raised int) string {
	if raised < LevelTargets {
		return r.canonical()
	}
	return lt.targetOf(r)
}

// redirects reports whether the link at p would redirect a visit at the
// create's time: not expired, valid since, and short of its visit limit.
// A dedupe that returned one that does not would hand out a dead link.
func (c *codeChoice) redirects(p uint64) bool {
	s := c.s
	if s.links.recs.at(p).expired(c.now) {
		return false
	}
	o := s.opts.get(p)
	if o == nil {
		return true
	}
	return c.now >= o.ValidSince && (o.MaxVisits == 0 || s.visitsUsed(p) < o.MaxVisits)
}

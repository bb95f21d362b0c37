package fsm

// Which link a dedupe create returns (DESIGN.md, "Dedupe").
//
// Before the cluster is raised to LevelTargets, the rule every build
// applied: the dedupe link marked indexed for the canonical URL in the
// workspace and domain, unless it expired. From LevelTargets on, any live
// link of the target counts, whatever made it (a create without dedupe,
// an import, a compatible API, a bulk create): the oldest one that would
// redirect at the entry's time and has the options the create sets. The
// oldest, as Shlink's findOneMatching orders by id: the answer does not
// change as newer links to the same URL come and go, and is the same on
// every node because positions are in id order.

// found is the position of the link a dedupe create through the counter
// returns, if any.
func (c *codeChoice) found() (uint32, bool) {
	s := c.s
	if s.raised < LevelTargets {
		return s.links.dedupeLookup(c.ws, c.r.Domain, c.canonical)
	}
	for p := range s.links.withTarget(c.ws, c.r.Domain, c.canonical) {
		if s.redirects(p, c.now) && s.hasOptionsOf(p, c.r) {
			return p, true
		}
	}
	return 0, false
}

// dedupeTarget is the canonical URL dedupe compares with a create's:
// before LevelTargets a dedupe link's own ("" for any other link, which
// dedupe never returned), from it on any link's target.
func (s *state) dedupeTarget(r *record) string {
	if s.raised < LevelTargets {
		return s.links.recs.text.canonical(r)
	}
	return s.links.targetOf(r)
}

// redirects reports whether the link at p would redirect a visit at now:
// not expired, valid since, and short of its visit limit. A dedupe that
// returned one that does not would hand out a dead link.
func (s *state) redirects(p uint32, now int64) bool {
	if s.links.recs.at(p).expired(now) {
		return false
	}
	o := s.opts.get(p)
	if o == nil {
		return true
	}
	return now >= o.ValidSince && (o.MaxVisits == 0 || s.visitsUsed(p) < o.MaxVisits)
}

// hasOptionsOf reports whether the link at p has what create r sets of
// what Shlink's findOneMatching compares: expiry, visit limit, valid
// since, and tags (the same set, compared as tags are). What r leaves
// unset matches anything. A password never matches: its hash is salted,
// so two are never known to be equal, and a dedupe must not hand out a
// link protected by a password its caller did not set.
func (s *state) hasOptionsOf(p uint32, r CreateRequest) bool {
	o, want := s.opts.get(p), r.Options
	if o == nil {
		o = &Options{}
	}
	if want == nil {
		want = &Options{}
	}
	switch {
	case r.ExpiresAt != 0 && s.links.recs.at(p).expiresAt != r.ExpiresAt,
		want.MaxVisits != 0 && o.MaxVisits != want.MaxVisits,
		want.ValidSince != 0 && o.ValidSince != want.ValidSince,
		want.PasswordHash != "" || o.PasswordHash != "":
		return false
	}
	return len(want.Tags) == 0 || sameTags(o, want.Tags)
}

// sameTags reports whether o has exactly the tags, in any order.
func sameTags(o *Options, tags []string) bool {
	given := Options{Tags: tags}
	for _, t := range tags {
		if !o.HasTag(t) {
			return false
		}
	}
	for _, t := range o.Tags {
		if !given.HasTag(t) {
			return false
		}
	}
	return true
}

package fsm

import (
	"errors"
	"fmt"
	"slices"
)

// EditField says which fields an EditCommand changes.
type EditField uint16

// The EditField bits, one per field of a link an edit can change.
const (
	EditURL EditField = 1 << iota
	EditTitle
	EditTags
	EditExpiresAt
	EditMaxVisits
	EditValidSince
	EditPassword
	EditForwardQuery
	EditPublicStats
	EditRules
	// EditCrawlable came with LevelVisitRows: only cmdEditExtended
	// carries it.
	EditCrawlable

	editKnown         = EditRules<<1 - 1
	editKnownExtended = EditCrawlable<<1 - 1
)

// EditCommand changes a link. Only the fields named in Fields change; the
// others keep their values (a zero value in a named field clears it).
type EditCommand struct {
	Code   string // qualified (QualifiedCode)
	Now    int64
	KeyID  string
	Fields EditField

	URL          string
	Canonical    string // of URL, computed before proposing, as for creates
	Title        string
	Tags         []string
	ExpiresAt    int64
	MaxVisits    uint64
	ValidSince   int64
	PasswordHash string
	ForwardQuery bool
	PublicStats  bool
	Rules        []Rule
	Crawlable    bool
}

// ErrVisitLimit is a visit to a link that has had all its visits.
var ErrVisitLimit = errors.New("the link has reached its maximum number of visits")

// edit applies an EditCommand and returns the link as it left it (its
// proposer answers with that, not with what a later edit made of it). A
// new target is written to a new copy of the record (the old one stays
// as readers may hold it) and recorded in the link's history; every
// other field replaces the link's Options as a whole, so an Options value
// a reader holds never changes under it.
func (s *state) edit(c EditCommand) (Link, error) {
	p, ws, err := s.writableLink(c.Code, c.KeyID, c.Now)
	if err != nil {
		return Link{}, err
	}
	r := s.links.recs.at(p)
	if c.Fields&^editKnownExtended != 0 {
		return Link{}, fmt.Errorf("%w: unknown edit fields %#x", ErrInvalidRequest, c.Fields&^editKnownExtended)
	}
	if c.Level() >= LevelVisitRows && s.raised < LevelVisitRows {
		return Link{}, ErrNotRaised
	}
	changeURL := c.Fields&EditURL != 0 && c.URL != r.url
	if changeURL {
		if err := checkTarget(c.URL, s.raised); err != nil {
			return Link{}, err
		}
		if r.dedupe() && c.Canonical == "" {
			return Link{}, fmt.Errorf("%w: a dedupe link's new target needs its canonical URL", ErrInvalidRequest)
		}
	}
	o := s.editedOptions(p, c, changeURL)
	if err := o.check(s.raised); err != nil {
		return Link{}, err
	}
	if changeURL {
		s.links.retarget(p, c.URL, c.Canonical, c.Now)
	}
	if c.Fields&EditExpiresAt != 0 {
		s.links.recs.mutable(p).expiresAt = c.ExpiresAt
		if s.raised >= LevelDisabled {
			s.links.markDisabled(p, c.Now)
		}
	}
	s.setOptions(p, o)
	s.audit.add(AuditEntry{At: c.Now, KeyID: c.KeyID, Action: AuditLinkEdit, Workspace: ws, Subject: c.Code})
	l := s.link(p)
	s.hooks.link(EventLinkUpdated, c.Now, s.bounded(), l)
	return l, nil
}

// editedOptions is the link's Options with the command's fields applied,
// as a new value.
func (s *state) editedOptions(p uint64, c EditCommand, changeURL bool) *Options {
	var o Options
	if cur := s.opts.get(p); cur != nil {
		o = *cur
	}
	set := func(f EditField) bool { return c.Fields&f != 0 }
	if set(EditTitle) {
		o.Title = c.Title
	}
	if set(EditTags) {
		o.Tags = slices.Clone(c.Tags)
	}
	if set(EditMaxVisits) {
		o.MaxVisits = c.MaxVisits
	}
	if set(EditValidSince) {
		o.ValidSince = c.ValidSince
	}
	if set(EditPassword) {
		o.PasswordHash = c.PasswordHash
	}
	if set(EditForwardQuery) {
		o.ForwardQuery = c.ForwardQuery
	}
	if set(EditPublicStats) {
		o.PublicStats = c.PublicStats
	}
	if set(EditRules) {
		o.Rules = slices.Clone(c.Rules)
	}
	if set(EditCrawlable) {
		o.Crawlable = c.Crawlable
	}
	if changeURL {
		r := s.links.recs.at(p)
		history := slices.Clip(o.History) // appending must not write into the old value's array
		if len(history) == 0 {
			history = append(history, Version{URL: r.url, ChangedAt: r.createdAt})
		}
		history = append(history, Version{URL: c.URL, ChangedAt: c.Now, KeyID: c.KeyID})
		if s.bounded() && len(history) > MaxHistory {
			// A new array, so the oldest versions' memory goes with them.
			history = slices.Clone(history[len(history)-MaxHistory:])
		}
		o.History = history
	}
	return &o
}

// MaxHistory is how many versions a link's history keeps once the
// cluster is raised to LevelBounds: the newest. With targets of at most
// 2048 bytes, a history holds at most about 100 KiB.
const MaxHistory = 50

// setOptions stores o as the link's Options, or none when o holds nothing.
func (s *state) setOptions(p uint64, o *Options) {
	var tags []string
	if o != nil {
		tags = o.Tags
	}
	s.counts.retag(s.links.counted(p, &s.opts), tags)
	r := s.links.recs.mutable(p)
	if o.empty() {
		s.opts.drop(p)
		r.flags &^= flagOptions | flagCrawlable
		return
	}
	s.opts.set(p, o)
	r.flags |= flagOptions
	if o.Crawlable {
		r.flags |= flagCrawlable
	} else {
		r.flags &^= flagCrawlable
	}
}

// VisitCommand counts one visit to a link with a visit limit, or refuses
// it once the limit is reached. Such visits are counted here, one entry
// each, instead of in a node's click batches, so every node agrees on
// which visit was the last one allowed: the limit is exact across nodes.
//
// A bot's visit uses up a visit like a person's (a forged User-Agent must
// not open a limited link), yet counts among the link's bots, not its
// clicks.
type VisitCommand struct {
	Code string // qualified
	Now  int64
	// HasVisitor: Visitor says who visited (entry level LevelVisits).
	HasVisitor bool
	Visitor    Visitor
}

func (s *state) visit(c VisitCommand) error {
	p, ok := s.links.lookup(c.Code)
	if !ok {
		return ErrNotFound
	}
	if o := s.opts.get(p); o != nil && o.MaxVisits > 0 && s.visitsUsed(p) >= o.MaxVisits {
		return ErrVisitLimit
	}
	hour, timed := hourOf(c.Now)
	s.links.hours.observe(c.Now)
	if !c.HasVisitor || c.Visitor.Bot == NotBot {
		s.links.countClicks(p, 1, c.Now, hour, timed)
		s.counts.clicked(s.links.counted(p, &s.opts), 1, false)
	}
	if c.HasVisitor {
		s.visits.add(&s.links, p, &c.Visitor, 1, c.Now, s.raised >= LevelVisitRows)
		s.visits.flush()
	}
	s.hooks.clicks(ClickBatch{Now: c.Now, Counts: []ClickCount{{Code: c.Code, Count: 1, Visitor: c.Visitor}}}, &s.links, s.bounded())
	return nil
}

// countClicks adds n clicks at time now to the link at p.
func (lt *linkTable) countClicks(p uint64, n uint64, now int64, hour uint32, timed bool) {
	r := lt.recs.mutable(p)
	last, clicked := hourOf(r.lastAccess)
	first := r.lastAccess == 0 || !clicked || last < hour
	r.clicks += n
	if now > r.lastAccess {
		r.lastAccess = now
	}
	if timed && n > 0 {
		lt.hours.add(r.id, hour, n, first)
	}
}

func encodeEdit(e *encoder, c EditCommand) {
	e.string(c.Code)
	e.varint(c.Now)
	e.string(c.KeyID)
	e.uvarint(uint64(c.Fields))
	set := func(f EditField) bool { return c.Fields&f != 0 }
	if set(EditURL) {
		e.string(c.URL)
		e.string(c.Canonical)
	}
	if set(EditTitle) {
		e.string(c.Title)
	}
	if set(EditTags) {
		e.uvarint(uint64(len(c.Tags)))
		for _, t := range c.Tags {
			e.string(t)
		}
	}
	if set(EditExpiresAt) {
		e.varint(c.ExpiresAt)
	}
	if set(EditMaxVisits) {
		e.uvarint(c.MaxVisits)
	}
	if set(EditValidSince) {
		e.varint(c.ValidSince)
	}
	if set(EditPassword) {
		e.string(c.PasswordHash)
	}
	if set(EditForwardQuery) {
		e.bool(c.ForwardQuery)
	}
	if set(EditPublicStats) {
		e.bool(c.PublicStats)
	}
	if set(EditRules) {
		encodeRules(e, c.Rules)
	}
}

// encodeEditExtension writes, after encodeEdit, the fields of
// LevelVisitRows the edit sets: the crawlable flag, its rules' browsers
// and addresses.
func encodeEditExtension(e *encoder, c EditCommand) {
	if c.Fields&EditCrawlable != 0 {
		e.bool(c.Crawlable)
	}
	if c.Fields&EditRules != 0 {
		encodeRulesExtension(e, c.Rules)
	}
}

func decodeEditExtension(d *decoder, c *EditCommand) {
	if c.Fields&EditCrawlable != 0 {
		c.Crawlable = d.bool()
	}
	if c.Fields&EditRules != 0 {
		decodeRulesExtension(d, c.Rules)
	}
}

// decodeEditEntry reads an edit: cmdEditExtended's with the fields of
// LevelVisitRows.
func decodeEditEntry(d *decoder, typ commandType) EditCommand {
	if typ != cmdEditExtended {
		return decodeEdit(d, editKnown)
	}
	c := decodeEdit(d, editKnownExtended)
	decodeEditExtension(d, &c)
	return c
}

// decodeEdit reads what encodeEdit wrote, refusing fields outside known.
func decodeEdit(d *decoder, known EditField) EditCommand {
	c := EditCommand{Code: d.string(), Now: d.varint(), KeyID: d.string()}
	fields := d.uvarint()
	if fields&^uint64(known) != 0 {
		d.fail(fmt.Errorf("unknown edit fields %#x", fields))
	}
	c.Fields = EditField(fields)
	set := func(f EditField) bool { return c.Fields&f != 0 }
	if set(EditURL) {
		c.URL, c.Canonical = d.string(), d.string()
	}
	if set(EditTitle) {
		c.Title = d.string()
	}
	if set(EditTags) {
		n := d.count(1)
		for i := 0; i < n && d.err == nil; i++ {
			c.Tags = append(c.Tags, d.string())
		}
	}
	if set(EditExpiresAt) {
		c.ExpiresAt = d.varint()
	}
	if set(EditMaxVisits) {
		c.MaxVisits = d.uvarint()
	}
	if set(EditValidSince) {
		c.ValidSince = d.varint()
	}
	if set(EditPassword) {
		c.PasswordHash = d.string()
	}
	if set(EditForwardQuery) {
		c.ForwardQuery = d.bool()
	}
	if set(EditPublicStats) {
		c.PublicStats = d.bool()
	}
	if set(EditRules) {
		c.Rules = decodeRules(d)
	}
	return c
}

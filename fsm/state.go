package fsm

import (
	"errors"
	"fmt"
	"hash/maphash"
	"strings"

	"github.com/linkraft/linkraft/fsm/codes"
)

// Errors a create or delete can end in. The HTTP layer maps them to statuses.
var (
	ErrNotFound           = errors.New("no link with that code")
	ErrCodeTaken          = errors.New("code is already taken")
	ErrReserved           = errors.New("code is a reserved word")
	ErrNotInitialized     = errors.New("cluster not initialized: no code key yet")
	ErrCodeSpaceExhausted = errors.New("every code of this length is taken")
	ErrHashCollision      = errors.New("hash code collides with other links after every retry")
	ErrInvalidRequest     = errors.New("invalid create request")
	ErrRequestIDReused    = errors.New("idempotency key already used for a different request")
	ErrStateFull          = fmt.Errorf("the cluster has created as many links as its record positions hold "+
		"(%d until every node runs a build of entry level %d and the cluster is raised to it): "+
		"no more can be created", uint64(MaxRecords), LevelPositions)
	// ErrCodeDeleted is ErrCodeTaken for a code whose link was deleted.
	ErrCodeDeleted = fmt.Errorf("%w: it belonged to a deleted link, and deleted codes are never reused", ErrCodeTaken)
)

// Link is one short link as readers see it. Times are unix milliseconds.
// Its strings are a record's (records.go): immutable and safe to keep.
type Link struct {
	ID         uint64
	Code       string
	Domain     string // "" for the default domain
	URL        string
	Workspace  string
	Canonical  string // set when the link takes part in dedupe (dedupe or hash)
	CreatedAt  int64
	ExpiresAt  int64 // 0: never
	Clicks     uint64
	LastAccess int64    // 0: never clicked
	Options    *Options // nil: none; never changed once stored
	// Author is the id of the API key that created the link, from
	// LevelTargets on; "": none (authors.go). Only the state's own reads
	// set it: EncodeLink does not carry it.
	Author string
}

// Qualified is the link's code as the state names it (QualifiedCode).
func (l *Link) Qualified() string { return QualifiedCode(l.Domain, l.Code) }

// Target is the link as a redirect serves it.
func (l *Link) Target() Target {
	return Target{Code: l.Qualified(), URL: l.URL, ExpiresAt: l.ExpiresAt, Options: l.Options}
}

// Expired reports whether the link is past its expiry at time now.
func (l *Link) Expired(now int64) bool { return l.ExpiresAt != 0 && now >= l.ExpiresAt }

// CreateResult is what one CreateRequest ended in.
type CreateResult struct {
	Link     Link
	Existing bool // dedupe found the link instead of creating one
	Err      error
}

// maxCodeLen is the longest code a record holds. The HTTP layer allows 64
// bytes; Apply refuses longer ones rather than store them wrongly.
const maxCodeLen = 255

// state is the replicated data. Only Apply and Restore change it, and only
// from the Raft FSM goroutine while holding FSM.mu for writing. Each large
// piece sits behind a type of its own (DESIGN.md, "Features and pieces"),
// so that one can move to disk without the others knowing.
type state struct {
	hasKey     bool
	key        codes.Key
	clusterID  [16]byte
	lastID     uint64
	counters   counterTable        // next counter value per code length
	links      linkTable           // links.go
	counts     listCounts          // live links per workspace, domain and tag (index.go)
	tombstones tombstoneSet        // pieces.go; on disk
	eng        *engine             // the pieces on disk (engine.go)
	clickSeqs  clickSeqTable       // pieces.go
	servers    serverTable         // addresses and removal records (command.go, removals.go)
	requests   requestWindow       // requests.go; records on disk
	keys       keyTable            // keys.go
	revoked    map[string]struct{} // ids of revoked keys, never accepted again
	audit      auditLog            // audit.go
	opts       optionTable         // options of links flagged flagOptions (optiontable.go); on disk
	domains    domainTable         // domains.go
	// defaultDomain is the default domain's redirects (domains.go).
	defaultDomain Domain
	visits        visitTable  // per link and day: who clicked (visittable.go); on disk
	orphans       orphanTable // visits that found no link (orphans.go)
	hooks         webhooks    // webhooks.go
	raised        int         // the level the cluster was raised to (raise.go)
	certs         certState   // certs.go
}

func newState(eng *engine) *state {
	seed := maphash.MakeSeed()
	st := &state{
		eng:       eng,
		counters:  counterTable{},
		links:     newLinkTable(seed, eng),
		counts:    newListCounts(),
		visits:    newVisitTable(eng),
		clickSeqs: newClickSeqTable(),
		servers:   newServerTable(),
		requests:  newRequestWindow(eng, seed),
		keys:      keyTable{},
		revoked:   map[string]struct{}{},
		domains:   domainTable{},
		hooks:     newWebhooks(),
		certs:     newCertState(),
	}
	st.opts = newOptionTable(eng, &st.links.recs, eng.optionCache)
	st.tombstones = newTombstoneSet(eng, &st.links.codes)
	eng.writeBack = func() {
		st.visits.flush() // every command that adds visitors flushes; this one catches any that would not
		st.links.recs.writeBack()
	}
	return st
}

// link returns the record at position p as a Link.
func (s *state) link(p uint64) Link {
	r := s.links.recs.at(p)
	l := s.links.linkOf(r)
	l.Options = s.opts.of(r)
	return l
}

// walkedLink is state.link for a walk over many links (a filtered list,
// the most clicked): it fills no record cache slot (recordTable.walked).
func walkedLink(s *state, p uint64) Link {
	r := s.links.recs.walked(p)
	l := s.links.linkOf(r)
	l.Options = s.opts.of(r)
	return l
}

// createBatch applies a batch's creates in order, one result each.
func (s *state) createBatch(c CreateBatch) []CreateResult {
	results := make([]CreateResult, len(c.Items))
	for i, it := range c.Items {
		results[i] = s.create(c.Now, it)
	}
	return results
}

func (s *state) create(now int64, r CreateRequest) CreateResult {
	if !s.keys.mayWrite(r.KeyID, r.Workspace, r.Domain, now) {
		return CreateResult{Err: ErrUnauthorized}
	}
	// A creation time or clicks come only with an import, which takes an
	// administrator: a writer of links may not backdate a link or give it
	// clicks it never had.
	if (r.CreatedAt != 0 || r.Clicks != 0) && !s.keys.mayAdminister(r.KeyID, now) {
		return CreateResult{Err: ErrUnauthorized}
	}
	var asked uint64
	if r.RequestID != "" {
		asked = fingerprint(r)
		if rec, ok := s.requests.get(r.RequestID); ok {
			if rec.fingerprint != asked {
				return CreateResult{Err: ErrRequestIDReused}
			}
			if p, ok := s.links.lookup(rec.code); ok {
				return CreateResult{Link: s.link(p), Existing: rec.existing}
			}
		}
	}
	res := s.createNew(now, r)
	if res.Err == nil && r.RequestID != "" {
		// The record names the link as lookup finds it: by its qualified
		// code. Older builds recorded the bare code, which finds no link in
		// a registered domain (a retry there made another link); they
		// still do until the cluster is raised past them.
		code := res.Link.Code
		if s.raised >= LevelRename {
			code = res.Link.Qualified()
		}
		s.requests.add(requestRecord{id: r.RequestID, code: code, existing: res.Existing, at: now, fingerprint: asked})
	}
	if res.Err == nil && !res.Existing {
		if r.KeyID != "" || !s.bounded() {
			s.audit.add(AuditEntry{At: now, KeyID: r.KeyID, Action: AuditLinkCreate, Workspace: res.Link.Workspace, Subject: res.Link.Code})
		}
		s.hooks.link(EventLinkCreated, now, s.bounded(), res.Link)
	}
	return res
}

func (s *state) createNew(now int64, r CreateRequest) CreateResult {
	if err := s.checkCreate(now, r); err != nil {
		return CreateResult{Err: err}
	}
	dedupe := r.Dedupe || r.Strategy == StrategyHash
	canonical := r.Canonical
	if !dedupe {
		canonical = ""
	}
	choice := newCodeChoice(s, now, r, dedupe, canonical)
	code, res, done := choice.choose()
	if done {
		return res
	}
	if s.links.recs.spent(s.lastID, s.raised) { // the counter's code was checked before it was drawn
		return CreateResult{Err: ErrStateFull}
	}

	// An imported link keeps its creation time and starts at the clicks it
	// had. Those clicks have no hour, no visitor and no last access: they
	// count in the total (and so towards a visit limit) only.
	created := now
	if r.CreatedAt != 0 {
		created = r.CreatedAt
	}
	s.lastID++
	p := s.links.insert(record{id: s.lastID, createdAt: created, expiresAt: r.ExpiresAt, clicks: r.Clicks},
		code, r.URL, r.Workspace, canonical, dedupe)
	s.links.index(p, now)
	if s.raised >= LevelDisabled {
		s.links.markDisabled(p, now)
	}
	if s.raised >= LevelTargets && r.KeyID != "" && r.KeyID != RootKeyID {
		s.links.setAuthor(p, r.KeyID)
	}
	s.counts.add(s.links.counted(p, &s.opts))
	s.setOptions(p, r.Options)
	return CreateResult{Link: s.link(p)}
}

// codeChoice is how a create gets its code: its custom code, a hash code
// or the next counter code. Each way ends, instead, in a result when
// dedupe finds the link or no code can be had (done).
type codeChoice struct {
	s         *state
	now       int64
	r         CreateRequest
	dedupe    bool
	canonical string // the request's when dedupe, else ""
	ws        uint32
	known     bool // the workspace exists: dedupe may find a link in it
}

func newCodeChoice(s *state, now int64, r CreateRequest, dedupe bool, canonical string) codeChoice {
	ws, known := s.links.workspaceID(r.Workspace)
	return codeChoice{s: s, now: now, r: r, dedupe: dedupe, canonical: canonical, ws: ws, known: known}
}

func (c *codeChoice) choose() (code string, res CreateResult, done bool) {
	switch {
	case c.r.CustomCode != "":
		return c.custom()
	case c.r.Strategy == StrategyHash:
		return c.hash()
	}
	return c.counter()
}

// existing returns the live, unexpired link at p when dedupe may return
// it instead of creating one.
func (c *codeChoice) existing(p uint64, ok bool) (CreateResult, bool) {
	if !ok || !c.dedupe || !c.known {
		return CreateResult{}, false
	}
	s := c.s
	rec := s.links.recs.at(p)
	if rec.workspace != c.ws || s.links.dedupeTarget(rec, s.raised) != c.canonical || rec.expired(c.now) ||
		!s.keys.seesAuthor(c.r.KeyID, s.links.authorOf(p)) { // as Shlink's findOneMatching
		return CreateResult{}, false
	}
	return CreateResult{Link: s.link(p), Existing: true}, true
}

func (c *codeChoice) custom() (string, CreateResult, bool) {
	q := QualifiedCode(c.r.Domain, c.r.CustomCode)
	if res, ok := c.existing(c.s.links.lookup(q)); ok {
		return "", res, true
	}
	if c.s.tombstones.has(q) {
		return "", CreateResult{Err: ErrCodeDeleted}, true
	}
	if c.s.taken(q) {
		return "", CreateResult{Err: ErrCodeTaken}, true
	}
	return q, CreateResult{}, false
}

func (c *codeChoice) hash() (string, CreateResult, bool) {
	for salt := 0; salt <= codes.MaxHashSalt; salt++ {
		q := QualifiedCode(c.r.Domain, codes.HashCode(c.canonical, c.r.Workspace, salt))
		if res, ok := c.existing(c.s.links.lookup(q)); ok {
			return "", res, true
		}
		if !c.s.taken(q) {
			return q, CreateResult{}, false
		}
	}
	return "", CreateResult{Err: ErrHashCollision}, true
}

func (c *codeChoice) counter() (string, CreateResult, bool) {
	s, r := c.s, c.r
	if c.dedupe && c.known {
		if res, ok := c.existing(c.found()); ok {
			return "", res, true
		}
	}
	if s.links.recs.spent(s.lastID, s.raised) { // before the counter moves: a refusal changes nothing
		return "", CreateResult{Err: ErrStateFull}, true
	}
	code, err := s.counters.next(s.hasKey, s.key, r.CodeLength, r.Domain, s.taken)
	if err != nil {
		return "", CreateResult{Err: err}, true
	}
	return code, CreateResult{}, false
}

// checkCreate is Apply's floor for a create (see DESIGN.md): it reads only
// the request, the entry's clock and the registered domains, before any
// code is drawn.
func (s *state) checkCreate(now int64, r CreateRequest) error {
	switch {
	case r.URL == "" || r.Workspace == "" || len(r.CustomCode) > maxCodeLen:
		return ErrInvalidRequest
	case r.Options.extended() && s.raised < LevelVisitRows:
		return ErrNotRaised
	case r.CreatedAt < 0:
		return fmt.Errorf("%w: created_at before 1970", ErrInvalidRequest)
	case r.CreatedAt > now:
		// The entry's clock is the leader's when it proposed the import:
		// no link it brings was created after that.
		return fmt.Errorf("%w: created_at is after the time of the import", ErrInvalidRequest)
	case r.Clicks > MaxImportedClicks:
		return fmt.Errorf("%w: an imported click total is at most %d", ErrInvalidRequest, uint64(MaxImportedClicks))
	case strings.IndexByte(r.CustomCode, '/') >= 0:
		return fmt.Errorf("%w: a code cannot hold '/'", ErrInvalidRequest)
	case r.CustomCode != "" && codes.IsReserved(r.CustomCode):
		return ErrReserved
	case (r.Dedupe || r.Strategy == StrategyHash) && r.Canonical == "":
		return fmt.Errorf("%w: dedupe without a canonical URL", ErrInvalidRequest)
	}
	if r.Domain != "" {
		if _, ok := s.domains[r.Domain]; !ok {
			return ErrUnknownDomain
		}
	}
	if err := checkTarget(r.URL, s.raised); err != nil {
		return err
	}
	return r.Options.check(s.raised)
}

// taken reports whether code can never be handed out: in use, deleted
// before, or a reserved word.
func (s *state) taken(code string) bool {
	if _, ok := s.links.lookup(code); ok {
		return true
	}
	if s.tombstones.has(code) {
		return true
	}
	return codes.IsReserved(code)
}

// counterTable is the next counter value per code length.
type counterTable map[int]uint64

// next walks the permutation of key from the length's counter, skipping
// codes already taken by custom or hash codes.
func (c counterTable) next(hasKey bool, key codes.Key, length int, domain string,
	taken func(string) bool) (string, error) {
	if !hasKey {
		return "", ErrNotInitialized
	}
	if length < codes.MinCounterLength || length > codes.MaxCounterLength {
		return "", fmt.Errorf("%w: code length %d", ErrInvalidRequest, length)
	}
	space := codes.CounterSpace(length)
	for n := c[length]; n < space; n++ {
		code, err := codes.CounterCode(key, n, length)
		if err != nil {
			return "", fmt.Errorf("counter code: %w", err)
		}
		if q := QualifiedCode(domain, code); !taken(q) {
			c[length] = n + 1
			return q, nil
		}
	}
	c[length] = space
	return "", ErrCodeSpaceExhausted
}

func (s *state) delete(c DeleteCommand) error {
	p, ws, err := s.writableLink(c.Code, c.KeyID, c.Now)
	if err != nil {
		return err
	}
	var gone Link // built only for a webhook that wants it
	if s.hooks.wanted.Has(EventLinkDeleted) {
		gone = s.link(p) // its texts stay where they are after the remove
	}
	s.remove(p)
	s.audit.add(AuditEntry{At: c.Now, KeyID: c.KeyID, Action: AuditLinkDelete, Workspace: ws, Subject: c.Code})
	s.hooks.link(EventLinkDeleted, c.Now, s.bounded(), gone)
	return nil
}

// remove deletes a link and tombstones its code so it is never reused.
// Its record and texts stay until the state is rebuilt from a snapshot.
func (s *state) remove(p uint64) {
	s.counts.remove(s.links.counted(p, &s.opts))
	s.tombstones.add(s.links.remove(p))
	if r := s.links.recs.mutable(p); r.flags&flagOptions != 0 {
		s.opts.drop(p)
		r.flags &^= flagOptions | flagCrawlable
	}
	// A link never clicked has no hours (they add to its clicks): no scan.
	if r := s.links.recs.at(p); r.clicks > 0 {
		s.links.hours.forget(r.id)
	}
	s.visits.forget(s.links.recs.at(p).id)
}

// addClicks applies a click batch once; it reports whether it was applied.
func (s *state) addClicks(c ClickBatch) bool {
	if !s.clickSeqs.advance(c.Node, c.Seq) {
		return false
	}
	hour, timed := hourOf(c.Now)
	s.links.hours.observe(c.Now)
	// Only a snapshot taken under the lock Apply holds starts sharing, so
	// this can only fall during the batch (a snapshot released): a copy
	// then made is needless, never wrong.
	sharing := s.links.recs.sharing.Load() > 0
	for i := range c.Counts {
		cc := &c.Counts[i]
		p, ok := s.links.lookup(cc.Code)
		if !ok {
			if c.Visitors {
				s.addOrphans(cc, c.Now, sharing)
			}
			continue // an orphan visit, or deleted since the click: nothing to count
		}
		if cc.Visitor.Bot == NotBot {
			s.links.countClicks(p, cc.Count, c.Now, hour, timed)
			s.counts.clicked(s.links.counted(p, &s.opts), cc.Count, false)
		}
		if c.Visitors {
			s.visits.add(&s.links, p, &cc.Visitor, cc.Count, c.Now, s.raised >= LevelVisitRows)
		}
	}
	s.visits.flush()
	s.hooks.clicks(c, &s.links, s.bounded())
	return true
}

func (s *state) purge(c PurgeCommand) error {
	for _, p := range s.links.expiredBefore(c.ExpiredBefore) {
		s.remove(p)
		s.links.recs.bound()
	}
	s.requests.dropBefore(c.RequestsBefore, s.raised >= LevelRequests)
	return nil
}

// writeKey and readKey are the code key, the cluster's id and the last
// link id.
func writeKey(snap *snapshot, e *encoder, _ byte, _ func(bool)) {
	e.bool(snap.hasKey)
	e.fixed(snap.key[:])
	e.fixed(snap.clusterID[:])
	e.uvarint(snap.lastID)
}

func readKey(st *state, d *decoder, _ byte) error {
	st.hasKey = d.bool()
	d.fixed(st.key[:])
	d.fixed(st.clusterID[:])
	st.lastID = d.uvarint()
	return nil
}

// writeCounters and readCounters are the next counter value per code
// length, by length.
func writeCounters(snap *snapshot, e *encoder, _ byte, _ func(bool)) {
	e.uvarint(uint64(len(snap.counters)))
	for _, c := range snap.counters {
		e.uvarint(uint64(c.length))
		e.uvarint(c.next)
	}
}

func readCounters(st *state, d *decoder, _ byte) error {
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		length, next := int(d.uvarint()), d.uvarint()
		if d.err == nil && (length < codes.MinCounterLength || length > codes.MaxCounterLength) {
			return fmt.Errorf("counter for code length %d", length)
		}
		st.counters[length] = next
	}
	return nil
}

type counterEntry struct {
	length int
	next   uint64
}

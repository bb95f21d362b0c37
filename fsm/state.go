package fsm

import (
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
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
	// ErrCodeDeleted is ErrCodeTaken for a code whose link was deleted.
	ErrCodeDeleted = fmt.Errorf("%w: it belonged to a deleted link, and deleted codes are never reused", ErrCodeTaken)
)

// Link is one short link as readers see it. Times are unix milliseconds.
// Its strings may point into the state's text arena: they are immutable
// and safe to keep.
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
// from the Raft FSM goroutine while holding FSM.mu for writing.
type state struct {
	hasKey     bool
	key        codes.Key
	clusterID  [16]byte
	lastID     uint64
	counters   map[int]uint64 // next counter value per code length
	recs       recordTable
	byCode     hashIndex // live code → record position
	workspaces workspaceTable
	dedupe     hashIndex // workspace and canonical URL → the link dedupe returns
	seed       maphash.Seed
	tombstones map[string]struct{}
	clickSeqs  map[string]uint64 // node → last applied click batch sequence
	servers    map[string]string // server id → HTTP address
	removed    map[string]string // server id → incarnation it was removed with (removals.go)
	requests   requestWindow
	keys       map[string]*APIKey  // key id → key; a key never changes once added
	revoked    map[string]struct{} // ids of revoked keys, never accepted again
	audit      auditLog
	opts       map[uint32]*Options // record position → options, for links flagged flagOptions
	domains    map[string]Domain
	// defaultDomain is the default domain's redirects (domains.go).
	defaultDomain Domain
	// domainLinks counts each registered domain's live links, so a domain
	// is removed only once it has none.
	domainLinks map[string]int
	visits      visitTable  // per link and day: who clicked (visitors.go)
	orphans     orphanTable // visits that found no link (orphans.go)
	hooks       webhooks    // webhooks.go
	raised      int         // the level the cluster was raised to (raise.go)
	certs       certState   // certs.go
}

func newState() *state {
	seed := maphash.MakeSeed()
	return &state{
		counters:    map[int]uint64{},
		recs:        newRecordTable(),
		workspaces:  newWorkspaceTable(),
		seed:        seed,
		tombstones:  map[string]struct{}{},
		clickSeqs:   map[string]uint64{},
		servers:     map[string]string{},
		removed:     map[string]string{},
		requests:    newRequestWindow(seed),
		keys:        map[string]*APIKey{},
		revoked:     map[string]struct{}{},
		opts:        map[uint32]*Options{},
		domains:     map[string]Domain{},
		domainLinks: map[string]int{},
		hooks:       newWebhooks(),
		certs:       newCertState(),
	}
}

// workspaceTable interns workspace names and lists each one's live links.
type workspaceTable struct {
	names []string
	ids   map[string]uint32
	links [][]uint32 // per workspace: positions of its live links, ascending (= id order)
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
	w.links = append(w.links, nil)
	return id
}

// link returns the record at position p as a Link.
func (s *state) link(p uint32) Link {
	r := s.recs.at(p)
	l := s.linkOf(r, &s.recs.text)
	if r.flags&flagOptions != 0 {
		l.Options = s.opts[p]
	}
	return l
}

// linkOf is the record as a Link, without its Options (which only the
// state, not a snapshot's view, can look up).
func (s *state) linkOf(r *record, text *textArena) Link {
	domain, code := SplitCode(text.code(r))
	return Link{
		ID: r.id, Code: code, Domain: domain, URL: text.url(r), Workspace: s.workspaces.names[r.workspace],
		Canonical: text.canonical(r), CreatedAt: r.createdAt, ExpiresAt: r.expiresAt,
		Clicks: r.clicks, LastAccess: r.lastAccess,
	}
}

// The indexes hash with a seed of their own, so no one can choose codes
// or URLs that collide. They are local to this node: nothing replicated or
// written to a snapshot depends on the seed.
func (s *state) codeHash(code string) uint32 { return uint32(maphash.String(s.seed, code)) }

func (s *state) dedupeHash(workspace uint32, domain, canonical string) uint32 {
	h := uint32(maphash.String(s.seed, canonical)) ^ workspace*0x9e3779b1
	if domain != "" {
		h ^= uint32(maphash.String(s.seed, domain))
	}
	return h
}

// domainIndex is the domain part of a qualified code, as dedupeHash takes it.
func (s *state) domainIndex(qualified string) string {
	domain, _ := SplitCode(qualified)
	return domain
}

// lookup returns the position of the live link with this code.
func (s *state) lookup(code string) (uint32, bool) {
	return s.byCode.lookup(s.codeHash(code), func(p uint32) bool {
		return s.recs.text.code(s.recs.at(p)) == code
	})
}

// dedupeLookup returns the position of the link dedupe returns for a
// canonical URL in a workspace and domain.
func (s *state) dedupeLookup(workspace uint32, domain, canonical string) (uint32, bool) {
	return s.dedupe.lookup(s.dedupeHash(workspace, domain, canonical), func(p uint32) bool {
		r := s.recs.at(p)
		return r.workspace == workspace && s.recs.text.canonical(r) == canonical &&
			s.domainIndex(s.recs.text.code(r)) == domain
	})
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
	if !s.mayWrite(r.KeyID, r.Workspace, r.Domain, now) {
		return CreateResult{Err: ErrUnauthorized}
	}
	// A creation time or clicks come only with an import, which takes an
	// administrator: a writer of links may not backdate a link or give it
	// clicks it never had.
	if (r.CreatedAt != 0 || r.Clicks != 0) && !s.mayAdminister(r.KeyID, now) {
		return CreateResult{Err: ErrUnauthorized}
	}
	var asked uint64
	if r.RequestID != "" {
		asked = fingerprint(r)
		if rec, ok := s.requests.get(r.RequestID); ok {
			if rec.fingerprint != asked {
				return CreateResult{Err: ErrRequestIDReused}
			}
			if p, ok := s.lookup(rec.code); ok {
				return CreateResult{Link: s.link(p), Existing: rec.existing}
			}
		}
	}
	res := s.createNew(now, r)
	if res.Err == nil && r.RequestID != "" {
		s.requests.add(requestRecord{id: r.RequestID, code: res.Link.Code, existing: res.Existing, at: now, fingerprint: asked})
	}
	if res.Err == nil && !res.Existing {
		if r.KeyID != "" || !s.bounded() {
			s.audit.add(AuditEntry{At: now, KeyID: r.KeyID, Action: AuditLinkCreate, Workspace: res.Link.Workspace, Subject: res.Link.Code})
		}
		s.webhookLink(EventLinkCreated, now, res.Link)
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
	ws, known := s.workspaces.ids[r.Workspace]
	// existing returns the live, unexpired link at p when dedupe may
	// return it instead of creating one.
	existing := func(p uint32, ok bool) (CreateResult, bool) {
		if !ok || !dedupe || !known {
			return CreateResult{}, false
		}
		rec := s.recs.at(p)
		if rec.workspace != ws || s.recs.text.canonical(rec) != canonical || rec.expired(now) {
			return CreateResult{}, false
		}
		return CreateResult{Link: s.link(p), Existing: true}, true
	}

	var code string
	switch {
	case r.CustomCode != "":
		q := QualifiedCode(r.Domain, r.CustomCode)
		if res, ok := existing(s.lookup(q)); ok {
			return res
		}
		if _, ok := s.tombstones[q]; ok {
			return CreateResult{Err: ErrCodeDeleted}
		}
		if s.taken(q) {
			return CreateResult{Err: ErrCodeTaken}
		}
		code = q
	case r.Strategy == StrategyHash:
		for salt := 0; salt <= codes.MaxHashSalt && code == ""; salt++ {
			q := QualifiedCode(r.Domain, codes.HashCode(canonical, r.Workspace, salt))
			if res, ok := existing(s.lookup(q)); ok {
				return res
			}
			if !s.taken(q) {
				code = q
			}
		}
		if code == "" {
			return CreateResult{Err: ErrHashCollision}
		}
	default:
		if dedupe && known {
			if res, ok := existing(s.dedupeLookup(ws, r.Domain, canonical)); ok {
				return res
			}
		}
		c, err := s.nextCounterCode(r.CodeLength, r.Domain)
		if err != nil {
			return CreateResult{Err: err}
		}
		code = c
	}

	// An imported link keeps its creation time and starts at the clicks it
	// had. Those clicks have no hour, no visitor and no last access: they
	// count in the total (and so towards a visit limit) only.
	created := now
	if r.CreatedAt != 0 {
		created = r.CreatedAt
	}
	s.lastID++
	p := s.insert(record{id: s.lastID, createdAt: created, expiresAt: r.ExpiresAt, clicks: r.Clicks},
		code, r.URL, r.Workspace, canonical, dedupe)
	s.index(p, now)
	s.setOptions(p, r.Options)
	return CreateResult{Link: s.link(p)}
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
	if err := checkTarget(r.URL); err != nil {
		return err
	}
	return r.Options.check()
}

// taken reports whether code can never be handed out: in use, deleted
// before, or a reserved word.
func (s *state) taken(code string) bool {
	if _, ok := s.lookup(code); ok {
		return true
	}
	if _, ok := s.tombstones[code]; ok {
		return true
	}
	return codes.IsReserved(code)
}

// nextCounterCode walks the permutation from the length's counter, skipping
// codes already taken by custom or hash codes.
func (s *state) nextCounterCode(length int, domain string) (string, error) {
	if !s.hasKey {
		return "", ErrNotInitialized
	}
	if length < codes.MinCounterLength || length > codes.MaxCounterLength {
		return "", fmt.Errorf("%w: code length %d", ErrInvalidRequest, length)
	}
	space := codes.CounterSpace(length)
	for n := s.counters[length]; n < space; n++ {
		code, err := codes.CounterCode(s.key, n, length)
		if err != nil {
			return "", fmt.Errorf("counter code: %w", err)
		}
		if q := QualifiedCode(domain, code); !s.taken(q) {
			s.counters[length] = n + 1
			return q, nil
		}
	}
	s.counters[length] = space
	return "", ErrCodeSpaceExhausted
}

// insert stores a new live link: r with its texts. The canonical URL is
// stored only when it differs from the URL. It returns the position.
// Callers keep ids increasing, so positions are in id order.
func (s *state) insert(r record, code, url, workspace, canonical string, dedupe bool) uint32 {
	r.flags = flagLive
	stored := ""
	if dedupe {
		r.flags |= flagDedupe
		if canonical != url {
			stored = canonical
		}
	}
	r.codeLen, r.urlLen, r.canonLen = uint8(len(code)), uint32(len(url)), uint32(len(stored))
	r.workspace = s.workspaces.intern(workspace)
	r.text = s.recs.text.add(code, url, stored)
	p := s.recs.append(r)
	s.byCode.insert(s.codeHash(code), p)
	s.workspaces.links[r.workspace] = append(s.workspaces.links[r.workspace], p)
	if domain := s.domainIndex(code); domain != "" {
		s.domainLinks[domain]++
	}
	return p
}

// index makes a new dedupe link the one dedupe returns, unless a live,
// unexpired link already is.
func (s *state) index(p uint32, now int64) {
	r := s.recs.at(p)
	if !r.dedupe() {
		return
	}
	canonical, domain := s.recs.text.canonical(r), s.domainIndex(s.recs.text.code(r))
	h := s.dedupeHash(r.workspace, domain, canonical)
	if cur, ok := s.dedupeLookup(r.workspace, domain, canonical); ok {
		if !s.recs.at(cur).expired(now) {
			return
		}
		s.recs.mutable(cur).flags &^= flagIndexed
		s.dedupe.remove(h, cur)
	}
	s.dedupe.insert(h, p)
	s.recs.mutable(p).flags |= flagIndexed
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
	s.webhookLink(EventLinkDeleted, c.Now, gone)
	return nil
}

// remove deletes a link and tombstones its code so it is never reused.
// Its record and texts stay until the state is rebuilt from a snapshot.
func (s *state) remove(p uint32) {
	r := s.recs.mutable(p)
	indexed := r.flags&flagIndexed != 0
	r.flags &^= flagLive | flagIndexed
	code := s.recs.text.code(r)
	s.byCode.remove(s.codeHash(code), p)
	s.tombstones[code] = struct{}{}
	list := s.workspaces.links[r.workspace]
	if i, ok := slices.BinarySearch(list, p); ok {
		s.workspaces.links[r.workspace] = slices.Delete(list, i, i+1)
	}
	if indexed {
		s.dedupe.remove(s.dedupeHash(r.workspace, s.domainIndex(code), s.recs.text.canonical(r)), p)
	}
	if domain := s.domainIndex(code); domain != "" {
		s.domainLinks[domain]--
	}
	if r.flags&flagOptions != 0 {
		delete(s.opts, p)
		r.flags &^= flagOptions
	}
	s.visits.forget(p, s.recs.gen, s.recs.sharing.Load() > 0)
}

// addClicks applies a click batch once; it reports whether it was applied.
func (s *state) addClicks(c ClickBatch) bool {
	if c.Seq <= s.clickSeqs[c.Node] {
		return false
	}
	s.clickSeqs[c.Node] = c.Seq
	hour, timed := hourOf(c.Now)
	hours := &s.recs.hours
	if timed {
		hours.newest = max(hours.newest, hour)
	}
	// Only a snapshot taken under the lock Apply holds starts sharing, so
	// this can only fall during the batch (a snapshot released): a copy
	// then made is needless, never wrong.
	sharing := s.recs.sharing.Load() > 0
	for i := range c.Counts {
		cc := &c.Counts[i]
		p, ok := s.lookup(cc.Code)
		if !ok {
			if c.Visitors {
				s.addOrphans(cc, c.Now, sharing)
			}
			continue // an orphan visit, or deleted since the click: nothing to count
		}
		if cc.Visitor.Bot == NotBot {
			s.countClicks(p, cc.Count, c.Now, hour, timed, sharing)
		}
		if c.Visitors {
			s.addVisitors(p, &cc.Visitor, cc.Count, c.Now, sharing)
		}
	}
	s.webhookClicks(c)
	return true
}

// expiredBefore lists the live links that expired before t.
func (s *state) expiredBefore(t int64) []uint32 {
	var expired []uint32
	for p := range s.recs.n {
		if r := s.recs.at(p); r.live() && r.expiresAt != 0 && r.expiresAt < t {
			expired = append(expired, p)
		}
	}
	return expired
}

func (s *state) purge(c PurgeCommand) error {
	for _, p := range s.expiredBefore(c.ExpiredBefore) {
		s.remove(p)
	}
	s.requests.dropBefore(c.RequestsBefore)
	return nil
}

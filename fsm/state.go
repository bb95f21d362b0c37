package fsm

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

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
)

// Link is one short link as the FSM stores it. Times are unix milliseconds.
type Link struct {
	ID         uint64
	Code       string
	URL        string
	Workspace  string
	Canonical  string // set when the link takes part in dedupe (dedupe or hash)
	CreatedAt  int64
	ExpiresAt  int64 // 0: never
	Clicks     uint64
	LastAccess int64 // 0: never clicked
}

// Expired reports whether the link is past its expiry at time now.
func (l *Link) Expired(now int64) bool { return l.ExpiresAt != 0 && now >= l.ExpiresAt }

// CreateResult is what one CreateRequest ended in.
type CreateResult struct {
	Link     Link
	Existing bool // dedupe found the link instead of creating one
	Err      error
}

// requestRecord remembers the outcome of a create that carried a RequestID.
type requestRecord struct {
	id          string
	code        string
	existing    bool
	at          int64
	fingerprint uint64 // of the request, so a key cannot be reused for another
}

// fingerprint identifies what a create asked for (FNV-1a: deterministic on
// every node).
func fingerprint(r CreateRequest) uint64 {
	h := fnv.New64a()
	for _, part := range []string{r.URL, r.Workspace, r.CustomCode, strconv.Itoa(int(r.Strategy)),
		strconv.FormatBool(r.Dedupe), strconv.FormatInt(r.ExpiresAt, 10)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// state is the replicated data. Only Apply and Restore change it, and only
// from the Raft FSM goroutine while holding FSM.mu for writing.
type state struct {
	hasKey      bool
	key         codes.Key
	clusterID   [16]byte
	lastID      uint64
	counters    map[int]uint64 // next counter value per code length
	links       map[string]*Link
	byWorkspace map[string][]*Link // each sorted by ID, ascending
	dedupe      map[string]string  // workspace + "\x00" + canonical URL → code
	tombstones  map[string]struct{}
	clickSeqs   map[string]uint64 // node → last applied click batch sequence
	servers     map[string]string // server id → HTTP address
	requests    map[string]requestRecord
	requestLog  []requestRecord // in apply order, pruned by PurgeCommand
}

func newState() *state {
	return &state{
		counters:    map[int]uint64{},
		links:       map[string]*Link{},
		byWorkspace: map[string][]*Link{},
		dedupe:      map[string]string{},
		tombstones:  map[string]struct{}{},
		clickSeqs:   map[string]uint64{},
		servers:     map[string]string{},
		requests:    map[string]requestRecord{},
	}
}

func dedupeKey(workspace, canonical string) string { return workspace + "\x00" + canonical }

// apply decodes and applies one log entry and returns its result.
func (s *state) apply(data []byte) any {
	cmd, err := DecodeCommand(data)
	if err != nil {
		return err
	}
	switch c := cmd.(type) {
	case InitCommand:
		if !s.hasKey {
			s.hasKey, s.key, s.clusterID = true, c.Key, c.ClusterID
		}
		return nil
	case CreateBatch:
		results := make([]CreateResult, len(c.Items))
		for i, it := range c.Items {
			results[i] = s.create(c.Now, it)
		}
		return results
	case DeleteCommand:
		return s.delete(c.Code)
	case ClickBatch:
		return s.addClicks(c)
	case PurgeCommand:
		s.purge(c)
		return nil
	case ServerCommand:
		if c.HTTPAddr == "" {
			delete(s.servers, c.ID)
		} else {
			s.servers[c.ID] = c.HTTPAddr
		}
		return nil
	}
	return fmt.Errorf("apply: unhandled command %T", cmd)
}

func (s *state) create(now int64, r CreateRequest) CreateResult {
	var asked uint64
	if r.RequestID != "" {
		asked = fingerprint(r)
		if rec, ok := s.requests[r.RequestID]; ok {
			if rec.fingerprint != asked {
				return CreateResult{Err: ErrRequestIDReused}
			}
			if l := s.links[rec.code]; l != nil {
				return CreateResult{Link: *l, Existing: rec.existing}
			}
		}
	}
	res := s.createNew(now, r)
	if res.Err == nil && r.RequestID != "" {
		rec := requestRecord{id: r.RequestID, code: res.Link.Code, existing: res.Existing, at: now, fingerprint: asked}
		s.requests[rec.id] = rec
		s.requestLog = append(s.requestLog, rec)
	}
	return res
}

func (s *state) createNew(now int64, r CreateRequest) CreateResult {
	if r.URL == "" || r.Workspace == "" {
		return CreateResult{Err: ErrInvalidRequest}
	}
	dedupe := r.Dedupe || r.Strategy == StrategyHash
	canonical := r.Canonical
	if dedupe && canonical == "" {
		return CreateResult{Err: fmt.Errorf("%w: dedupe without a canonical URL", ErrInvalidRequest)}
	}
	if !dedupe {
		canonical = ""
	}
	same := func(l *Link) bool {
		return dedupe && l.Workspace == r.Workspace && l.Canonical == canonical && !l.Expired(now)
	}

	var code string
	switch {
	case r.CustomCode != "":
		if codes.IsReserved(r.CustomCode) {
			return CreateResult{Err: ErrReserved}
		}
		if l := s.links[r.CustomCode]; l != nil && same(l) {
			return CreateResult{Link: *l, Existing: true}
		}
		if s.taken(r.CustomCode) {
			return CreateResult{Err: ErrCodeTaken}
		}
		code = r.CustomCode
	case r.Strategy == StrategyHash:
		for salt := 0; salt <= codes.MaxHashSalt && code == ""; salt++ {
			c := codes.HashCode(canonical, r.Workspace, salt)
			if l := s.links[c]; l != nil && same(l) {
				return CreateResult{Link: *l, Existing: true}
			}
			if !s.taken(c) {
				code = c
			}
		}
		if code == "" {
			return CreateResult{Err: ErrHashCollision}
		}
	default:
		if dedupe {
			if l := s.links[s.dedupe[dedupeKey(r.Workspace, canonical)]]; l != nil && same(l) {
				return CreateResult{Link: *l, Existing: true}
			}
		}
		c, err := s.nextCounterCode(r.CodeLength)
		if err != nil {
			return CreateResult{Err: err}
		}
		code = c
	}

	s.lastID++
	l := &Link{
		ID: s.lastID, Code: code, URL: r.URL, Workspace: r.Workspace, Canonical: canonical,
		CreatedAt: now, ExpiresAt: r.ExpiresAt,
	}
	s.insert(l, now)
	return CreateResult{Link: *l}
}

// taken reports whether code can never be handed out: in use, deleted
// before, or a reserved word.
func (s *state) taken(code string) bool {
	if _, ok := s.links[code]; ok {
		return true
	}
	if _, ok := s.tombstones[code]; ok {
		return true
	}
	return codes.IsReserved(code)
}

// nextCounterCode walks the permutation from the length's counter, skipping
// codes already taken by custom or hash codes.
func (s *state) nextCounterCode(length int) (string, error) {
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
		if !s.taken(code) {
			s.counters[length] = n + 1
			return code, nil
		}
	}
	s.counters[length] = space
	return "", ErrCodeSpaceExhausted
}

// insert adds a new link and indexes it. IDs only grow, so appending keeps
// the workspace list sorted.
func (s *state) insert(l *Link, now int64) {
	s.links[l.Code] = l
	s.byWorkspace[l.Workspace] = append(s.byWorkspace[l.Workspace], l)
	if l.Canonical == "" {
		return
	}
	key := dedupeKey(l.Workspace, l.Canonical)
	if cur := s.links[s.dedupe[key]]; cur == nil || cur.Expired(now) {
		s.dedupe[key] = l.Code
	}
}

// insertRestored adds a link read from a snapshot, whose dedupe entries are
// restored separately.
func (s *state) insertRestored(l *Link) {
	s.links[l.Code] = l
	s.byWorkspace[l.Workspace] = append(s.byWorkspace[l.Workspace], l)
}

func (s *state) delete(code string) error {
	l := s.links[code]
	if l == nil {
		return ErrNotFound
	}
	s.remove(l)
	return nil
}

// remove deletes a link and tombstones its code so it is never reused.
func (s *state) remove(l *Link) {
	delete(s.links, l.Code)
	s.tombstones[l.Code] = struct{}{}
	ws := s.byWorkspace[l.Workspace]
	if i, ok := slices.BinarySearchFunc(ws, l.ID, func(x *Link, id uint64) int {
		return compareUint64(x.ID, id)
	}); ok {
		ws = slices.Delete(ws, i, i+1)
	}
	if len(ws) == 0 {
		delete(s.byWorkspace, l.Workspace)
	} else {
		s.byWorkspace[l.Workspace] = ws
	}
	if l.Canonical != "" {
		key := dedupeKey(l.Workspace, l.Canonical)
		if s.dedupe[key] == l.Code {
			delete(s.dedupe, key)
		}
	}
}

func compareUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// addClicks applies a click batch once; it reports whether it was applied.
func (s *state) addClicks(c ClickBatch) bool {
	if c.Seq <= s.clickSeqs[c.Node] {
		return false
	}
	s.clickSeqs[c.Node] = c.Seq
	for _, cc := range c.Counts {
		l := s.links[cc.Code]
		if l == nil {
			continue // deleted since the click: nothing to count
		}
		l.Clicks += cc.Count
		if c.Now > l.LastAccess {
			l.LastAccess = c.Now
		}
	}
	return true
}

func (s *state) purge(c PurgeCommand) {
	var expired []*Link
	for _, l := range s.links {
		if l.ExpiresAt != 0 && l.ExpiresAt < c.ExpiredBefore {
			expired = append(expired, l)
		}
	}
	for _, l := range expired {
		s.remove(l)
	}
	i := 0
	for i < len(s.requestLog) && s.requestLog[i].at < c.RequestsBefore {
		delete(s.requests, s.requestLog[i].id)
		i++
	}
	s.requestLog = slices.Clone(s.requestLog[i:])
}

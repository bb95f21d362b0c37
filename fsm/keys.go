package fsm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Scope is one permission an API key carries; a key's scopes are a set of
// these bits.
type Scope uint8

// The scopes, one bit each: reading links, writing them (creates, edits,
// deletes), reading their statistics, and administering.
const (
	ScopeLinksRead Scope = 1 << iota
	ScopeLinksWrite
	ScopeStatsRead
	// ScopeAdmin implies every other scope in every workspace.
	ScopeAdmin

	allScopes = ScopeLinksRead | ScopeLinksWrite | ScopeStatsRead | ScopeAdmin
)

// scopeNames are the scopes' names in the API, in bit order.
var scopeNames = [...]string{"links:read", "links:write", "stats:read", "admin"}

// ParseScope returns the scope with this API name.
func ParseScope(name string) (Scope, bool) {
	for i, n := range scopeNames {
		if n == name {
			return Scope(1) << i, true
		}
	}
	return 0, false
}

// Names lists the scopes of the set by their API names, in a fixed order.
func (s Scope) Names() []string {
	names := []string{}
	for i, n := range scopeNames {
		if s&(Scope(1)<<i) != 0 {
			names = append(names, n)
		}
	}
	return names
}

// AllWorkspaces in a key's workspace list lets it into every workspace.
const AllWorkspaces = "*"

// RootKeyID is the key id writes made with the operator's --admin-token
// are recorded under. Key ids never contain '-', so no key can take it.
const RootKeyID = "admin-token"

// KeyHashSize is the size of a key's stored hash (SHA-256 of its secret).
const KeyHashSize = 32

// APIKey is an API key as the replicated state keeps it: never the secret,
// only a hash of it, which the HTTP layer compares in constant time.
type APIKey struct {
	ID         string // public and stable; part of the key a client sends
	Name       string
	Hash       [KeyHashSize]byte
	Scopes     Scope
	Workspaces []string // workspace names, or AllWorkspaces alone
	CreatedAt  int64    // unix milliseconds
	ExpiresAt  int64    // 0: never
	CreatedBy  string   // id of the key that created this one (the command's By)
	// Domains limits the key to links in these registered domains; nil:
	// every domain, the default one included. Never set on an admin key.
	Domains []string
	// OwnLinksOnly limits the key to the links it created (authors.go;
	// Shlink's AUTHORED_SHORT_URLS role). Never set on an admin key.
	OwnLinksOnly bool
}

// Expired reports whether the key is past its expiry at time now.
func (k *APIKey) Expired(now int64) bool { return k.ExpiresAt != 0 && now >= k.ExpiresAt }

// Has reports whether the key carries scope, admin implying every scope.
func (k *APIKey) Has(scope Scope) bool { return k.Scopes&(scope|ScopeAdmin) != 0 }

// Sees reports whether the key may act in workspace at all.
func (k *APIKey) Sees(workspace string) bool {
	if k.Scopes&ScopeAdmin != 0 {
		return true
	}
	return slices.Contains(k.Workspaces, AllWorkspaces) || slices.Contains(k.Workspaces, workspace)
}

// SeesDomain reports whether the key may act on links in domain ("" is
// the default domain).
func (k *APIKey) SeesDomain(domain string) bool {
	return len(k.Domains) == 0 || slices.Contains(k.Domains, domain)
}

// SeesAuthor reports whether the key may act on a link created by the key
// author ("": by none): any, unless it is limited to its own links.
func (k *APIKey) SeesAuthor(author string) bool { return !k.OwnLinksOnly || author == k.ID }

// Allows reports whether the key may use scope in workspace at time now.
func (k *APIKey) Allows(scope Scope, workspace string, now int64) bool {
	return !k.Expired(now) && k.Has(scope) && k.Sees(workspace)
}

// Errors of the key commands and of writes made with a key the state does
// not accept.
var (
	ErrKeyExists    = errors.New("a key with that id already exists")
	ErrKeyNotFound  = errors.New("no key with that id")
	ErrKeyInvalid   = errors.New("invalid key")
	ErrUnauthorized = errors.New("the key that made this write may not make it")
)

// KeyIDLength is the length of a key id: lowercase letters and digits.
const KeyIDLength = 12

// ValidKeyID reports whether id has the shape every key id has.
func ValidKeyID(id string) bool {
	if len(id) != KeyIDLength {
		return false
	}
	for i := range len(id) {
		if c := id[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// Bounds Apply holds keys to, so a key cannot grow without limit whoever
// proposed it. The HTTP layer refuses more before proposing.
const (
	MaxKeyName       = 256 // bytes
	MaxKeyWorkspaces = 64
	MaxKeyDomains    = 64
	maxWorkspaceLen  = 64
	// MaxKeys bounds the live keys once the cluster is raised to
	// LevelBounds: a key is at most some 6 KiB, so keys hold at most about
	// 60 MiB. Revoked ids (12 bytes each) are kept for good.
	MaxKeys = 10_000
)

// ErrTooManyKeys refuses a key past MaxKeys.
var ErrTooManyKeys = fmt.Errorf("%w: at most %d keys; revoke one first", ErrInvalidRequest, MaxKeys)

// validKey checks what a stored key must satisfy.
func validKey(k *APIKey) bool {
	if !ValidKeyID(k.ID) || len(k.Name) > MaxKeyName || k.Scopes == 0 || k.Scopes&^allScopes != 0 ||
		len(k.Workspaces) == 0 || len(k.Workspaces) > MaxKeyWorkspaces {
		return false
	}
	for _, w := range k.Workspaces {
		if w == "" || len(w) > maxWorkspaceLen {
			return false
		}
	}
	limited := len(k.Domains) > 0 || k.OwnLinksOnly
	if len(k.Domains) > MaxKeyDomains || limited && k.Scopes&ScopeAdmin != 0 {
		return false
	}
	for _, d := range k.Domains {
		if !validDomainName(d) {
			return false
		}
	}
	return true
}

// KeyCreateCommand adds an API key. By is the id of the key that made it.
type KeyCreateCommand struct {
	Key APIKey
	By  string
	Now int64
}

// KeyRevokeCommand removes an API key: from its apply on, no node accepts it.
type KeyRevokeCommand struct {
	ID  string
	By  string
	Now int64
}

// createKey applies a KeyCreateCommand.
func (s *state) createKey(c KeyCreateCommand) error {
	if !s.keys.mayAdminister(c.By, c.Now) {
		return ErrUnauthorized
	}
	k := c.Key
	if !validKey(&k) {
		return ErrKeyInvalid
	}
	if _, ok := s.keys[k.ID]; ok {
		return ErrKeyExists
	}
	if _, ok := s.revoked[k.ID]; ok {
		return ErrKeyExists
	}
	if s.bounded() && len(s.keys) >= MaxKeys {
		return ErrTooManyKeys
	}
	if k.OwnLinksOnly && s.raised < LevelTargets {
		return ErrNotRaised // authors are recorded from LevelTargets on
	}
	k.Workspaces, k.Domains = slices.Clone(k.Workspaces), slices.Clone(k.Domains)
	k.CreatedBy = c.By
	s.keys[k.ID] = &k
	s.audit.add(AuditEntry{At: c.Now, KeyID: c.By, Action: AuditKeyCreate, Subject: k.ID})
	return nil
}

// revokeKey applies a KeyRevokeCommand.
func (s *state) revokeKey(c KeyRevokeCommand) error {
	if !s.keys.mayAdminister(c.By, c.Now) {
		return ErrUnauthorized
	}
	if _, ok := s.keys[c.ID]; !ok {
		return ErrKeyNotFound
	}
	delete(s.keys, c.ID)
	s.revoked[c.ID] = struct{}{}
	s.links.forgetAuthor(c.ID)
	s.audit.add(AuditEntry{At: c.Now, KeyID: c.By, Action: AuditKeyRevoke, Subject: c.ID})
	return nil
}

// keyTable is the API keys by id. A key never changes once added: a
// snapshot or a restored state may share it.
type keyTable map[string]*APIKey

// mayAdminister is the state's own check of who makes or revokes a key,
// as mayWrite is for links: the operator's token, an admin key that is
// still valid at the command's time, or no one at all only for the
// initial key of a cluster that has none. A key revoked or expired while
// its request was on the way to the log can do nothing more.
func (keys keyTable) mayAdminister(by string, now int64) bool {
	switch by {
	case RootKeyID:
		return true
	case "":
		return len(keys) == 0
	}
	k, ok := keys[by]
	return ok && !k.Expired(now) && k.Scopes&ScopeAdmin != 0
}

// writableLink is the position and workspace of the link of a qualified
// code that keyID may write at now: ErrNotFound without one,
// ErrUnauthorized when the key may not (mayWrite), ErrNotFound too when
// the key is limited to its own links and another made this one.
func (s *state) writableLink(code, keyID string, now int64) (uint64, string, error) {
	p, ok := s.links.lookup(code)
	if !ok {
		return 0, "", ErrNotFound
	}
	if !s.keys.seesAuthor(keyID, s.links.authorOf(p)) {
		return 0, "", ErrNotFound // as the HTTP layer answers it: no such link
	}
	ws := s.links.workspaceOf(p)
	if !s.keys.mayWrite(keyID, ws, s.links.domainIndex(code), now) {
		return 0, "", ErrUnauthorized
	}
	return p, ws, nil
}

// mayWrite is the state's own check of a link write's key: the key must
// exist and allow writing links in the workspace at the write's time. An
// empty key id is an anonymous create (public creates, and entries written
// before keys existed); RootKeyID is the operator's token, which only the
// nodes know. A revoked key therefore cannot write through any node, even
// one that has not learnt of the revocation yet.
func (keys keyTable) mayWrite(keyID, workspace, domain string, now int64) bool {
	if keyID == "" || keyID == RootKeyID {
		return true
	}
	k, ok := keys[keyID]
	return ok && k.Allows(ScopeLinksWrite, workspace, now) && k.SeesDomain(domain)
}

// Key returns the key with this id.
func (f *FSM) Key(id string) (APIKey, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	k, ok := f.s.keys[id]
	if !ok {
		return APIKey{}, false
	}
	return *k, true
}

// Keys returns every key, by id.
func (f *FSM) Keys() []APIKey {
	f.mu.RLock()
	defer f.mu.RUnlock()
	keys := make([]APIKey, 0, len(f.s.keys))
	for _, k := range f.s.keys {
		keys = append(keys, *k)
	}
	slices.SortFunc(keys, func(a, b APIKey) int { return strings.Compare(a.ID, b.ID) })
	return keys
}

// HasKeys reports whether any API key exists.
func (f *FSM) HasKeys() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.s.keys) > 0
}

// encodeKeyDomains writes, for the keys limited to domains, their id and
// domains, by id (keys are sorted).
func (snap *snapshot) encodeKeyDomains(e *encoder) {
	n := 0
	for _, k := range snap.keys {
		if len(k.Domains) > 0 {
			n++
		}
	}
	e.uvarint(uint64(n))
	for _, k := range snap.keys {
		if len(k.Domains) > 0 {
			e.string(k.ID)
			encodeStrings(e, k.Domains)
		}
	}
}

// readKeyDomains reads what encodeKeyDomains wrote; each entry must name
// a key, and the key's domains must pass validKey.
func readKeyDomains(st *state, d *decoder) error {
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		id, domains := d.string(), decodeStrings(d)
		k, ok := st.keys[id]
		if d.err != nil {
			return d.err
		}
		if !ok {
			return fmt.Errorf("domains of key %q, which does not exist", id)
		}
		limited := *k
		limited.Domains = domains
		if !validKey(&limited) {
			return fmt.Errorf("key %q: invalid domains", id)
		}
		st.keys[id] = &limited
	}
	return nil
}

// encodeKeys writes the API keys section, by id.
func (snap *snapshot) encodeKeys(e *encoder) {
	e.uvarint(uint64(len(snap.keys)))
	for _, k := range snap.keys {
		encodeKey(e, k)
		e.string(k.CreatedBy)
	}
	e.uvarint(uint64(len(snap.revoked)))
	for _, id := range snap.revoked {
		e.string(id)
	}
}

// readKeys reads the API keys, each one Apply would accept, in strictly
// increasing id order, then the ids of revoked keys.
func readKeys(st *state, d *decoder) error {
	prev := ""
	for n := d.count(1 + 1 + KeyHashSize + 1 + 1 + 2 + 1); n > 0 && d.err == nil; n-- {
		k := decodeKey(d)
		k.CreatedBy = d.string()
		if d.err != nil {
			break
		}
		if !validKey(k) || k.ID <= prev {
			return fmt.Errorf("key %q invalid or out of order", k.ID)
		}
		prev = k.ID
		st.keys[k.ID] = k
	}
	for n := d.count(1); n > 0 && d.err == nil; n-- {
		id := d.string()
		if _, live := st.keys[id]; d.err == nil && (!ValidKeyID(id) || live) {
			return fmt.Errorf("revoked key %q invalid or still live", id)
		}
		st.revoked[id] = struct{}{}
	}
	return d.err
}

// seesAuthor reports whether the write of keyID may touch a link created
// by author: only a key limited to its own links may not.
func (keys keyTable) seesAuthor(keyID, author string) bool {
	k, ok := keys[keyID]
	return !ok || k.SeesAuthor(author)
}

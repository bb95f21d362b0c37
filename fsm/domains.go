package fsm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A link lives in one domain: the default one (""), which every host that
// is not a registered domain serves, or a registered domain. Codes are
// unique per domain, so the state names a link by its qualified code: the
// code itself in the default domain, "domain/code" in another. Codes never
// hold '/', and domain names never do either, so the two cannot meet; and
// every map keyed by code (the code index, tombstones, clicks, the
// idempotency window) is per domain without knowing about domains.

// MaxDomainLen bounds a domain name, so a qualified code (domain, '/', a
// custom code of up to 64 bytes) fits a record's one-byte code length.
const MaxDomainLen = 128

// ErrUnknownDomain is a create or edit naming a domain no one registered.
var ErrUnknownDomain = errors.New("no such domain is registered")

// ErrDomainInUse is removing a domain that still has links.
var ErrDomainInUse = errors.New("the domain still has links")

// MaxDomains bounds the registered domains once the cluster is raised to
// LevelBounds: with two redirects of at most 2048 bytes each, they hold at
// most about 4 MiB.
const MaxDomains = 1000

// ErrTooManyDomains refuses a new domain past MaxDomains.
var ErrTooManyDomains = fmt.Errorf("%w: at most %d domains", ErrInvalidRequest, MaxDomains)

// QualifiedCode is how the state names the link with code in domain.
func QualifiedCode(domain, code string) string {
	if domain == "" {
		return code
	}
	return domain + "/" + code
}

// SplitCode is the inverse of QualifiedCode.
func SplitCode(qualified string) (domain, code string) {
	if i := strings.LastIndexByte(qualified, '/'); i >= 0 {
		return qualified[:i], qualified[i+1:]
	}
	return "", qualified
}

// Domain is a registered domain and where it sends visitors who ask for
// no code or a code it does not have ("" for the default answers).
type Domain struct {
	Name             string
	RootRedirect     string
	NotFoundRedirect string
	// InvalidRedirect is where a visit to a link that exists but cannot
	// be visited (expired, not yet valid, out of visits) goes instead of
	// an error page (entry level LevelVisitRows).
	InvalidRedirect string
}

// The default domain's redirects are a Domain without a name, kept apart
// from the registered ones: a DomainCommand whose Domain.Name is "" sets
// them (Remove clears them), once the cluster is raised to
// LevelVisitRows. Every host that is not a registered domain uses them.

// DomainCommand registers a domain, changes its redirects, or removes it.
type DomainCommand struct {
	Domain Domain
	Remove bool
	By     string // the key that asked: an admin key or the operator's token
	Now    int64
}

// validDomainName is the state's floor for a domain's name: lower case,
// letters, digits, '-' and '.', the HTTP layer having checked it is a host
// name. A name is what Host headers are compared with, so one spelling.
func validDomainName(name string) bool {
	if name == "" || len(name) > MaxDomainLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func (s *state) setDomain(c DomainCommand) error {
	if !s.keys.mayAdminister(c.By, c.Now) || c.By == "" {
		return ErrUnauthorized
	}
	d := c.Domain
	if c.Level() >= LevelVisitRows && s.raised < LevelVisitRows {
		return ErrNotRaised
	}
	if d.Name == "" {
		return s.setDefaultDomain(c)
	}
	if !validDomainName(d.Name) {
		return fmt.Errorf("%w: domain name %q", ErrInvalidRequest, d.Name)
	}
	if c.Remove {
		if _, ok := s.domains[d.Name]; !ok {
			return ErrUnknownDomain
		}
		if s.links.linksIn(d.Name) > 0 {
			return ErrDomainInUse
		}
		delete(s.domains, d.Name)
		s.orphans.forgetDomain(d.Name)
		s.audit.add(AuditEntry{At: c.Now, KeyID: c.By, Action: AuditDomainRemove, Subject: d.Name})
		return nil
	}
	if err := d.checkRedirects(s.raised); err != nil {
		return err
	}
	if _, known := s.domains[d.Name]; !known && s.bounded() && len(s.domains) >= MaxDomains {
		return ErrTooManyDomains
	}
	s.domains[d.Name] = d
	s.audit.add(AuditEntry{At: c.Now, KeyID: c.By, Action: AuditDomainSet, Subject: d.Name})
	return nil
}

func (d *Domain) checkRedirects(raised int) error {
	for _, target := range []string{d.RootRedirect, d.NotFoundRedirect, d.InvalidRedirect} {
		if target == "" {
			continue
		}
		if err := checkTarget(target, raised); err != nil {
			return fmt.Errorf("domain redirect: %w", err)
		}
	}
	return nil
}

// setDefaultDomain sets or clears the default domain's redirects.
func (s *state) setDefaultDomain(c DomainCommand) error {
	d := c.Domain
	if c.Remove {
		d = Domain{}
	}
	if err := d.checkRedirects(s.raised); err != nil {
		return err
	}
	s.defaultDomain = d
	s.audit.add(AuditEntry{At: c.Now, KeyID: c.By, Action: AuditDomainSet, Subject: "(default)"})
	return nil
}

// DefaultDomain is the default domain's redirects (its Name is "").
func (f *FSM) DefaultDomain() Domain {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.defaultDomain
}

// Level is LevelVisitRows for the default domain's redirects and for a
// domain with an invalid-link redirect, LevelOptions for any other.
func (c DomainCommand) Level() int {
	if c.Domain.Name == "" || c.Domain.InvalidRedirect != "" {
		return LevelVisitRows
	}
	return LevelOptions
}

// Domains returns the registered domains, by name.
func (f *FSM) Domains() []Domain {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Domain, 0, len(f.s.domains))
	for _, d := range f.s.domains {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Domain) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// DomainOfHost returns the registered domain a request's Host names, the
// port and letter case aside. It does not allocate.
func (f *FSM) DomainOfHost(host []byte) (Domain, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.domains.ofHost(host)
}

// domainTable is the registered domains by name.
type domainTable map[string]Domain

// ofHost is the registered domain a request's Host header names, its
// port and letter case aside, without allocating.
func (t domainTable) ofHost(host []byte) (Domain, bool) {
	if len(t) == 0 {
		return Domain{}, false
	}
	if i := strings.LastIndexByte(string(host), ':'); i >= 0 && !strings.Contains(string(host[i:]), "]") {
		host = host[:i] // the port; an IPv6 literal's last colon sits before ']'
	}
	if len(host) > MaxDomainLen {
		return Domain{}, false
	}
	var lower [MaxDomainLen]byte
	for i, c := range host {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	d, ok := t[string(lower[:len(host)])]
	return d, ok
}

// writeDomains writes the registered domains by name and, from version
// 10, the default domain's redirects.
func writeDomains(snap *snapshot, e *encoder, version byte, _ func(bool)) {
	e.uvarint(uint64(len(snap.domains)))
	for _, d := range snap.domains {
		e.string(d.Name)
		e.string(d.RootRedirect)
		e.string(d.NotFoundRedirect)
		if version >= snapshotV10 {
			e.string(d.InvalidRedirect)
		}
	}
	if version >= snapshotV10 {
		e.string(snap.defaultDomain.RootRedirect)
		e.string(snap.defaultDomain.NotFoundRedirect)
		e.string(snap.defaultDomain.InvalidRedirect)
	}
}

// readDomains reads the registered domains, and checks that every link
// outside the default domain lives in one of them.
func readDomains(st *state, d *decoder, version byte) error {
	for n := d.count(3); n > 0 && d.err == nil; n-- {
		dom := Domain{Name: d.string(), RootRedirect: d.string(), NotFoundRedirect: d.string()}
		if version >= snapshotV10 {
			dom.InvalidRedirect = d.string()
		}
		if d.err == nil && !validDomainName(dom.Name) {
			return fmt.Errorf("domain name %q", dom.Name)
		}
		st.domains[dom.Name] = dom
	}
	if version >= snapshotV10 {
		st.defaultDomain = Domain{RootRedirect: d.string(), NotFoundRedirect: d.string(), InvalidRedirect: d.string()}
	}
	for name := range st.links.domainsUsed() {
		if _, ok := st.domains[name]; !ok && d.err == nil {
			return fmt.Errorf("links in domain %q, which is not registered", name)
		}
	}
	return nil
}

package fsm

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Orphan visits are visits that found no link, as Shlink counts them: to
// a domain's root, to a code-shaped path naming no link that may be
// visited, and to any other path not found. Once the cluster is raised
// to LevelVisitRows they come in the same exactly-once click batches as
// clicks, each as a count of a reserved code (OrphanCode), and are kept
// per domain and kind exactly as a link's visitors are: days of counts
// and, per hour, tallies of visitor tuples, with the same bounds (64
// tuples per domain, kind and hour, the rest in overflow) and retention.
// So their rows are listed as a link's are (visitrows.go). No path or
// other client string is kept: a row's visited URL is made from its
// domain and kind by whoever shows it.

// OrphanKind is what an orphan visit asked for.
type OrphanKind uint8

// The kinds of orphan visit, as Shlink names them (String).
const (
	// OrphanBaseURL is a visit to a domain's root, "/".
	OrphanBaseURL OrphanKind = iota
	// OrphanInvalidShortURL is a visit to a code-shaped path that names
	// no link, or a link that may not be visited now (expired, not yet
	// valid, out of visits).
	OrphanInvalidShortURL
	// OrphanRegular404 is a visit to any other path not found.
	OrphanRegular404
	orphanKinds
)

var orphanKindNames = [orphanKinds]string{"base_url", "invalid_short_url", "regular_404"}

// String is the kind's Shlink name ("base_url").
func (k OrphanKind) String() string {
	if k < orphanKinds {
		return orphanKindNames[k]
	}
	return "unknown"
}

// ParseOrphanKind reads a kind's Shlink name.
func ParseOrphanKind(name string) (OrphanKind, bool) {
	i := slices.Index(orphanKindNames[:], name)
	return OrphanKind(max(i, 0)), i >= 0
}

// orphanLetters mark the kind in an orphan visit's code.
var orphanLetters = [orphanKinds]byte{'b', 'i', 'n'}

// OrphanCode is the code a click batch carries for an orphan visit of
// kind to domain ("" for the default domain): '/', the kind's letter,
// then the domain's name. No link's code starts with '/': a code never
// holds one, and a domain's code is its non-empty name, '/' and the code.
// The default domain's are constants, so recording them allocates
// nothing.
func OrphanCode(kind OrphanKind, domain string) string {
	if domain == "" {
		switch kind {
		case OrphanBaseURL:
			return "/b"
		case OrphanInvalidShortURL:
			return "/i"
		}
		return "/n"
	}
	return "/" + string(orphanLetters[kind%orphanKinds]) + domain
}

// orphanOf reads an orphan visit's code: its kind and domain; false for
// any other code.
func orphanOf(code string) (OrphanKind, string, bool) {
	if len(code) < 2 || code[0] != '/' {
		return 0, "", false
	}
	k := slices.Index(orphanLetters[:], code[1])
	domain := code[2:]
	if k < 0 || domain != "" && !validDomainName(domain) {
		return 0, "", false
	}
	return OrphanKind(k), domain, true
}

// orphanKey names one domain's orphan visits of one kind.
type orphanKey struct {
	domain string
	kind   OrphanKind
}

func compareOrphanKeys(a, b orphanKey) int {
	return cmp.Or(strings.Compare(a.domain, b.domain), cmp.Compare(a.kind, b.kind))
}

// orphanTable holds orphan visits by domain and kind, each as a link's
// visitors are held. A snapshot copies the map and shares the values,
// which are copied before a change while it may read them, as
// a link's days once were (linkVisits).
type orphanTable struct {
	byKey map[orphanKey]*linkVisits
}

// share returns a view for a snapshot.
func (o *orphanTable) share() orphanTable { return orphanTable{byKey: maps.Clone(o.byKey)} }

// sortedKeys is the table's keys in order.
func (o *orphanTable) sortedKeys() []orphanKey {
	return slices.SortedFunc(maps.Keys(o.byKey), compareOrphanKeys)
}

// mutable returns k's visits for changing, made or copied as needed.
func (o *orphanTable) mutable(k orphanKey, gen uint64, sharing bool) *linkVisits {
	lv := o.byKey[k]
	switch {
	case lv == nil:
		if o.byKey == nil {
			o.byKey = map[orphanKey]*linkVisits{}
		}
		lv = &linkVisits{gen: gen}
		k.domain = strings.Clone(k.domain) // may view a decoded entry
		o.byKey[k] = lv
	case lv.gen != gen && sharing:
		cp := *lv
		cp.gen, cp.days = gen, slices.Clone(lv.days)
		lv = &cp
		o.byKey[k] = lv
	}
	return lv
}

// forgetDomain drops a removed domain's orphan visits.
func (o *orphanTable) forgetDomain(domain string) {
	for k := range orphanKinds {
		delete(o.byKey, orphanKey{domain, k})
	}
}

// addOrphans counts n orphan visits of cc's visitor, once the cluster is
// raised to LevelVisitRows, to a domain that is registered (or the
// default one); anything else counts nothing. The caller has already
// moved the newest hour.
func (s *state) addOrphans(cc *ClickCount, now int64, sharing bool) {
	kind, domain, ok := orphanOf(cc.Code)
	hour, timed := hourOf(now)
	if !ok || !timed || cc.Count == 0 || s.raised < LevelVisitRows {
		return
	}
	if _, known := s.domains[domain]; domain != "" && !known {
		return // removed since the visit
	}
	lv := s.orphans.mutable(orphanKey{domain, kind}, s.links.recs.gen, sharing)
	if d := lv.mutableDay(hour/24, s.links.oldestDay(), s.links.recs.gen, sharing); d != nil {
		slot, inserted := d.add(&cc.Visitor, cc.Count)
		d.tally(uint8(hour%24), &cc.Visitor, cc.Count, slot, inserted, sharing)
	}
}

// OrphanFilter narrows orphan visits to a kind and a domain.
type OrphanFilter struct {
	Kind    OrphanKind
	AnyKind bool
	// Domain is a registered domain's name, "" the default domain.
	Domain    string
	AnyDomain bool
}

func (f *OrphanFilter) keeps(k orphanKey) bool {
	return (f.AnyKind || k.kind == f.Kind) && (f.AnyDomain || k.domain == f.Domain)
}

// OrphanVisitRows lists the orphan visits the filter keeps as visit rows,
// newest first; rows of one day list by domain, then kind. A query with
// Limit 0 only counts them.
func (f *FSM) OrphanVisitRows(filter OrphanFilter, q RowQuery) VisitRows {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.s
	return s.links.pageRows(q, func(from, to uint32, add func(linkDay)) {
		for _, k := range s.orphans.sortedKeys() {
			if filter.keeps(k) {
				s.orphans.byKey[k].each(from, to, func(d *dayVisits) { add(linkDay{orphan: &k, d: d}) })
			}
		}
	})
}

// OrphanVisitsDeleteCommand forgets every orphan visit, as Shlink's
// "delete orphan visits" does. Only an admin key may.
type OrphanVisitsDeleteCommand struct {
	Now   int64
	KeyID string
}

// Encode is the deletion's log entry (Command).
func (c OrphanVisitsDeleteCommand) Encode() []byte {
	var e encoder
	e.byte(byte(cmdOrphanVisitsDelete))
	e.varint(c.Now)
	e.string(c.KeyID)
	return seal(e.buf)
}

// Level is LevelVisitRows (Command).
func (OrphanVisitsDeleteCommand) Level() int { return LevelVisitRows }

func decodeOrphanVisitsDelete(d *decoder) OrphanVisitsDeleteCommand {
	return OrphanVisitsDeleteCommand{Now: d.varint(), KeyID: d.string()}
}

// deleteOrphanVisits applies an OrphanVisitsDeleteCommand: the number of
// visits it forgot (those within retention, bots included), or an error.
func (s *state) deleteOrphanVisits(c OrphanVisitsDeleteCommand) any {
	if s.raised < LevelVisitRows {
		return ErrNotRaised
	}
	if !s.keys.mayAdminister(c.KeyID, c.Now) {
		return ErrUnauthorized
	}
	var forgot uint64
	oldest := s.links.oldestDay()
	for _, lv := range s.orphans.byKey {
		for _, d := range lv.days[firstDayAtOrAfter(lv.days, oldest):] {
			n, b := (&linkDay{d: d}).counts(true)
			forgot += n + b
		}
	}
	s.orphans = orphanTable{}
	s.audit.add(AuditEntry{At: c.Now, KeyID: c.KeyID, Action: AuditLinkEdit, Subject: orphanAuditSubject})
	return forgot
}

// orphanAuditSubject is what the audit log names a deletion of orphan
// visits: no link's code can read so (codes hold no space).
const orphanAuditSubject = "orphan visits"

// encodeOrphans writes, for each domain and kind with kept days, in
// order of domain and kind: the domain, the kind, the number of days, per
// day the step from the previous (from 0), its counts as the visitors
// section has them, and its hours as the tallies section has them.
func (snap *snapshot) encodeOrphans(e *encoder, flush func(bool)) {
	oldest := oldestKeptAt(snap.newestHour) / 24
	o := &snap.orphans
	kept := func(k orphanKey) []*dayVisits {
		lv := o.byKey[k]
		return lv.days[firstDayAtOrAfter(lv.days, oldest):]
	}
	keys := slices.DeleteFunc(o.sortedKeys(), func(k orphanKey) bool { return len(kept(k)) == 0 })
	e.uvarint(uint64(len(keys)))
	var sorted []tupleCount
	for _, k := range keys {
		e.string(k.domain)
		e.byte(byte(k.kind))
		encodeDays(e, kept(k), func(d *dayVisits) {
			encodeDay(e, d)
			sorted = encodeDayTallies(e, d, sorted)
		})
		flush(false)
	}
}

// readOrphans reads what encodeOrphans wrote, refusing what the state
// could not have made: domains not registered, unknown kinds, keys or
// days out of order, days out of retention, counts as the visitors
// section refuses them and tallies as the tallies section does.
func readOrphans(st *state, d *decoder) error {
	newest, oldest := st.links.hours.newest/24, st.links.oldestDay()
	var prev *orphanKey
	for n := d.count(4); n > 0 && d.err == nil; n-- {
		k := orphanKey{domain: d.string(), kind: OrphanKind(d.byte())}
		if d.err != nil {
			return d.err
		}
		if _, known := st.domains[k.domain]; k.domain != "" && !known || k.kind >= orphanKinds ||
			prev != nil && compareOrphanKeys(*prev, k) >= 0 || st.raised < LevelVisitRows {
			return fmt.Errorf("orphan visits of kind %d on domain %q: no such domain or kind, or out of order", k.kind, k.domain)
		}
		prev = &k
		lv := st.orphans.mutable(k, st.links.recs.gen, false)
		day := uint64(0)
		for days := d.count(21); days > 0 && d.err == nil; days-- {
			var ok bool
			if day, ok = stepDay(day, d.uvarint(), len(lv.days) == 0, oldest, newest); d.err == nil && !ok {
				return fmt.Errorf("orphan visits of %s on %q: day %d", k.kind, k.domain, day)
			}
			dv := &dayVisits{day: uint32(day), gen: st.links.recs.gen}
			if err := decodeDay(d, dv); err != nil {
				return fmt.Errorf("orphan visits of %s on %q, day %d: %w", k.kind, k.domain, day, err)
			}
			if err := decodeDayTallies(d, dv); err != nil {
				return fmt.Errorf("orphan visits of %s on %q, day %d: %w", k.kind, k.domain, day, err)
			}
			lv.days = append(lv.days, dv)
		}
		if d.err == nil && len(lv.days) == 0 {
			return fmt.Errorf("orphan visits of %s on %q: no day", k.kind, k.domain)
		}
	}
	return d.err
}

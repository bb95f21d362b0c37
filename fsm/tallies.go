package fsm

import (
	"cmp"
	"fmt"
	"slices"
)

// Joint visitor tallies: once the cluster is raised to LevelVisitRows,
// each day of a link's visitors (dayVisits) also counts, per hour, its
// clicks per visitor tuple: browser, OS, device, country and referrer
// together, or a bot's kind. They are applied from the same exactly-once
// click entries as the day's own counts, so the rows other shorteners'
// APIs list (visitRows) add up to the same numbers. See DESIGN.md.
//
// An hour keeps at most MaxTuplesPerHour distinct non-bot tuples; clicks
// of further tuples count in its overflow, and are listed as rows paired
// from the day's counts (dayPlan). 64 covers a link's usual spread of
// browsers, systems, countries and referrers in one hour, and bounds an
// hour at about half a kilobyte whatever a flood of varied visitors sends.

// MaxTuplesPerHour is how many distinct non-bot visitor tuples a link
// keeps per hour. Bots are kept by kind, never bounded.
const MaxTuplesPerHour = 64

// tuple packs a click's visitor classes in 28 bits: browser (bits 0–2),
// OS (3–5), device (6–7), bot kind (8–9), country (10–19: 1 + 26·first
// letter + second; an unknown country is "XX") and referrer (20–27: the
// host's index in the day's sorted referrer list, or otherSlot). A bot's
// tuple holds its kind alone: a day keeps nothing else of bots.
type tuple uint32

const (
	otherSlot     = 0xff // a referrer host past the day's bound
	countryShift  = 10
	referrerShift = 20
	countryCodes  = 26 * 26
)

// tupleCount is one tuple's clicks in an hour.
type tupleCount struct {
	t     tuple
	count uint32
}

// hourTally is one hour of one day's tuples.
type hourTally struct {
	tuples   []tupleCount // in arrival order
	overflow uint32       // non-bot clicks past the bound
	hour     uint8        // of the day, 0–23
	// owned: tuples was allocated since the day was last copied, so no
	// snapshot sees it and it may change in place.
	owned bool
}

func packCountry(c [2]byte) tuple {
	if c == ([2]byte{}) {
		c = [2]byte{'X', 'X'}
	}
	return 1 + tuple(c[0]-'A')*26 + tuple(c[1]-'A')
}

func packTuple(v *Visitor, slot uint8) tuple {
	if v.Bot != NotBot {
		return tuple(v.Bot) << 8
	}
	return tuple(v.Browser) | tuple(v.OS)<<3 | tuple(v.Device)<<6 |
		packCountry(v.Country)<<countryShift | tuple(slot)<<referrerShift
}

func (t tuple) browser() Browser    { return Browser(t & 7) }
func (t tuple) os() OS              { return OS(t >> 3 & 7) }
func (t tuple) device() DeviceClass { return DeviceClass(t >> 6 & 3) }
func (t tuple) bot() Bot            { return Bot(t >> 8 & 3) }
func (t tuple) slot() uint8         { return uint8(t >> referrerShift) }

func (t tuple) country() string {
	c := uint32(t>>countryShift&0x3ff) - 1
	return string([]byte{'A' + byte(c/26), 'A' + byte(c%26)})
}

// valid reports whether t is a tuple the state could have made in a day
// with refs referrer hosts.
func (t tuple) valid(refs int) bool {
	if t.bot() != NotBot {
		return t.bot() < botCount && t == tuple(t.bot())<<8
	}
	c := t >> countryShift & 0x3ff
	return t>>28 == 0 && t.browser() < browserCount && t.os() < osCount && t.device() < deviceCount &&
		c >= 1 && c <= countryCodes && (int(t.slot()) < refs || t.slot() == otherSlot)
}

// tally counts n clicks of v in hour of the day, once add has counted
// them and said where the referrer is (slot) and whether it took that
// place just now, moving the later hosts up.
func (d *dayVisits) tally(hour uint8, v *Visitor, n uint64, slot uint8, inserted, sharing bool) {
	if inserted {
		d.shiftSlots(slot, sharing)
	}
	t := packTuple(v, slot)
	h := d.mutableHour(hour)
	people := 0
	for i, tc := range h.tuples {
		if tc.t == t {
			h.own(sharing)
			h.tuples[i].count = saturatingAdd(tc.count, n)
			return
		}
		if tc.t.bot() == NotBot {
			people++
		}
	}
	if v.Bot == NotBot && people >= MaxTuplesPerHour {
		h.overflow = saturatingAdd(h.overflow, n)
		return
	}
	if len(h.tuples) == cap(h.tuples) {
		// Grow to the bound at most, not past it as append would; the
		// new array is no snapshot's.
		grown := make([]tupleCount, len(h.tuples), min(max(2*cap(h.tuples), 4), maxTuples))
		copy(grown, h.tuples)
		h.tuples, h.owned = grown, true
	}
	// Appending never changes what a snapshot's slice header reaches.
	h.tuples = append(h.tuples, tupleCount{t, saturatingAdd(0, n)})
}

// maxTuples is how many tuples an hour holds at most: the bound, and one
// for each bot kind.
const maxTuples = MaxTuplesPerHour + int(botCount) - 1

// people is how many of the hour's tuples are not bots'.
func (h *hourTally) people() int {
	n := 0
	for _, tc := range h.tuples {
		if tc.t.bot() == NotBot {
			n++
		}
	}
	return n
}

// own copies the hour's tuples before a change in place, unless no
// snapshot can see them.
func (h *hourTally) own(sharing bool) {
	if sharing && !h.owned {
		h.tuples = slices.Clone(h.tuples)
	}
	h.owned = true
}

// mutableHour returns the day's tally of hour, adding it in order.
func (d *dayVisits) mutableHour(hour uint8) *hourTally {
	i, ok := slices.BinarySearchFunc(d.tallies, hour, func(h hourTally, hour uint8) int { return cmp.Compare(h.hour, hour) })
	if !ok {
		// The day's slice is its own (mutableDay copies it): inserting is safe.
		d.tallies = slices.Insert(d.tallies, i, hourTally{hour: hour, owned: true})
	}
	return &d.tallies[i]
}

// shiftSlots renumbers the tuples' referrers after a new host took index
// i of the day's sorted list.
func (d *dayVisits) shiftSlots(i uint8, sharing bool) {
	for k := range d.tallies {
		h := &d.tallies[k]
		for j := range h.tuples {
			if t := h.tuples[j].t; t.bot() == NotBot && t.slot() >= i && t.slot() != otherSlot {
				h.own(sharing)
				h.tuples[j].t = t + 1<<referrerShift
			}
		}
	}
}

// sharedTallies is the tallies of a day being copied: the hours are the
// copy's own, their tuples still the snapshot's.
func sharedTallies(hours []hourTally) []hourTally {
	out := slices.Clone(hours)
	for i := range out {
		out[i].owned = false
	}
	return out
}

// VisitsDeleteCommand forgets a link's visits, as Shlink's "delete
// visits" does: its clicks in all, hours, visitors, bots and tallies. A
// link with a visit limit can then be visited again.
type VisitsDeleteCommand struct {
	Code  string
	Now   int64
	KeyID string // the API key that asked for it, as in CreateRequest
}

// Encode is the deletion's log entry (Command).
func (c VisitsDeleteCommand) Encode() []byte {
	var e encoder
	e.byte(byte(cmdVisitsDelete))
	e.string(c.Code)
	e.varint(c.Now)
	e.string(c.KeyID)
	return seal(e.buf)
}

// Level is LevelVisitRows (Command).
func (VisitsDeleteCommand) Level() int { return LevelVisitRows }

func decodeVisitsDelete(d *decoder) VisitsDeleteCommand {
	return VisitsDeleteCommand{Code: d.string(), Now: d.varint(), KeyID: d.string()}
}

// deleteVisits applies a VisitsDeleteCommand: the number of visits it
// forgot (clicks and bots), or an error.
func (s *state) deleteVisits(c VisitsDeleteCommand) any {
	if s.raised < LevelVisitRows {
		return ErrNotRaised
	}
	p, ws, err := s.writableLink(c.Code, c.KeyID, c.Now)
	if err != nil {
		return err
	}
	forgot := s.visitsUsed(p)
	s.counts.clicked(s.links.counted(p, &s.opts), s.links.recs.at(p).clicks, true)
	r := s.links.recs.mutable(p)
	r.clicks, r.lastAccess = 0, 0
	s.links.hours.forget(r.id)
	s.visits.forget(r.id)
	s.audit.add(AuditEntry{At: c.Now, KeyID: c.KeyID, Action: AuditLinkEdit, Workspace: ws, Subject: c.Code})
	return forgot
}

// encodeTallies writes, for each live link with tallies in its kept days,
// in id order: its id and its days with tallies, each as the distance
// from the previous one, its hours (hour, overflow, tuples by value), as
// stored. The view is read twice: the number of links comes first.
func (snap *snapshot) encodeTallies(e *encoder, flush func(bool)) {
	var tallied []storedVisitDay
	kept := func(days []storedVisitDay) []storedVisitDay {
		tallied = tallied[:0]
		for _, d := range days {
			if len(d.tallies) > 0 && d.tallies[0] != 0 { // a number of hours, not 0
				tallied = append(tallied, d)
			}
		}
		return tallied
	}
	n := 0
	snap.keptVisits(func(_ uint64, _ [botCount]uint64, days []storedVisitDay) {
		if len(kept(days)) > 0 {
			n++
		}
	})
	e.uvarint(uint64(n))
	snap.keptVisits(func(id uint64, _ [botCount]uint64, days []storedVisitDay) {
		if days = kept(days); len(days) == 0 {
			return
		}
		e.uvarint(id)
		encodeStoredDays(e, days, func(d *storedVisitDay) { e.fixed(d.tallies) })
		flush(false)
	})
}

// encodeDayTallies writes a day's hours: number of hours, per hour its
// hour of the day, overflow and tuples by value with their counts. It
// returns its scratch slice for the next day.
func encodeDayTallies(e *encoder, d *dayVisits, sorted []tupleCount) []tupleCount {
	e.uvarint(uint64(len(d.tallies)))
	for _, h := range d.tallies {
		e.byte(h.hour)
		e.uvarint(uint64(h.overflow))
		sorted = append(sorted[:0], h.tuples...)
		slices.SortFunc(sorted, func(a, b tupleCount) int { return cmp.Compare(a.t, b.t) })
		e.uvarint(uint64(len(sorted)))
		for _, tc := range sorted {
			e.uvarint(uint64(tc.t))
			e.uvarint(uint64(tc.count))
		}
	}
	return sorted
}

// readTallies reads what encodeTallies wrote into the days the visitors
// section stored, refusing what the state could not have made: unknown
// links or days, hours or tuples out of order, tuples past the bound or
// not a visitor's, and tallies that count more than their day.
func readTallies(st *state, d *decoder) error {
	v := &st.visits
	var prevID uint64
	for n := d.count(3); n > 0 && d.err == nil; n-- {
		id := d.uvarint()
		_, ok := st.links.positionOf(id)
		if d.err == nil && ok {
			_, ok = v.totals(id)
		}
		if d.err == nil && (!ok || id <= prevID) {
			return fmt.Errorf("tallies of link %d: no such link with visitors, or out of order", id)
		}
		prevID = id
		day, next := uint64(0), uint64(0) // next: the first day not read yet
		for k := d.count(2); k > 0 && d.err == nil; k-- {
			day += d.uvarint()
			var value []byte
			found := false
			if d.err == nil && day >= next && day <= uint64(^uint32(0)) {
				value, found = v.eng.read(visitDayKey(nil, id, uint32(day)))
			}
			if !found {
				if d.err != nil {
					return d.err
				}
				return fmt.Errorf("tallies of link %d: day %d has no visitors, or is out of order", id, day)
			}
			next = day + 1
			dv := decodeStoredDay(id, uint32(day), value, true)
			if err := decodeDayTallies(d, dv); err != nil {
				return fmt.Errorf("tallies of link %d, day %d: %w", id, day, err)
			}
			v.setDay(id, dv)
		}
	}
	if d.err != nil {
		return d.err
	}
	return v.eng.err
}

// decodeTuples reads an hour's n tuples, in increasing order, each valid
// for a day of that many referrers and counting 1 to 2³²-1 clicks.
func decodeTuples(d *decoder, h *hourTally, n, referrers int) error {
	for i := 0; i < n && d.err == nil; i++ {
		t, c := d.uvarint(), d.uvarint()
		if d.err == nil && (t > uint64(^tuple(0)) || !tuple(t).valid(referrers) || c == 0 || c > uint64(^uint32(0)) ||
			i > 0 && tuple(t) <= h.tuples[i-1].t) {
			return fmt.Errorf("hour %d: tuple %#x with %d clicks", h.hour, t, c)
		}
		h.tuples = append(h.tuples, tupleCount{tuple(t), uint32(c)})
	}
	return nil
}

func decodeDayTallies(d *decoder, dv *dayVisits) error {
	hours := d.count(3)
	if d.err == nil && (hours == 0 || hours > 24) {
		return fmt.Errorf("%d hours", hours)
	}
	for k := 0; k < hours && d.err == nil; k++ {
		h := hourTally{hour: d.byte(), owned: true}
		over := d.uvarint()
		n := d.count(2)
		if d.err == nil && (h.hour > 23 || k > 0 && h.hour <= dv.tallies[k-1].hour || over > uint64(^uint32(0)) || n > maxTuples) {
			return fmt.Errorf("hour %d with %d tuples and %d past the bound", h.hour, n, over)
		}
		h.overflow = uint32(over)
		if err := decodeTuples(d, &h, n, len(dv.referrers)); err != nil {
			return err
		}
		if d.err == nil && (h.people() > MaxTuplesPerHour || len(h.tuples) == 0 && h.overflow == 0) {
			return fmt.Errorf("hour %d: %d tuples", h.hour, h.people())
		}
		dv.tallies = append(dv.tallies, h)
	}
	if d.err == nil && !newRemainder(dv).fits {
		return fmt.Errorf("tallies count more clicks than the day")
	}
	return d.err
}

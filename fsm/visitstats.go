package fsm

import (
	"cmp"
	"slices"
	"strings"
)

// Dimension is what a visit breakdown groups clicks by.
type Dimension uint8

// The dimensions a breakdown can group by; ByNothing groups nothing.
const (
	ByNothing Dimension = iota
	ByReferrer
	ByBrowser
	ByOS
	ByDevice
	ByCountry
)

var dimensionNames = [...]string{"", "referrer", "browser", "os", "device", "country"}

// String is the dimension's group_by name, as ParseDimension reads it
// ("" for ByNothing).
func (d Dimension) String() string { return nameOf(dimensionNames[:], d) }

// ParseDimension reads a group_by value; "" is ByNothing.
func ParseDimension(name string) (Dimension, bool) {
	i := slices.Index(dimensionNames[:], name)
	return Dimension(max(i, 0)), i >= 0
}

// VisitGroup is the clicks of one value of a breakdown's dimension.
type VisitGroup struct {
	Value  string
	Clicks uint64
}

// DayClicks is one day's clicks that carried visitors, and its bots;
// Start is the day's first millisecond, UTC.
type DayClicks struct {
	Start              int64
	Clicks             uint64
	Crawlers, Previews uint64
}

// Visits is a breakdown of clicks over whole days.
type Visits struct {
	// Clicks are those that carried visitors: the sum of Days, and of
	// Groups when a dimension was asked for.
	Clicks    uint64
	Crawlers  uint64 // bots apart from Clicks
	Previews  uint64
	Days      []DayClicks  // oldest first; days without clicks or bots left out
	Groups    []VisitGroup // most clicks first, then by value
	Links     int          // links the breakdown covers
	LinkTotal uint64       // their clicks in all, with none carrying visitors
}

// visitQuery is one breakdown being summed.
type visitQuery struct {
	from, to uint32 // days [from, to)
	by       Dimension
	out      Visits
	days     map[uint32]*DayClicks
	groups   map[string]uint64
}

// DaysOf converts [from, to) in Unix milliseconds to whole UTC days,
// from rounded down and to up.
func daysOf(from, to int64) (uint32, uint32) {
	clamp := func(ms int64) uint32 { return uint32(min(max(ms, 0), int64(^uint32(0))*dayMillis) / dayMillis) }
	return clamp(from), clamp(to + dayMillis - 1)
}

func newVisitQuery(from, to int64, by Dimension) *visitQuery {
	q := &visitQuery{by: by, days: map[uint32]*DayClicks{}, groups: map[string]uint64{}}
	q.from, q.to = daysOf(from, to)
	return q
}

// add sums the visitors of the link at p into q.
func (q *visitQuery) add(s *state, p uint64) {
	r := s.links.recs.walked(p) // one link or a workspace's: no slot filled
	q.out.Links++
	q.out.LinkTotal += r.clicks
	s.visits.days(r.id, max(q.from, s.links.oldestDay()), q.to, true, func(d *dayVisits) bool {
		day := q.days[d.day]
		if day == nil {
			day = &DayClicks{Start: int64(d.day) * dayMillis}
			q.days[d.day] = day
		}
		day.Crawlers += uint64(d.bots[Crawler])
		day.Previews += uint64(d.bots[Preview])
		q.out.Crawlers += uint64(d.bots[Crawler])
		q.out.Previews += uint64(d.bots[Preview])
		var clicks uint64
		for _, c := range d.browsers {
			clicks += uint64(c)
		}
		day.Clicks += clicks
		q.out.Clicks += clicks
		q.addGroups(d)
		return true
	})
}

func (q *visitQuery) addGroups(d *dayVisits) {
	switch q.by {
	case ByBrowser:
		addClasses(q.groups, d.browsers[:], browserNames[:])
	case ByOS:
		addClasses(q.groups, d.systems[:], osNames[:])
	case ByDevice:
		addClasses(q.groups, d.devices[:], classNames[:])
	case ByCountry:
		for _, k := range d.countries {
			q.groups[k.key] += uint64(k.count)
		}
	case ByReferrer:
		for _, k := range d.referrers {
			name := k.key
			if name == "" {
				name = Direct
			}
			q.groups[name] += uint64(k.count)
		}
		if d.others > 0 {
			q.groups[OtherReferrer] += uint64(d.others)
		}
	}
}

func addClasses(groups map[string]uint64, counts []uint32, names []string) {
	for i, c := range counts {
		if c > 0 {
			groups[names[i]] += uint64(c)
		}
	}
}

func (q *visitQuery) result() Visits {
	for _, day := range q.days {
		q.out.Days = append(q.out.Days, *day)
	}
	slices.SortFunc(q.out.Days, func(a, b DayClicks) int { return cmp.Compare(a.Start, b.Start) })
	for value, clicks := range q.groups {
		q.out.Groups = append(q.out.Groups, VisitGroup{Value: value, Clicks: clicks})
	}
	slices.SortFunc(q.out.Groups, func(a, b VisitGroup) int {
		return cmp.Or(cmp.Compare(b.Clicks, a.Clicks), strings.Compare(a.Value, b.Value))
	})
	return q.out
}

// LinkVisits breaks down code's clicks in the days that [from, to) (Unix
// milliseconds) touches by the dimension; false when the code does not
// exist.
func (f *FSM) LinkVisits(code string, from, to int64, by Dimension) (Visits, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	p, ok := f.s.links.lookup(code)
	if !ok {
		return Visits{}, false
	}
	q := newVisitQuery(from, to, by)
	q.add(f.s, p)
	return q.result(), true
}

// BotsInAll is how many crawler and preview visits code has had since it
// was created.
func (f *FSM) BotsInAll(code string) (crawlers, previews uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if p, ok := f.s.links.lookup(code); ok {
		bots, _ := f.s.visits.totals(f.s.links.recs.at(p).id)
		return bots[Crawler], bots[Preview]
	}
	return 0, 0
}

// WorkspaceVisits sums the breakdown over the links of the workspaces
// (nil: every workspace) that pass the filter.
func (f *FSM) WorkspaceVisits(workspaces []string, filter Filter, from, to int64, by Dimension) Visits {
	f.mu.RLock()
	defer f.mu.RUnlock()
	q := newVisitQuery(from, to, by)
	for _, p := range f.s.links.positionsNewestFirst(workspaces, filter.Author) {
		if l := walkedLink(f.s, p); filter.keeps(&l) {
			q.add(f.s, p)
		}
	}
	return q.result()
}

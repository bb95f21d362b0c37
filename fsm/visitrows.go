package fsm

import (
	"cmp"
	"maps"
	"slices"
)

// Visit rows are what Shlink's API lists: one row per click, newest
// first. A link's days hold counts, not clicks, so rows are expanded from
// them (dayPlan): each kept tuple of an hour (tallies.go) gives that many
// rows of that hour; the clicks no tuple accounts for (an hour's overflow,
// or a day from before the cluster was raised to LevelVisitRows) are
// paired from what the day's own counts hold beyond the tuples. Either
// way every count per browser, OS, device, country or referrer over a
// whole day is the day's own. Rows are never stored: a page expands only
// the days it reaches.

// RowQuery asks for a page of visit rows.
type RowQuery struct {
	// From and To bound the rows (Unix milliseconds): those of the hours
	// that start in [From, To).
	From, To    int64
	ExcludeBots bool
	// Now (Unix milliseconds, 0 for none) is the time of the query: the
	// rows of the hour still going on are all dated at its start, never
	// after a visit they stand for could have happened, and still the
	// same on every node and for every page until the hour is over.
	Now int64
	// Offset rows are skipped, then at most Limit listed.
	Offset, Limit uint64
}

// VisitRow is one click as visit rows list it. It carries no address:
// the state never holds one.
type VisitRow struct {
	// At is a deterministic instant within the click's hour: the rows of
	// an hour are spread evenly over it, newest first (those of the hour
	// of RowQuery.Now all at its start).
	At   int64
	Code string // the link's qualified code
	// Referrer is the referring host, "" for none, OtherReferrer for a
	// host past its day's bound; "" for a bot.
	Referrer string
	// Country is an ISO 3166-1 alpha-2 code, UnknownCountry when unknown;
	// "" for a bot.
	Country string
	Browser Browser
	OS      OS
	Device  DeviceClass
	Bot     Bot
	// An orphan visit's row (OrphanVisitRows) has no Code: Kind says
	// what it asked for and Domain where ("" for the default domain).
	Kind   OrphanKind
	Domain string
}

// VisitRows is one page of rows, and the counts of every row the query's
// range holds.
type VisitRows struct {
	Rows          []VisitRow
	NonBots, Bots uint64
}

// Matched is how many rows the query pages through: bots included unless
// it excludes them.
func (v *VisitRows) Matched(excludeBots bool) uint64 {
	if excludeBots {
		return v.NonBots
	}
	return v.NonBots + v.Bots
}

// LinkVisitRows lists code's visit rows; false when the code does not
// exist.
func (f *FSM) LinkVisitRows(code string, q RowQuery) (VisitRows, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	p, ok := f.s.links.lookup(code)
	if !ok {
		return VisitRows{}, false
	}
	return f.s.visitRows([]uint64{p}, q), true
}

// WorkspaceVisitRows lists the visit rows of the links of the workspaces
// (nil: every workspace) that pass the filter; rows of one hour list the
// newest link's first.
func (f *FSM) WorkspaceVisitRows(workspaces []string, filter Filter, q RowQuery) VisitRows {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var ps []uint64
	for _, p := range f.s.links.positionsNewestFirst(workspaces, filter.Author) {
		if l := walkedLink(f.s, p); filter.keeps(&l) {
			ps = append(ps, p)
		}
	}
	return f.s.visitRows(ps, q)
}

// linkDay is one day of one link's visitors, or of one domain's orphan
// visits of a kind (orphan non-nil), and its rows once expanded.
type linkDay struct {
	p      uint64
	orphan *orphanKey
	d      *dayVisits
	plan   []segment
}

// segment is count rows of one hour and tuple.
type segment struct {
	t     tuple
	count uint64
	hour  uint8
}

// hoursOf is the hours that start in [from, to).
func hoursOf(from, to int64) (uint32, uint32) {
	ceil := func(ms int64) uint32 {
		h := (max(ms, 0) + hourMillis - 1) / hourMillis
		return uint32(min(h, int64(^uint32(0))))
	}
	return ceil(from), ceil(to)
}

// visitRows lists the rows of the links at ps (newest first), day by day
// from the newest, expanding only the days that hold a listed row or that
// the range cuts.
func (s *state) visitRows(ps []uint64, q RowQuery) VisitRows {
	return s.links.pageRows(q, func(from, to uint32, add func(linkDay)) {
		for _, p := range ps {
			s.visits.days(s.links.recs.walked(p).id, from, to, false, func(d *dayVisits) bool {
				add(linkDay{p: p, d: d})
				return true
			})
		}
	})
}

// pageRows lists the rows of the days each calls add with (those in
// [from, to)), in the order given within a day.
func (lt *linkTable) pageRows(q RowQuery, each func(from, to uint32, add func(linkDay))) VisitRows {
	var out VisitRows
	hFrom, hTo := hoursOf(q.From, q.To)
	if hFrom >= hTo {
		return out
	}
	dFrom, dTo := max(hFrom/24, lt.oldestDay()), uint32((uint64(hTo)+23)/24)
	byDay := map[uint32][]linkDay{}
	each(dFrom, dTo, func(ld linkDay) { byDay[ld.d.day] = append(byDay[ld.d.day], ld) })
	days := slices.Sorted(maps.Keys(byDay))
	offset := q.Offset
	for _, day := range slices.Backward(days) {
		lds := byDay[day]
		whole := uint64(day)*24 >= uint64(hFrom) && uint64(day)*24+24 <= uint64(hTo)
		if !whole {
			for i := range lds {
				lds[i].plan = hoursIn(lt.planOf(&lds[i]), day, hFrom, hTo)
			}
		}
		var nonBots, bots uint64
		for i := range lds {
			n, b := lds[i].counts(whole)
			nonBots, bots = nonBots+n, bots+b
		}
		out.NonBots, out.Bots = out.NonBots+nonBots, out.Bots+bots
		listed := nonBots
		if !q.ExcludeBots {
			listed += bots
		}
		if uint64(len(out.Rows)) >= q.Limit || offset >= listed {
			offset -= min(offset, listed)
			continue
		}
		if whole {
			for i := range lds {
				lds[i].plan = lt.planOf(&lds[i])
			}
		}
		lt.listDay(&out, day, lds, offset, q)
		offset = 0
	}
	return out
}

// planOf is a day's plan (dayPlan): a link's with its hourly series, an
// orphan day's without (every orphan visit is tallied, so there is none).
func (lt *linkTable) planOf(ld *linkDay) []segment {
	if ld.orphan != nil {
		return dayPlan(nil, ld.d)
	}
	return dayPlan(lt.hours.read(lt.recs.at(ld.p).id, ld.d.day*24, uint64(ld.d.day)*24+24), ld.d)
}

// counts is the day's rows: from its own counts when whole, else from
// its plan, which holds only the hours in range.
func (ld *linkDay) counts(whole bool) (nonBots, bots uint64) {
	if whole {
		for _, c := range ld.d.browsers {
			nonBots += uint64(c)
		}
		return nonBots, uint64(ld.d.bots[Crawler]) + uint64(ld.d.bots[Preview])
	}
	for _, sg := range ld.plan {
		if sg.t.bot() == NotBot {
			nonBots += sg.count
		} else {
			bots += sg.count
		}
	}
	return nonBots, bots
}

// hoursIn keeps the segments of plan whose hour starts in [hFrom, hTo).
func hoursIn(plan []segment, day, hFrom, hTo uint32) []segment {
	return slices.DeleteFunc(plan, func(sg segment) bool {
		h := day*24 + uint32(sg.hour)
		return h < hFrom || h >= hTo
	})
}

// listDay appends the day's rows past offset to out, up to the limit:
// hour by hour from the newest, each hour's rows spread over it.
func (lt *linkTable) listDay(out *VisitRows, day uint32, lds []linkDay, offset uint64, q RowQuery) {
	var segs []segment
	var owner []int
	for h := 23; h >= 0; h-- {
		segs, owner = segs[:0], owner[:0]
		var rows uint64
		for i := range lds {
			for _, sg := range lds[i].plan {
				if int(sg.hour) == h && (sg.t.bot() == NotBot || !q.ExcludeBots) {
					segs, owner = append(segs, sg), append(owner, i)
					rows += sg.count
				}
			}
		}
		if offset >= rows {
			offset -= rows
			continue
		}
		start := (int64(day)*24 + int64(h)) * hourMillis
		span := int64(hourMillis)
		if q.Now > 0 && q.Now < start+hourMillis {
			span = 0
		}
		pos := uint64(0)
		for k, sg := range segs {
			if offset >= sg.count {
				offset -= sg.count
				pos += sg.count
				continue
			}
			row := lt.rowOf(lds[owner[k]], sg.t)
			for i := offset; i < sg.count; i++ {
				if uint64(len(out.Rows)) >= q.Limit {
					return
				}
				row.At = start + int64(rows-1-(pos+i))*span/int64(rows)
				out.Rows = append(out.Rows, row)
			}
			pos += sg.count
			offset = 0
		}
	}
}

// rowOf is a row of tuple t in the link's day.
func (lt *linkTable) rowOf(ld linkDay, t tuple) VisitRow {
	row := VisitRow{Bot: t.bot()}
	if ld.orphan != nil {
		row.Kind, row.Domain = ld.orphan.kind, ld.orphan.domain
	} else {
		row.Code = lt.recs.at(ld.p).code
	}
	if row.Bot != NotBot {
		return row
	}
	row.Browser, row.OS, row.Device, row.Country = t.browser(), t.os(), t.device(), t.country()
	row.Referrer = OtherReferrer
	if slot := int(t.slot()); slot < len(ld.d.referrers) {
		row.Referrer = ld.d.referrers[slot].key
	}
	return row
}

// dayPlan expands one day of a link, whose hourly series that day is
// hours, into segments, newest hour first: each hour's kept tuples, then
// the rows paired from the day's counts that fall in it. Paired rows take the
// hours whose clicks the tuples do not account for (overflow, or clicks
// from before the raise, as the hourly series counts them), newest
// first; what is left, and the bots no tuple holds, take the day's first
// hour.
func dayPlan(hours []hourCount, d *dayVisits) []segment {
	rest := newRemainder(d)
	z := newZipper(&rest, d)
	var quota [24]uint64
	for _, hc := range hours {
		if hc.hour/24 == d.day {
			quota[hc.hour%24] = uint64(hc.count)
		}
	}
	var plan []segment
	var sorted []tupleCount
	next := len(d.tallies) - 1
	for h := 23; h >= 0; h-- {
		var exact, overflow uint64
		if next >= 0 && int(d.tallies[next].hour) == h {
			ht := &d.tallies[next]
			next--
			sorted = append(sorted[:0], ht.tuples...)
			slices.SortFunc(sorted, func(a, b tupleCount) int { return cmp.Compare(a.t, b.t) })
			for _, tc := range sorted {
				plan = append(plan, segment{t: tc.t, count: uint64(tc.count), hour: uint8(h)})
				if tc.t.bot() == NotBot {
					exact += uint64(tc.count)
				}
			}
			overflow = uint64(ht.overflow)
		}
		plan = z.take(plan, uint8(h), max(quota[h]-min(quota[h], exact), overflow))
	}
	plan = z.take(plan, 0, z.left)
	for b := Crawler; b < botCount; b++ {
		if rest.bots[b] > 0 {
			plan = append(plan, segment{t: tuple(b) << 8, count: rest.bots[b], hour: 0})
		}
	}
	return plan
}

// remainder is what a day's counts hold beyond its kept tuples.
type remainder struct {
	browsers  [browserCount]uint64
	systems   [osCount]uint64
	devices   [deviceCount]uint64
	bots      [botCount]uint64
	countries []uint64 // parallel to the day's countries
	referrers []uint64 // parallel to the day's referrers, then its others
	// fits: the tuples and overflow count no more than the day does.
	fits bool
}

func newRemainder(d *dayVisits) remainder {
	r := remainder{countries: make([]uint64, len(d.countries)), referrers: make([]uint64, len(d.referrers)+1), fits: true}
	widen := func(dst []uint64, src []uint32) {
		for i, c := range src {
			dst[i] = uint64(c)
		}
	}
	widen(r.browsers[:], d.browsers[:])
	widen(r.systems[:], d.systems[:])
	widen(r.devices[:], d.devices[:])
	widen(r.bots[:], d.bots[:])
	for i, k := range d.countries {
		r.countries[i] = uint64(k.count)
	}
	for i, k := range d.referrers {
		r.referrers[i] = uint64(k.count)
	}
	r.referrers[len(d.referrers)] = uint64(d.others)
	take := func(x *uint64, n uint64) {
		if *x < n {
			r.fits = false
		}
		*x -= min(*x, n)
	}
	var overflow uint64
	for _, h := range d.tallies {
		overflow += uint64(h.overflow)
		for _, tc := range h.tuples {
			t, n := tc.t, uint64(tc.count)
			if t.bot() != NotBot {
				take(&r.bots[t.bot()], n)
				continue
			}
			take(&r.browsers[t.browser()], n)
			take(&r.systems[t.os()], n)
			take(&r.devices[t.device()], n)
			if i, ok := slices.BinarySearchFunc(d.countries, t.country(), compareKey); ok {
				take(&r.countries[i], n)
			} else {
				r.fits = false
			}
			take(&r.referrers[min(int(t.slot()), len(d.referrers))], n)
		}
	}
	var paired uint64
	for _, c := range r.browsers {
		paired += c
	}
	r.fits = r.fits && overflow <= paired
	return r
}

// zipper pairs a day's remainders into rows: the k-th paired row takes
// the class at position k of each dimension's remainder, so every
// dimension's count is exact whatever the pairing.
type zipper struct {
	dims      [5][]uint64 // browser, OS, device, country, referrer
	at        [5]int
	countries []keyCount
	refs      int
	left      uint64 // paired rows not yet placed
}

func newZipper(r *remainder, d *dayVisits) *zipper {
	z := &zipper{dims: [5][]uint64{r.browsers[:], r.systems[:], r.devices[:], r.countries, r.referrers},
		countries: d.countries, refs: len(d.referrers)}
	for _, c := range r.browsers {
		z.left += c
	}
	return z
}

// take appends the next n paired rows (fewer if fewer are left) to plan
// in hour.
func (z *zipper) take(plan []segment, hour uint8, n uint64) []segment {
	for n > 0 && z.left > 0 {
		run := min(n, z.left)
		var class [5]int
		for i, dim := range z.dims {
			for z.at[i] < len(dim) && dim[z.at[i]] == 0 {
				z.at[i]++
			}
			class[i] = z.at[i]
			if z.at[i] < len(dim) {
				run = min(run, dim[z.at[i]])
			}
		}
		for i, dim := range z.dims {
			if class[i] < len(dim) {
				dim[class[i]] -= run
			}
		}
		plan = append(plan, segment{t: z.tuple(class), count: run, hour: hour})
		n, z.left = n-run, z.left-run
	}
	return plan
}

// tuple is the tuple of the classes at these positions; a dimension that
// ran out (only in a state whose counts saturated) gives its first class.
func (z *zipper) tuple(class [5]int) tuple {
	pick := func(i int) int {
		if class[i] < len(z.dims[i]) {
			return class[i]
		}
		return 0
	}
	country := [2]byte{'X', 'X'}
	if c := class[3]; c < len(z.countries) {
		country = [2]byte{z.countries[c].key[0], z.countries[c].key[1]}
	}
	slot := uint8(otherSlot)
	if class[4] < z.refs {
		slot = uint8(class[4])
	}
	return tuple(pick(0)) | tuple(pick(1))<<3 | tuple(pick(2))<<6 | packCountry(country)<<countryShift | tuple(slot)<<referrerShift
}

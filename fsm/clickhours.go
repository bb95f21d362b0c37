package fsm

import (
	"fmt"
	"slices"
)

// Clicks over time are kept per link as counts per hour. A click batch
// carries the flushing node's clock, and its clicks count in the hour of
// that clock: a click lands in the hour its node flushed it, at most one
// flush interval after the redirect. The batch is the same exactly-once
// entry that adds to the link's total, so the hours are as exact as the
// total across retries and failover.
//
// Hours older than ClickRetention before the newest hour any batch has
// carried are forgotten: dropped from a link when it is next clicked and
// when a snapshot is written, and never returned in between. Measuring the
// retention from a replicated clock, not the reader's, keeps every node's
// answer the same.

const (
	hourMillis = 3600 * 1000

	// ClickRetentionHours is how many hours of per-hour clicks a link
	// keeps: 90 days.
	ClickRetentionHours = 90 * 24
)

// hourCount is one hour's clicks of one link. hour counts hours since the
// Unix epoch; 32 bits last until the year 2459.
type hourCount struct {
	hour  uint32
	count uint32
}

// hourPage holds the hourly counts of the links in one record page. Pages
// exist only where a link has been clicked.
//
// A snapshot shares pages like recordTable does. Sharing a page is not
// enough here, since a page copy still shares each link's slice: owned
// marks the slices allocated since the page was last copied, which no
// snapshot can see and which may change in place. Appending never needs a
// copy (a snapshot's slice header does not reach the new element);
// changing a count it can see does.
type hourPage struct {
	hours [pageSize][]hourCount
	owned [pageSize / 64]uint64
}

// clickHours is the per-hour clicks of every link, by record position.
type clickHours struct {
	pages  []*hourPage // parallel to recordTable.pages; nil: no clicks yet
	gens   []uint64
	newest uint32 // the newest hour any click batch carried
}

// hourOf is the hour a click batch's clock falls in; false for clocks
// before 1970, which count in the total only.
func hourOf(now int64) (uint32, bool) {
	if now < 0 || now/hourMillis > int64(^uint32(0)) {
		return 0, false
	}
	return uint32(now / hourMillis), true
}

// oldestKept is the first hour still within retention.
func (c *clickHours) oldestKept() uint32 {
	if c.newest < ClickRetentionHours {
		return 0
	}
	return c.newest - ClickRetentionHours + 1
}

// at returns the hourly counts of the link at p, oldest first; they may
// include hours past retention.
func (c *clickHours) at(p uint32) []hourCount {
	i := p / pageSize
	if int(i) >= len(c.pages) || c.pages[i] == nil {
		return nil
	}
	return c.pages[i].hours[p%pageSize]
}

// add counts n clicks for the link at p in hour, which the caller has
// already taken into newest. gen and sharing are the record table's: pages
// copied in the current generation belong to the live state alone.
func (c *clickHours) add(p, hour uint32, n uint64, gen uint64, sharing bool) {
	page := c.mutablePage(p/pageSize, gen, sharing)
	slot := p % pageSize
	hours := page.hours[slot]
	if keep := c.oldestKept(); len(hours) > 0 && hours[0].hour < keep {
		// Reslicing never writes, so a snapshot's view stays intact.
		hours = hours[firstAtOrAfter(hours, keep):]
	}
	i := firstAtOrAfter(hours, hour)
	switch {
	case i < len(hours) && hours[i].hour == hour:
		if sharing && page.owned[slot/64]&(1<<(slot%64)) == 0 {
			hours = slices.Clone(hours)
			page.owned[slot/64] |= 1 << (slot % 64)
		}
		hours[i].count = saturatingAdd(hours[i].count, n)
	case i == len(hours):
		hours = append(hours, hourCount{hour, saturatingAdd(0, n)})
	default:
		// An hour before the newest one this link has: a node whose clock
		// runs behind. Insert into a fresh slice, never shifting in place.
		hours = slices.Insert(slices.Clip(hours), i, hourCount{hour, saturatingAdd(0, n)})
	}
	page.hours[slot] = hours
}

// mutablePage returns page i for changing, creating it or copying it first
// if a snapshot being written may be reading it.
func (c *clickHours) mutablePage(i uint32, gen uint64, sharing bool) *hourPage {
	for int(i) >= len(c.pages) {
		c.pages = append(c.pages, nil)
		c.gens = append(c.gens, gen)
	}
	switch {
	case c.pages[i] == nil:
		c.pages[i], c.gens[i] = new(hourPage), gen
	case c.gens[i] != gen && sharing:
		cp := &hourPage{hours: c.pages[i].hours}
		c.pages[i], c.gens[i] = cp, gen
	}
	return c.pages[i]
}

// share returns a view for a snapshot: the page list, as it is now.
func (c *clickHours) share() clickHours {
	return clickHours{pages: slices.Clone(c.pages), newest: c.newest}
}

// kept returns the hours of the link at p that are within retention.
func (c *clickHours) kept(p uint32) []hourCount {
	hours := c.at(p)
	return hours[firstAtOrAfter(hours, c.oldestKept()):]
}

func firstAtOrAfter(hours []hourCount, hour uint32) int {
	// Usually the last hour or just past it: search from the end.
	i := len(hours)
	for i > 0 && hours[i-1].hour >= hour {
		i--
	}
	return i
}

func saturatingAdd(a uint32, n uint64) uint32 {
	if n >= uint64(^uint32(0)-a) {
		return ^uint32(0)
	}
	return a + uint32(n)
}

// HourClicks is the number of clicks a link got in the hour starting at
// Start (Unix milliseconds).
type HourClicks struct {
	Start  int64
	Clicks uint64
}

// ClickHours returns the hours of code's clicks that fall in [from, to)
// (Unix milliseconds), oldest first; hours without clicks are left out.
// false when the code does not exist.
func (f *FSM) ClickHours(code string, from, to int64) ([]HourClicks, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	p, ok := f.s.links.lookup(code)
	if !ok {
		return nil, false
	}
	var out []HourClicks
	for _, h := range f.s.links.recs.hours.kept(p) {
		start := int64(h.hour) * hourMillis
		if start >= from && start < to {
			out = append(out, HourClicks{Start: start, Clicks: uint64(h.count)})
		}
	}
	return out, true
}

// encodeClickHours writes the newest hour, then for each live link with
// clicks within retention: its id, the number of hours, and per hour the
// distance from the previous one (from 0 for the first) and the count.
func (snap *snapshot) encodeClickHours(e *encoder, flush func(bool)) {
	recs, hours := &snap.records, &snap.records.hours
	e.uvarint(uint64(hours.newest))
	n := 0
	for p := range recs.n {
		if recs.at(p).live() && len(hours.kept(p)) > 0 {
			n++
		}
	}
	e.uvarint(uint64(n))
	for p := range recs.n {
		kept := hours.kept(p)
		if !recs.at(p).live() || len(kept) == 0 {
			continue
		}
		e.uvarint(recs.at(p).id)
		e.uvarint(uint64(len(kept)))
		prev := uint32(0)
		for _, h := range kept {
			e.uvarint(uint64(h.hour - prev))
			e.uvarint(uint64(h.count))
			prev = h.hour
		}
		flush(false)
	}
}

// decodeClickHours reads the clicks per hour. Every entry must name a link,
// in id order, with hours strictly increasing, within retention and not
// after the newest hour, and counts above zero.
func (lt *linkTable) decodeClickHours(d *decoder) error {
	newest := d.uvarint()
	if d.err == nil && newest > uint64(^uint32(0)) {
		return fmt.Errorf("newest click hour %d", newest)
	}
	hours := &lt.recs.hours
	hours.newest = uint32(newest)
	var prevID uint64
	for n := d.count(3); n > 0 && d.err == nil; n-- {
		id := d.uvarint()
		p, ok := lt.positionOf(id)
		if d.err == nil && (!ok || id <= prevID) {
			return fmt.Errorf("click hours for link %d: no such link, or out of order", id)
		}
		prevID = id
		hour := uint64(0)
		for k := d.count(2); k > 0 && d.err == nil; k-- {
			step, count := d.uvarint(), d.uvarint()
			hour += step
			switch {
			case d.err != nil:
				return d.err
			case step == 0 && len(hours.at(p)) > 0, hour > newest, hour < uint64(hours.oldestKept()), count == 0, count > uint64(^uint32(0)):
				return fmt.Errorf("link %d: click hour %d with %d clicks", id, hour, count)
			}
			hours.add(p, uint32(hour), count, lt.recs.gen, false)
		}
	}
	return nil
}

package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Clicks over time are kept per link as counts per hour. A click batch
// carries the flushing node's clock, and its clicks count in the hour of
// that clock: a click lands in the hour its node flushed it, at most one
// flush interval after the redirect. The batch is the same exactly-once
// entry that adds to the link's total, so the hours are as exact as the
// total across retries and failover.
//
// Hours older than ClickRetention before the newest hour any batch has
// carried are forgotten: dropped from a link's keys when it is next
// clicked (in an hour it has no clicks in yet), left out of snapshots, and
// never returned in between. Measuring the
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

// clickHours is the per-hour clicks of every link, on disk: one key per
// link and hour (hourKey), in id order and then hour order, whose value is
// the hour's count (4 bytes, big-endian). Only newest is in memory.
//
// Apply reads and writes through the apply batch (engine.get, set), so
// that two entries of one batch clicking the same link add up; readers
// read the engine's committed state, which is all of it outside Apply.
type clickHours struct {
	eng    *engine
	newest uint32 // the newest hour any click batch carried
	key    []byte // reused by Apply's writes
	value  [4]byte
	stale  []byte // reused by drop: the keys it deletes, back to back
}

// hourPrefix is the engine's table of click hours (store/DESIGN.md,
// "Keys").
const hourPrefix = 'h'

// hourKeyLen is the length of an hour's key: the table, the link's id,
// the hour.
const hourKeyLen = 1 + 8 + 4

func newClickHours(eng *engine) clickHours { return clickHours{eng: eng} }

// hourKey is the key of the link id's hour, appended to dst[:0].
func hourKey(dst []byte, id uint64, hour uint32) []byte {
	dst = binary.BigEndian.AppendUint64(append(dst[:0], hourPrefix), id)
	return binary.BigEndian.AppendUint32(dst, hour)
}

// linkHoursPrefix is the prefix of every hour of the link id.
func linkHoursPrefix(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{hourPrefix}, id)
}

// hourOf is the hour a click batch's clock falls in; false for clocks
// before 1970, which count in the total only.
func hourOf(now int64) (uint32, bool) {
	if now < 0 || now/hourMillis > int64(^uint32(0)) {
		return 0, false
	}
	return uint32(now / hourMillis), true
}

// observe takes a click batch's clock into newest.
func (c *clickHours) observe(now int64) {
	if hour, ok := hourOf(now); ok {
		c.newest = max(c.newest, hour)
	}
}

// oldestKept is the first hour still within retention.
func (c *clickHours) oldestKept() uint32 { return oldestKeptAt(c.newest) }

// oldestKeptAt is the first hour within retention when newest is the
// newest hour any batch carried.
func oldestKeptAt(newest uint32) uint32 {
	if newest < ClickRetentionHours {
		return 0
	}
	return newest - ClickRetentionHours + 1
}

// add counts n clicks for the link id in hour, which the caller has
// already taken into newest, without reading the hour's count (the engine
// sums the additions: store.Batch.AddCount). The link's first clicks in an
// hour (first: its last access was in an earlier hour) also drop its
// hours past retention; a link clicked again within the hour had them
// dropped then. Apply only.
func (c *clickHours) add(id uint64, hour uint32, n uint64, first bool) {
	if first {
		c.drop(id, uint64(c.oldestKept()))
	}
	c.key = hourKey(c.key, id, hour)
	c.eng.addCount(c.key, n)
}

// drop deletes the link id's hours before the hour before: an hour's key
// is the link's prefix then the hour, so they are the prefix's first keys.
// Apply only.
func (c *clickHours) drop(id uint64, before uint64) {
	if before == 0 {
		return
	}
	c.stale = c.stale[:0]
	c.eng.scan(linkHoursPrefix(id), nil, func(key, _ []byte) bool {
		if len(key) != hourKeyLen || uint64(binary.BigEndian.Uint32(key[9:])) >= before {
			return false
		}
		c.stale = append(c.stale, key...)
		return true
	})
	for k := c.stale; len(k) >= hourKeyLen; k = k[hourKeyLen:] {
		c.eng.delete(k[:hourKeyLen])
	}
}

// forget deletes every hour of the link id. Apply only.
func (c *clickHours) forget(id uint64) { c.drop(id, 1<<32) }

// read returns the link id's hours in [from, to), oldest first.
func (c *clickHours) read(id uint64, from uint32, to uint64) []hourCount {
	var out []hourCount
	prefix := linkHoursPrefix(id)
	c.eng.scan(prefix, binary.BigEndian.AppendUint32(bytes.Clone(prefix), from), func(key, value []byte) bool {
		if len(key) != hourKeyLen || len(value) != 4 {
			return true
		}
		hour := binary.BigEndian.Uint32(key[9:])
		if uint64(hour) >= to {
			return false
		}
		out = append(out, hourCount{hour, binary.BigEndian.Uint32(value)})
		return true
	})
	return out
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
	hours := &f.s.links.hours
	var out []HourClicks
	for _, h := range hours.read(f.s.links.recs.at(p).id, hours.oldestKept(), 1<<32) {
		start := int64(h.hour) * hourMillis
		if start >= from && start < to {
			out = append(out, HourClicks{Start: start, Clicks: uint64(h.count)})
		}
	}
	return out, true
}

// keptHours calls fn with each live link of the view that has hours within
// retention, in id order, and those hours, oldest first; hours is valid
// only during the call.
func (snap *snapshot) keptHours(fn func(id uint64, hours []hourCount)) {
	recs, keep := &snap.records, oldestKeptAt(snap.newestHour)
	var (
		hours []hourCount
		id    uint64
		p     = recs.first // the first record whose id may be id: positions are in id order
	)
	flush := func() {
		for p < recs.n && recs.at(p).id < id {
			p++
		}
		if len(hours) > 0 && p < recs.n && recs.at(p).id == id && recs.at(p).live() {
			fn(id, hours)
		}
		hours = hours[:0]
	}
	snap.fail(snap.engine.Scan([]byte{hourPrefix}, nil, func(key, value []byte) bool {
		if len(key) != hourKeyLen || len(value) != 4 {
			return true
		}
		if next := binary.BigEndian.Uint64(key[1:]); next != id {
			flush()
			id = next
		}
		if hour := binary.BigEndian.Uint32(key[9:]); hour >= keep {
			hours = append(hours, hourCount{hour, binary.BigEndian.Uint32(value)})
		}
		return true
	}))
	flush()
}

// encodeClickHours writes the newest hour, then for each live link with
// clicks within retention: its id, the number of hours, and per hour the
// distance from the previous one (from 0 for the first) and the count.
// The view is read twice: the number of links comes first.
func (snap *snapshot) encodeClickHours(e *encoder, flush func(bool)) {
	e.uvarint(uint64(snap.newestHour))
	n := 0
	snap.keptHours(func(uint64, []hourCount) { n++ })
	e.uvarint(uint64(n))
	snap.keptHours(func(id uint64, hours []hourCount) {
		e.uvarint(id)
		e.uvarint(uint64(len(hours)))
		prev := uint32(0)
		for _, h := range hours {
			e.uvarint(uint64(h.hour - prev))
			e.uvarint(uint64(h.count))
			prev = h.hour
		}
		flush(false)
	})
}

// decodeClickHours reads the clicks per hour into the state's engine.
// Every entry must name a link, in id order, with hours strictly
// increasing, within retention and not after the newest hour, and counts
// above zero.
func (lt *linkTable) decodeClickHours(d *decoder) error {
	newest := d.uvarint()
	if d.err == nil && newest > uint64(^uint32(0)) {
		return fmt.Errorf("newest click hour %d", newest)
	}
	hours := &lt.hours
	hours.newest = uint32(newest)
	var prevID uint64
	for n := d.count(3); n > 0 && d.err == nil; n-- {
		id := d.uvarint()
		if _, ok := lt.positionOf(id); d.err == nil && (!ok || id <= prevID) {
			return fmt.Errorf("click hours for link %d: no such link, or out of order", id)
		}
		prevID = id
		hour, first := uint64(0), true
		for k := d.count(2); k > 0 && d.err == nil; k-- {
			step, count := d.uvarint(), d.uvarint()
			hour += step
			switch {
			case d.err != nil:
				return d.err
			case step == 0 && !first, hour > newest, hour < uint64(hours.oldestKept()), count == 0, count > uint64(^uint32(0)):
				return fmt.Errorf("link %d: click hour %d with %d clicks", id, hour, count)
			}
			hours.key = hourKey(hours.key, id, uint32(hour))
			binary.BigEndian.PutUint32(hours.value[:], uint32(count))
			hours.eng.set(hours.key, hours.value[:])
			first = false
		}
	}
	return lt.hours.eng.err
}

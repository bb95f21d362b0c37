package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"unsafe"
)

// visitTable is every link's visitors, on disk (store/DESIGN.md, "Keys"):
// per link a totals key (visitPrefix, id), its bots in all, present from
// its first visitor on; and per day a key (visitPrefix, id, day) whose
// value is the day's counts and hourly tallies, encoded as snapshots
// encode them (dayCodec). Only the number of links with visitors is in
// memory: a link costs no heap for its visitors.
//
// Apply reads and writes through the apply batch. A command gathers what
// it changes decoded (pending) and writes each link's totals and days
// once, at its end (flush): a click batch that names one link's day many
// times decodes and encodes it once, and the batch holds one value of it,
// not one per click. Readers read the committed engine, a snapshot its
// view (keptVisits).
type visitTable struct {
	eng   *engine
	links int // links with visitors (a totals key): the state is at LevelVisits
	// pending is what the command being applied changed, by link, in the
	// order first changed; byID finds a link's place in it.
	pending []*pendingVisits
	byID    map[uint64]int
	key     []byte // reused by the writer
	value   []byte
	codec   dayCodec
	stale   []byte // reused by drop: the keys it deletes, back to back
	// arena holds the values the pending days were decoded from: their
	// keys view it. spare is the days of earlier commands, reused.
	arena []byte
	spare []*dayVisits
}

// pendingVisits is one link's visitors a command changed.
type pendingVisits struct {
	id uint64
	// bots is read from the totals only when needed (loaded): a visitor
	// who is no bot, on a day the link already has, changes no totals.
	bots   [botCount]uint64
	loaded bool
	change bool         // bots changed, or the link has its first visitor
	days   []*dayVisits // the days changed, decoded
}

// visitPrefix is the engine's table of visitors (store/DESIGN.md, "Keys").
const visitPrefix = 'v'

// The lengths of a link's totals key (the table, the id) and of a day's
// (then the day).
const (
	visitTotalsKeyLen = 1 + 8
	visitDayKeyLen    = visitTotalsKeyLen + 4
)

// maxSpareDays bounds the days kept for reuse (a click batch's worth of
// links), which keep their lists (24 bytes a country or referrer host)
// but not their hours' tuples.
const maxSpareDays = 1024

func newVisitTable(eng *engine) visitTable { return visitTable{eng: eng} }

func (v *visitTable) active() bool { return v.links > 0 }

// visitKey is the key of the link id's totals, appended to dst[:0].
func visitKey(dst []byte, id uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst[:0], visitPrefix), id)
}

// visitDayKey is the key of the link id's day, appended to dst[:0].
func visitDayKey(dst []byte, id uint64, day uint32) []byte {
	return binary.BigEndian.AppendUint32(visitKey(dst, id), day)
}

// totals is the bots in all of the link id, and whether it has had a
// visitor; for readers and the writer alike.
func (v *visitTable) totals(id uint64) (bots [botCount]uint64, ok bool) {
	value, found := v.eng.read(visitKey(nil, id))
	if !found {
		return bots, false
	}
	bots, err := decodeVisitTotals(id, value)
	if err != nil {
		panic("fsm: the engine holds " + err.Error()) // a reader's request fails; Apply's stops the node
	}
	return bots, true
}

func decodeVisitTotals(id uint64, value []byte) (bots [botCount]uint64, err error) {
	d := decoder{buf: value}
	bots[Crawler], bots[Preview] = d.uvarint(), d.uvarint()
	if d.err != nil || len(d.buf) != 0 {
		return bots, fmt.Errorf("damaged visitor totals for link %d: %v", id, d.err)
	}
	return bots, nil
}

// days calls fn with each of the link id's days in [from, to), oldest
// first, decoded (with their tallies unless countsOnly), until fn returns
// false; for readers and the writer alike. fn may keep the day.
func (v *visitTable) days(id uint64, from, to uint32, countsOnly bool, fn func(*dayVisits) bool) {
	prefix := visitKey(nil, id)
	v.eng.scan(prefix, visitDayKey(nil, id, from), func(key, value []byte) bool {
		if len(key) != visitDayKeyLen {
			return true
		}
		day := binary.BigEndian.Uint32(key[visitTotalsKeyLen:])
		if day >= to {
			return false
		}
		return fn(decodeStoredDay(id, day, bytes.Clone(value), countsOnly))
	})
}

// add counts n clicks of visitor who to the link at p on the day of now
// and, with tally (a state raised to LevelVisitRows), in its hour's
// tallies, into the command's pending changes: flush writes them. The
// caller has already moved the newest hour. Apply only.
func (v *visitTable) add(lt *linkTable, p uint64, who *Visitor, n uint64, now int64, tally bool) {
	hour, timed := hourOf(now)
	if !timed || n == 0 {
		return
	}
	pv := v.pendingOf(lt.recs.at(p).id)
	if who.Bot != NotBot {
		v.loadTotals(pv)
		pv.bots[who.Bot] += n
		pv.change = true
	}
	oldest := lt.oldestDay()
	if hour/24 < oldest {
		v.loadTotals(pv) // the link has had a visitor, if never before
		return           // a day past retention is not stored
	}
	d := v.pendingDay(pv, hour/24, oldest)
	slot, inserted := d.add(who, n)
	if tally {
		d.tally(uint8(hour%24), who, n, slot, inserted, false)
	}
}

// pendingOf is the link id's pending changes.
func (v *visitTable) pendingOf(id uint64) *pendingVisits {
	if i, ok := v.byID[id]; ok {
		return v.pending[i]
	}
	if v.byID == nil {
		v.byID = map[uint64]int{}
	}
	pv := &pendingVisits{id: id}
	v.byID[id] = len(v.pending)
	v.pending = append(v.pending, pv)
	return pv
}

// loadTotals reads the link's totals into pv once; a link without any
// has its first visitor.
func (v *visitTable) loadTotals(pv *pendingVisits) {
	if pv.loaded {
		return
	}
	var known bool
	if pv.bots, known = v.totals(pv.id); !known {
		pv.change = true
		v.links++
	}
	pv.loaded = true
}

// pendingDay is the link's day for changing: decoded from disk, or new.
// A link's first visitor of a day also drops its days past retention
// (oldest is the first kept); a link visited again that day had them
// dropped then, as its hours are (clickHours.add).
func (v *visitTable) pendingDay(pv *pendingVisits, day, oldest uint32) *dayVisits {
	for _, d := range pv.days {
		if d.day == day {
			return d
		}
	}
	d := &dayVisits{}
	if n := len(v.spare); n > 0 {
		d, v.spare = v.spare[n-1], v.spare[:n-1]
	}
	if value, found := v.eng.get(visitDayKey(v.key, pv.id, day)); found {
		start := len(v.arena)
		v.arena = append(v.arena, value...)
		decodeStoredDayInto(d, pv.id, day, v.arena[start:], false) // a day implies totals
	} else {
		v.loadTotals(pv)
		v.drop(pv.id, uint64(oldest))
		*d = dayVisits{day: day, countries: d.countries[:0], referrers: d.referrers[:0], tallies: d.tallies[:0]}
	}
	pv.days = append(pv.days, d)
	return d
}

// flush writes the pending changes of the command just applied. Apply
// only; every Apply path that adds visitors ends with it.
func (v *visitTable) flush() {
	for _, pv := range v.pending {
		if pv.change {
			v.setTotals(pv.id, pv.bots)
		}
		for _, d := range pv.days {
			v.setDay(pv.id, d)
		}
		for _, d := range pv.days[:min(len(pv.days), maxSpareDays-len(v.spare))] {
			hours := d.tallies[:cap(d.tallies)]
			for i := range hours {
				hours[i].tuples = nil // the hours' arrays go; the day's lists stay
			}
			v.spare = append(v.spare, d)
		}
	}
	clear(v.pending)
	v.pending, v.arena = v.pending[:0], v.arena[:0]
	if cap(v.arena) > keptBatchBytes {
		v.arena = nil // a command that read many large days: not kept for every later one
	}
	clear(v.byID)
}

func (v *visitTable) setTotals(id uint64, bots [botCount]uint64) {
	e := encoder{buf: v.value[:0]}
	e.uvarint(bots[Crawler])
	e.uvarint(bots[Preview])
	v.value = e.buf
	v.key = visitKey(v.key, id)
	v.eng.set(v.key, v.value)
}

func (v *visitTable) setDay(id uint64, d *dayVisits) {
	v.key = visitDayKey(v.key, id, d.day)
	v.eng.set(v.key, v.codec.encode(d))
}

// drop deletes the link id's days before the day before: a day's key is
// the link's totals key then the day, so they are the first keys after
// it. Apply only.
func (v *visitTable) drop(id uint64, before uint64) {
	v.stale = v.stale[:0]
	v.eng.scan(visitKey(nil, id), nil, func(key, _ []byte) bool {
		switch {
		case len(key) == visitTotalsKeyLen:
			return true
		case len(key) != visitDayKeyLen || uint64(binary.BigEndian.Uint32(key[visitTotalsKeyLen:])) >= before:
			return false
		}
		v.stale = append(v.stale, key...)
		return true
	})
	for k := v.stale; len(k) >= visitDayKeyLen; k = k[visitDayKeyLen:] {
		v.eng.delete(k[:visitDayKeyLen])
	}
}

// forget deletes the link id's visitors: its totals and every day. A
// link without totals has no days (they come with its first visitor):
// only a read. Apply only.
func (v *visitTable) forget(id uint64) {
	v.flush()
	if _, ok := v.totals(id); !ok {
		return
	}
	v.drop(id, 1<<32)
	v.eng.delete(visitKey(v.key, id))
	v.links--
}

// dayCodec encodes stored days, reusing its buffers: a stored day's
// value is the length of the day's counts as a snapshot's visitors section
// writes them (encodeDay), those bytes, then its tallies as the tallies
// section writes them (encodeDayTallies: the number of hours first, 0 for
// none). A snapshot copies both parts as they are.
type dayCodec struct {
	value, counts []byte
	sorted        []tupleCount
}

// encode returns d's stored value, valid until the next call.
func (c *dayCodec) encode(d *dayVisits) []byte {
	counts := encoder{buf: c.counts[:0]}
	encodeDay(&counts, d)
	e := encoder{buf: c.value[:0]}
	e.uvarint(uint64(len(counts.buf)))
	e.fixed(counts.buf)
	c.sorted = encodeDayTallies(&e, d, c.sorted)
	c.value, c.counts = e.buf, counts.buf
	return e.buf
}

// storedDayParts splits a stored day's value into its counts and its
// tallies; false when damaged.
func storedDayParts(value []byte) (counts, tallies []byte, ok bool) {
	n, k := binary.Uvarint(value)
	if k <= 0 || n > uint64(len(value)-k) {
		return nil, nil, false
	}
	return value[k : k+int(n)], value[k+int(n):], true
}

// decodeStoredDay decodes the link id's day from its stored value,
// without its tallies when countsOnly. The day's keys view value, which
// the caller hands over. The value is the state's own, so it is read
// without a snapshot's checks; a damaged one is the disk's, and answering
// without the day would change what nodes agree on, so it panics (a
// reader's request fails; Apply's stops the node).
func decodeStoredDay(id uint64, day uint32, value []byte, countsOnly bool) *dayVisits {
	dv := &dayVisits{}
	decodeStoredDayInto(dv, id, day, value, countsOnly)
	return dv
}

// decodeStoredDayInto is decodeStoredDay into dv, whose slices it reuses.
func decodeStoredDayInto(dv *dayVisits, id uint64, day uint32, value []byte, countsOnly bool) {
	*dv = dayVisits{day: day, countries: dv.countries[:0], referrers: dv.referrers[:0], tallies: dv.tallies[:0]}
	counts, tallies, ok := storedDayParts(value)
	if ok {
		r := storedReader{b: counts}
		decodeStoredCounts(&r, dv)
		ok = !r.bad && len(r.b) == 0
	}
	if ok && !countsOnly {
		r := storedReader{b: tallies}
		decodeStoredTallies(&r, dv)
		ok = !r.bad && len(r.b) == 0
	}
	if !ok {
		panic(fmt.Sprintf("fsm: the engine holds a damaged day %d of link %d's visitors", day, id))
	}
}

// decodeStoredCounts reads what encodeDay wrote; keys view r's input.
func decodeStoredCounts(r *storedReader, dv *dayVisits) {
	for _, counts := range [...][]uint32{dv.browsers[:], dv.systems[:], dv.devices[:], dv.bots[Crawler:]} {
		for i := range counts {
			counts[i] = uint32(r.uvarint())
		}
	}
	for _, list := range [...]*[]keyCount{&dv.countries, &dv.referrers} {
		n := r.count()
		*list = slices.Grow((*list)[:0], n)[:n]
		for i := range *list {
			(*list)[i] = keyCount{r.stringView(), uint32(r.uvarint())}
		}
	}
	dv.others = uint32(r.uvarint())
}

// decodeStoredTallies reads what encodeDayTallies wrote. The hours'
// tuples share one array, each hour's capped at its length: a tuple
// added to an hour moves that hour's tuples to an array of their own.
func decodeStoredTallies(r *storedReader, dv *dayVisits) {
	hours := r.count()
	if hours == 0 {
		return
	}
	dv.tallies = slices.Grow(dv.tallies[:0], hours)[:hours]
	all := make([]tupleCount, 0, len(r.b)/5+1) // a tuple and its count take 5 bytes or so
	for k := range dv.tallies {
		h := &dv.tallies[k]
		*h = hourTally{hour: r.byte(), overflow: uint32(r.uvarint()), owned: true}
		start := len(all)
		for range r.count() {
			all = append(all, tupleCount{tuple(r.uvarint()), uint32(r.uvarint())})
		}
		h.tuples = all[start:len(all):len(all)]
	}
}

// storedReader reads the engine's values (a stored day, a link record):
// the decoder's work without its stream, checks and errors, on the stack
// of the hot paths. bad: something ran past the input.
type storedReader struct {
	b   []byte
	bad bool
}

func (r *storedReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.b, r.bad = nil, true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// varint reads what binary.AppendVarint wrote: a zigzag uvarint.
func (r *storedReader) varint() int64 {
	u := r.uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

func (r *storedReader) byte() byte {
	if len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// count is a number of things each at least a byte long.
func (r *storedReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.b, r.bad = nil, true
		return 0
	}
	return int(n)
}

// stringView is a string of the input, not a copy.
func (r *storedReader) stringView() string {
	n := r.count()
	if n == 0 {
		return ""
	}
	s := unsafe.String(&r.b[0], n)
	r.b = r.b[n:]
	return s
}

// storedVisitDay is one day of a link as a snapshot's view holds it:
// its counts and its tallies as stored.
type storedVisitDay struct {
	day             uint32
	counts, tallies []byte
}

// keptVisits calls fn with each live link of the view that has visitors,
// in id order: its bots in all and its days within retention, oldest
// first; days is valid only during the call.
func (snap *snapshot) keptVisits(fn func(id uint64, bots [botCount]uint64, days []storedVisitDay)) {
	recs, keep := &snap.records, oldestKeptAt(snap.newestHour)/24
	var (
		days  []storedVisitDay
		ends  [][3]int // per day where its counts start, its tallies start and it ends in buf
		buf   []byte   // the days' values: the scan lends them only during a call
		id    uint64
		bots  [botCount]uint64
		known bool         // id has totals
		p     = recs.first // the first record whose id may be id: positions are in id order
	)
	flush := func() {
		for p < recs.n && recs.at(p).id < id {
			p++
		}
		if known && p < recs.n && recs.at(p).id == id && recs.at(p).live() {
			for i, e := range ends {
				days[i].counts, days[i].tallies = buf[e[0]:e[1]], buf[e[1]:e[2]]
			}
			fn(id, bots, days)
		}
		days, ends, buf, known = days[:0], ends[:0], buf[:0], false
	}
	snap.fail(snap.engine.Scan([]byte{visitPrefix}, nil, func(key, value []byte) bool {
		if len(key) != visitTotalsKeyLen && len(key) != visitDayKeyLen {
			return true
		}
		if next := binary.BigEndian.Uint64(key[1:]); next != id {
			flush()
			id = next
		}
		if len(key) == visitTotalsKeyLen {
			var err error
			if bots, err = decodeVisitTotals(id, value); err != nil {
				snap.fail(err) // the snapshot fails; the node goes on
				return false
			}
			known = true
			return true
		}
		day := binary.BigEndian.Uint32(key[visitTotalsKeyLen:])
		if day < keep {
			return true
		}
		counts, tallies, ok := storedDayParts(value)
		if !ok {
			snap.fail(fmt.Errorf("day %d of link %d's visitors is damaged", day, id))
			return false
		}
		start := len(buf)
		buf = append(append(buf, counts...), tallies...)
		days = append(days, storedVisitDay{day: day})
		ends = append(ends, [3]int{start, start + len(counts), len(buf)})
		return true
	}))
	flush()
}

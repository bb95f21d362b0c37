package fsm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// What clicks say about their visitors is kept per link and per day, in
// the same exactly-once entries that count the clicks: each click of a
// batch carries its Visitor, and the state adds it to the day of the
// batch's clock. Only aggregates are kept (counts per browser, operating
// system, device class, country and referrer host), never an address.
//
// Bots (crawlers and link previewers) are counted apart, per day and in
// all, and leave the link's clicks, hours and last access untouched: a
// link pasted into a chat is not a link followed.
//
// Days follow the hourly series' retention: a day is kept while its last
// hour is within ClickRetentionHours of the newest hour any batch carried.
//
// Referrer hosts are bounded: a link keeps the first MaxReferrersPerDay
// distinct hosts of each day, and counts later new hosts as "other". The
// first hosts of a day are usually its main ones, and counts stay exact
// for every host it names; ranking by count would need to keep every
// host until the day ends.

// Browser, OS, DeviceClass and Bot are the classes a Visitor falls in.
// Their zero values are "other", and "none" for Bot.
type (
	Browser     uint8
	OS          uint8
	DeviceClass uint8
	Bot         uint8
)

// The browsers the statistics tell apart; BrowserOther is any other.
const (
	BrowserOther Browser = iota
	Chrome
	Safari
	Firefox
	Edge
	Opera
	browserCount
)

// The operating systems the statistics tell apart; OSOther is any other.
const (
	OSOther OS = iota
	Windows
	MacOS
	Linux
	IOS
	Android
	ChromeOS
	osCount
)

// The device classes the statistics tell apart; DeviceClassOther is any
// other, or one not known.
const (
	DeviceClassOther DeviceClass = iota
	DeviceClassDesktop
	DeviceClassMobile
	DeviceClassTablet
	deviceCount
)

// Whether a click was a bot's, and which kind of bot.
const (
	NotBot Bot = iota
	// Crawler is a search engine's or another crawler's fetch.
	Crawler
	// Preview is a link previewer's fetch: a chat or social app
	// unfurling a link pasted into it.
	Preview
	botCount
)

var (
	browserNames = [browserCount]string{"other", "chrome", "safari", "firefox", "edge", "opera"}
	osNames      = [osCount]string{"other", "windows", "macos", "linux", "ios", "android", "chromeos"}
	classNames   = [deviceCount]string{"other", "desktop", "mobile", "tablet"}
	botNames     = [botCount]string{"none", "crawler", "preview"}
)

// String is the browser's name as visit breakdowns show it.
func (b Browser) String() string { return nameOf(browserNames[:], b) }

// String is the operating system's name as visit breakdowns show it.
func (o OS) String() string { return nameOf(osNames[:], o) }

// String is the device class's name as visit breakdowns show it.
func (d DeviceClass) String() string { return nameOf(classNames[:], d) }

// String is the bot kind's name ("none" for NotBot).
func (b Bot) String() string { return nameOf(botNames[:], b) }

func nameOf[T ~uint8](names []string, v T) string {
	if int(v) < len(names) {
		return names[v]
	}
	return names[0]
}

// Bounds and names of the referrer and country statistics.
const (
	// MaxReferrersPerDay is how many referrer hosts a link keeps a day.
	MaxReferrersPerDay = 32
	// MaxReferrerLen bounds a referrer host: a DNS name's longest form.
	MaxReferrerLen = 253
	// Direct, OtherReferrer and UnknownCountry are the names the answers
	// use for a click without a referrer, for the hosts past a day's
	// bound, and for an address no country is known for.
	Direct         = "direct"
	OtherReferrer  = "other"
	UnknownCountry = "XX"
)

// Visitor is what one click says about who made it.
type Visitor struct {
	// Referrer is the referring page's host, lower case; "" when the
	// click had none.
	Referrer string
	// Country is an ISO 3166-1 alpha-2 code in upper case; zero when
	// unknown.
	Country [2]byte
	Browser Browser
	OS      OS
	Device  DeviceClass
	Bot     Bot
}

// CountryCode is the visitor's country as answers show it.
func (v *Visitor) CountryCode() string {
	if v.Country == ([2]byte{}) {
		return UnknownCountry
	}
	return string(v.Country[:])
}

var errVisitor = errors.New("invalid visitor")

// check refuses a visitor the state could not store as it is: a leader
// refuses the batch that carries one instead of guessing.
func (v *Visitor) check() error {
	switch {
	case v.Browser >= browserCount, v.OS >= osCount, v.Device >= deviceCount, v.Bot >= botCount:
		return fmt.Errorf("%w: class out of range", errVisitor)
	case v.Country != [2]byte{} && !(isUpper(v.Country[0]) && isUpper(v.Country[1])):
		return fmt.Errorf("%w: country %q", errVisitor, v.Country[:])
	case !validReferrer(v.Referrer):
		return fmt.Errorf("%w: referrer %q", errVisitor, v.Referrer)
	}
	return nil
}

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }

// validReferrer accepts what a host can be, in lower case: letters,
// digits, dots, hyphens and underscores, or a bracketed IPv6 address.
func validReferrer(host string) bool {
	if len(host) > MaxReferrerLen || host == Direct || host == OtherReferrer {
		return false // those names belong to the answers
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_' || c == ':' || c == '[' || c == ']') {
			return false
		}
	}
	return true
}

func encodeVisitor(e *encoder, v *Visitor) {
	e.string(v.Referrer)
	e.fixed(v.Country[:])
	e.byte(byte(v.Browser))
	e.byte(byte(v.OS))
	e.byte(byte(v.Device))
	e.byte(byte(v.Bot))
}

func decodeVisitor(d *decoder) Visitor {
	v := Visitor{Referrer: d.string()}
	d.fixed(v.Country[:])
	v.Browser, v.OS, v.Device, v.Bot = Browser(d.byte()), OS(d.byte()), DeviceClass(d.byte()), Bot(d.byte())
	if d.err == nil {
		if err := v.check(); err != nil {
			d.fail(err)
		}
	}
	return v
}

// EncodeVisitor and DecodeVisitor carry a visitor between nodes where the
// log does not: a follower forwarding a visit to a limited link.
func EncodeVisitor(v Visitor) []byte {
	var e encoder
	encodeVisitor(&e, &v)
	return e.buf
}

// DecodeVisitor reads what EncodeVisitor wrote. It refuses trailing bytes
// and a visitor the state could not store.
func DecodeVisitor(b []byte) (Visitor, error) {
	d := decoder{buf: b}
	v := decodeVisitor(&d)
	if d.err == nil && len(d.buf) != 0 {
		d.fail(fmt.Errorf("%d trailing bytes", len(d.buf)))
	}
	return v, d.err
}

// WithoutVisitors is the batch as a cluster that has not finished an
// upgrade can apply it: clicks per code, without visitors, and without
// bots, which would otherwise count as clicks, or orphan visits.
func (c ClickBatch) WithoutVisitors() ClickBatch {
	out := ClickBatch{Node: c.Node, Seq: c.Seq, Now: c.Now}
	for _, cc := range c.Counts {
		_, _, orphan := orphanOf(cc.Code)
		switch n := len(out.Counts); {
		case cc.Visitor.Bot != NotBot, orphan:
		case n > 0 && out.Counts[n-1].Code == cc.Code:
			out.Counts[n-1].Count += cc.Count
		default:
			out.Counts = append(out.Counts, ClickCount{Code: cc.Code, Count: cc.Count})
		}
	}
	return out
}

// dayMillis is one day in Unix milliseconds; days are UTC.
const dayMillis = 24 * hourMillis

// keyCount is the clicks of one country or referrer host in a day.
type keyCount struct {
	key   string
	count uint32
}

// dayVisits is one day of one link's visitors. The sums over browsers,
// systems and devices are each the day's clicks that carried a visitor.
type dayVisits struct {
	day       uint32 // days since the Unix epoch
	gen       uint64 // the record table's generation it was made in
	browsers  [browserCount]uint32
	systems   [osCount]uint32
	devices   [deviceCount]uint32
	bots      [botCount]uint32 // [NotBot] unused
	countries []keyCount       // by key; "" never (UnknownCountry is a key)
	referrers []keyCount       // by key; "" is a click without a referrer
	others    uint32           // clicks from referrer hosts past the bound
	tallies   []hourTally      // by hour, once raised to LevelVisitRows (tallies.go)
}

// linkVisits is the days of one domain's orphan visits of one kind
// (orphans.go), in memory; a link's are on disk (visitTable).
type linkVisits struct {
	gen  uint64
	days []*dayVisits // oldest first
}

// each calls fn with the days in [from, to), oldest first.
func (lv *linkVisits) each(from, to uint32, fn func(*dayVisits)) {
	for _, d := range lv.days[firstDayAtOrAfter(lv.days, from):] {
		if d.day >= to {
			return
		}
		fn(d)
	}
}

// mutableDay returns lv's day for changing, adding it in order when new;
// nil for a day before the oldest kept, which is not stored.
func (lv *linkVisits) mutableDay(day, oldest uint32, gen uint64, sharing bool) *dayVisits {
	if keep := firstDayAtOrAfter(lv.days, oldest); keep > 0 {
		lv.days = slices.Clone(lv.days[keep:]) // never shift a shared slice
	}
	if day < oldest {
		return nil
	}
	i := firstDayAtOrAfter(lv.days, day)
	if i < len(lv.days) && lv.days[i].day == day {
		d := lv.days[i]
		if d.gen != gen && sharing {
			cp := *d
			cp.gen = gen
			cp.countries, cp.referrers = slices.Clone(d.countries), slices.Clone(d.referrers)
			cp.tallies = sharedTallies(d.tallies)
			lv.days[i] = &cp
		}
		return lv.days[i]
	}
	d := &dayVisits{day: day, gen: gen}
	lv.days = slices.Insert(lv.days, i, d)
	return d
}

func firstDayAtOrAfter(days []*dayVisits, day uint32) int {
	i := len(days)
	for i > 0 && days[i-1].day >= day {
		i--
	}
	return i
}

// add counts n clicks of visitor v in this day. It returns where the
// referrer is in the day's sorted list (otherSlot for a host past the
// bound, and for a bot), and whether it took that place just now: the
// tallies name referrers by their place (tally).
func (d *dayVisits) add(v *Visitor, n uint64) (slot uint8, inserted bool) {
	if v.Bot != NotBot {
		d.bots[v.Bot] = saturatingAdd(d.bots[v.Bot], n)
		return otherSlot, false
	}
	d.browsers[v.Browser] = saturatingAdd(d.browsers[v.Browser], n)
	d.systems[v.OS] = saturatingAdd(d.systems[v.OS], n)
	d.devices[v.Device] = saturatingAdd(d.devices[v.Device], n)
	d.countries = addKey(d.countries, v.CountryCode(), n)
	i, found := slices.BinarySearchFunc(d.referrers, v.Referrer, compareKey)
	switch {
	case found:
		d.referrers[i].count = saturatingAdd(d.referrers[i].count, n)
		return uint8(i), false
	case len(d.referrers) >= MaxReferrersPerDay:
		d.others = saturatingAdd(d.others, n)
		return otherSlot, false
	}
	d.referrers = slices.Insert(d.referrers, i, keyCount{strings.Clone(v.Referrer), saturatingAdd(0, n)})
	return uint8(i), true
}

// addKey adds n to key's count in the sorted list, inserting it (with a
// copy of key, which may view a decoded entry) when absent.
func addKey(list []keyCount, key string, n uint64) []keyCount {
	i, ok := slices.BinarySearchFunc(list, key, compareKey)
	if ok {
		list[i].count = saturatingAdd(list[i].count, n)
		return list
	}
	return slices.Insert(list, i, keyCount{strings.Clone(key), saturatingAdd(0, n)})
}

func compareKey(k keyCount, key string) int { return strings.Compare(k.key, key) }

// oldestDay is the first day any of whose hours is within retention.
func (lt *linkTable) oldestDay() uint32 { return lt.hours.oldestKept() / 24 }

// visitsUsed is what a link's visit limit counts: its clicks and its bots.
func (s *state) visitsUsed(p uint64) uint64 {
	r := s.links.recs.at(p)
	used := r.clicks
	if bots, ok := s.visits.totals(r.id); ok {
		used += bots[Crawler] + bots[Preview]
	}
	return used
}

// encodeVisits writes, for each live link with bots or kept days, in id
// order: its id, its bots in all, and its days, each as the distance from
// the previous one (from 0 for the first) and its counts, as stored. The
// view is read twice: the number of links comes first.
func (snap *snapshot) encodeVisits(e *encoder, flush func(bool)) {
	kept := func(bots [botCount]uint64, days []storedVisitDay) bool {
		return len(days) > 0 || bots != [botCount]uint64{}
	}
	n := 0
	snap.keptVisits(func(_ uint64, bots [botCount]uint64, days []storedVisitDay) {
		if kept(bots, days) {
			n++
		}
	})
	e.uvarint(uint64(n))
	snap.keptVisits(func(id uint64, bots [botCount]uint64, days []storedVisitDay) {
		if !kept(bots, days) {
			return
		}
		e.uvarint(id)
		e.uvarint(bots[Crawler])
		e.uvarint(bots[Preview])
		encodeStoredDays(e, days, func(d *storedVisitDay) { e.fixed(d.counts) })
		flush(false)
	})
}

// encodeStoredDays is encodeDays of days as stored.
func encodeStoredDays(e *encoder, days []storedVisitDay, each func(*storedVisitDay)) {
	e.uvarint(uint64(len(days)))
	prev := uint32(0)
	for i := range days {
		e.uvarint(uint64(days[i].day - prev))
		prev = days[i].day
		each(&days[i])
	}
}

func encodeDay(e *encoder, d *dayVisits) {
	for _, counts := range [][]uint32{d.browsers[:], d.systems[:], d.devices[:], d.bots[Crawler:]} {
		for _, c := range counts {
			e.uvarint(uint64(c))
		}
	}
	for _, list := range [][]keyCount{d.countries, d.referrers} {
		e.uvarint(uint64(len(list)))
		for _, k := range list {
			e.string(k.key)
			e.uvarint(uint64(k.count))
		}
	}
	e.uvarint(uint64(d.others))
}

// readVisits reads what encodeVisits wrote into the state's engine,
// refusing anything the state could not have made: unknown links, days
// out of order or out of retention, keys out of order or not what a
// visitor can carry.
func readVisits(st *state, d *decoder) error {
	newest, oldest := st.links.hours.newest/24, st.links.oldestDay()
	v := &st.visits
	var prevID uint64
	for n := d.count(4); n > 0 && d.err == nil; n-- {
		id := d.uvarint()
		if _, ok := st.links.positionOf(id); d.err == nil && (!ok || id <= prevID) {
			return fmt.Errorf("visitors of link %d: no such link, or out of order", id)
		}
		prevID = id
		var bots [botCount]uint64
		bots[Crawler], bots[Preview] = d.uvarint(), d.uvarint()
		v.setTotals(id, bots)
		v.links++
		day := uint64(0)
		for k, first := d.count(20), true; k > 0 && d.err == nil; k, first = k-1, false {
			var ok bool
			if day, ok = stepDay(day, d.uvarint(), first, oldest, newest); d.err == nil && !ok {
				return fmt.Errorf("visitors of link %d: day %d", id, day)
			}
			dv := dayVisits{day: uint32(day)}
			if err := decodeDay(d, &dv); err != nil {
				return fmt.Errorf("visitors of link %d, day %d: %w", id, day, err)
			}
			v.setDay(id, &dv)
		}
	}
	if d.err != nil {
		return d.err
	}
	return v.eng.err
}

// encodeDays writes days, oldest first, as their number and each as the
// step from the one before (the first from day 0), followed by what each
// writes of it; stepDay reads the steps back.
func encodeDays(e *encoder, days []*dayVisits, each func(*dayVisits)) {
	e.uvarint(uint64(len(days)))
	prev := uint32(0)
	for _, d := range days {
		e.uvarint(uint64(d.day - prev))
		prev = d.day
		each(d)
	}
}

// stepDay is the day a snapshot's step from the previous one names: days
// are written oldest first as steps from the one before (the first from
// day 0). false for a step that does not move forward, or lands outside
// [oldest, newest]; a step past newest is refused before it is added, so
// no step can wrap around to an earlier day.
func stepDay(day, step uint64, first bool, oldest, newest uint32) (uint64, bool) {
	if step == 0 && !first || day > uint64(newest) || step > uint64(newest)-day {
		return day + step, false
	}
	day += step
	return day, day >= uint64(oldest)
}

func decodeDay(d *decoder, dv *dayVisits) error {
	count := func() uint32 {
		c := d.uvarint()
		if d.err == nil && c > uint64(^uint32(0)) {
			d.fail(fmt.Errorf("count %d", c))
		}
		return uint32(c)
	}
	for _, counts := range [][]uint32{dv.browsers[:], dv.systems[:], dv.devices[:], dv.bots[Crawler:]} {
		for i := range counts {
			counts[i] = count()
		}
	}
	lists := []struct {
		list  *[]keyCount
		valid func(string) bool
		max   int
	}{
		{&dv.countries, validCountryKey, 27 * 26},
		{&dv.referrers, func(h string) bool { return validReferrer(h) }, MaxReferrersPerDay},
	}
	for _, l := range lists {
		n := d.count(2)
		if n > l.max {
			return fmt.Errorf("%d keys", n)
		}
		for i := 0; i < n && d.err == nil; i++ {
			k := keyCount{key: d.string(), count: count()}
			if d.err != nil {
				break
			}
			if !l.valid(k.key) || k.count == 0 || i > 0 && (*l.list)[i-1].key >= k.key {
				return fmt.Errorf("key %q with %d clicks", k.key, k.count)
			}
			*l.list = append(*l.list, k)
		}
	}
	dv.others = count()
	return d.err
}

func validCountryKey(k string) bool {
	return len(k) == 2 && isUpper(k[0]) && isUpper(k[1])
}

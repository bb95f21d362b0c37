package fsm

import (
	"fmt"
	"strings"
)

// Options is what a link may have beyond its code, target and expiry. A
// link without any of it has no Options at all (nil), so the redirect of a
// plain link reads nothing more than before options existed. An Options
// value is never changed once stored: an edit stores a new one, so readers
// may keep it without copying.
type Options struct {
	Title        string
	Tags         []string // as given; compared case-insensitively
	MaxVisits    uint64   // 0: no limit
	ValidSince   int64    // unix ms; 0: valid from creation
	PasswordHash string   // bcrypt; "" for none. Never the password.
	ForwardQuery bool     // append the request's query to the target's
	PublicStats  bool     // stats readable without a key
	Rules        []Rule   // the first that holds picks the target
	// Crawlable lets search engines index the link: robots.txt allows its
	// path (entry level LevelVisitRows).
	Crawlable bool
	// History is every target the link has had, the current one last,
	// each with when and by which key it became the target. Empty until
	// the target is first edited (the creation is then its first entry).
	History []Version
}

// Limits of what a link may hold. The HTTP layer refuses more with a
// message; Apply refuses it again so no proposer can store more.
const (
	MaxTags   = 10
	MaxTagLen = 40
	// MaxTitleLen is a title's length in characters (Shlink's), checked
	// by the input rules with MaxTitleBytes.
	MaxTitleLen = 512
	// MaxTitleBytes is Apply's bound on a title, as it was when titles
	// were 256 characters of at most 4 bytes: every build refuses the
	// same titles, so raising MaxTitleLen needs no level.
	MaxTitleBytes = 1024
	MaxRules      = 32
	MaxRuleQuery  = 8
	// MaxRuleAddresses bounds the address patterns of one rule.
	MaxRuleAddresses = 8
)

// Device is the class of device a rule asks for.
type Device byte

// The devices a rule can ask for; DeviceAny, the zero value, holds for
// every visit.
const (
	DeviceAny Device = iota
	DeviceIOS
	DeviceAndroid
	DeviceMobile // any phone or tablet, iOS and Android included
	DeviceDesktop
)

var deviceNames = [...]string{"", "ios", "android", "mobile", "desktop"}

// String is the device's name in the API's rules ("" for DeviceAny), as
// ParseDevice reads it.
func (d Device) String() string {
	if int(d) < len(deviceNames) {
		return deviceNames[d]
	}
	return fmt.Sprintf("device(%d)", d)
}

// ParseDevice reads a device name; "" is DeviceAny.
func ParseDevice(s string) (Device, bool) {
	for i, n := range deviceNames {
		if n == s {
			return Device(i), true
		}
	}
	return DeviceAny, false
}

// Rule sends a visit to URL when every condition it sets holds. An unset
// condition (zero value) holds always.
type Rule struct {
	Device   Device
	Language string       // lower-case language range: "en" matches "en-GB"
	Query    []QueryParam // each parameter must have the value; sorted by name
	Country  string       // ISO 3166 alpha-2, upper-case
	After    int64        // unix ms: the rule holds from this time on
	Before   int64        // unix ms: the rule holds until this time
	URL      string
	// Browser, when not BrowserOther, is the browser the visit must come
	// from (entry level LevelVisitRows).
	Browser Browser
	// Addresses, when set, are patterns of which the visitor's address
	// must match one (AddressPattern; entry level LevelVisitRows).
	Addresses []string
}

// QueryParam is one query condition of a rule.
type QueryParam struct{ Name, Value string }

// Version is one target of a link.
type Version struct {
	URL       string
	ChangedAt int64  // when it became the target (unix ms)
	KeyID     string // the key that made it the target; "" for the creation
}

// HasTag reports whether the link has tag, compared case-insensitively.
func (o *Options) HasTag(tag string) bool {
	if o == nil {
		return false
	}
	for _, t := range o.Tags {
		if strings.EqualFold(t, tag) {
			return true
		}
	}
	return false
}

// empty reports whether o holds nothing a link needs to keep.
func (o *Options) empty() bool {
	return o == nil || o.Title == "" && len(o.Tags) == 0 && o.MaxVisits == 0 && o.ValidSince == 0 &&
		o.PasswordHash == "" && !o.ForwardQuery && !o.PublicStats && len(o.Rules) == 0 && len(o.History) == 0 &&
		!o.Crawlable
}

// extended reports whether o holds a field of LevelVisitRows, which only
// the extended entry types and version 10 snapshots carry.
func (o *Options) extended() bool {
	return o != nil && (o.Crawlable || rulesExtended(o.Rules))
}

// rulesExtended reports rules with a condition of LevelVisitRows: on the
// browser or the address, or on the country, which builds before it
// never met (they held no visit to be in a country), so a cluster must
// not send them such a rule before every node would honour it.
func rulesExtended(rules []Rule) bool {
	for i := range rules {
		if rules[i].Browser != BrowserOther || len(rules[i].Addresses) > 0 || rules[i].Country != "" {
			return true
		}
	}
	return false
}

// check is the state machine's floor for options: bounds that keep one
// link small, and targets it would be dangerous to serve. Every node checks
// far more before proposing.
func (o *Options) check(raised int) error {
	if o == nil {
		return nil
	}
	switch {
	case len(o.Title) > MaxTitleBytes:
		return fmt.Errorf("%w: title too long", ErrInvalidRequest)
	case len(o.Tags) > MaxTags:
		return fmt.Errorf("%w: more than %d tags", ErrInvalidRequest, MaxTags)
	case len(o.Rules) > MaxRules:
		return fmt.Errorf("%w: more than %d rules", ErrInvalidRequest, MaxRules)
	case len(o.PasswordHash) > 128:
		return fmt.Errorf("%w: password hash too long", ErrInvalidRequest)
	}
	for _, t := range o.Tags {
		if t == "" || len(t) > MaxTagLen {
			return fmt.Errorf("%w: tag %q", ErrInvalidRequest, t)
		}
	}
	for _, r := range o.Rules {
		if len(r.Query) > MaxRuleQuery || r.Device > DeviceDesktop || r.Browser >= browserCount ||
			len(r.Addresses) > MaxRuleAddresses || !validRuleCountry(r.Country) {
			return fmt.Errorf("%w: rule for %q", ErrInvalidRequest, r.URL)
		}
		for _, a := range r.Addresses {
			if _, err := ParseAddressPattern(a); err != nil {
				return fmt.Errorf("%w: rule for %q: %w", ErrInvalidRequest, r.URL, err)
			}
		}
		if err := checkTarget(r.URL, raised); err != nil {
			return fmt.Errorf("rule target: %w", err)
		}
	}
	return nil
}

// validRuleCountry accepts no country, or an ISO 3166-1 alpha-2 code in
// upper case.
func validRuleCountry(c string) bool {
	return c == "" || len(c) == 2 && isUpper(c[0]) && isUpper(c[1])
}

// encodeOptions writes o after a presence byte, in the order below. Log
// entries and snapshots share it.
func encodeOptions(e *encoder, o *Options) {
	if o.empty() {
		e.bool(false)
		return
	}
	e.bool(true)
	e.string(o.Title)
	e.uvarint(uint64(len(o.Tags)))
	for _, t := range o.Tags {
		e.string(t)
	}
	e.uvarint(o.MaxVisits)
	e.varint(o.ValidSince)
	e.string(o.PasswordHash)
	e.bool(o.ForwardQuery)
	e.bool(o.PublicStats)
	encodeRules(e, o.Rules)
	e.uvarint(uint64(len(o.History)))
	for _, v := range o.History {
		e.string(v.URL)
		e.varint(v.ChangedAt)
		e.string(v.KeyID)
	}
}

func encodeRules(e *encoder, rules []Rule) {
	e.uvarint(uint64(len(rules)))
	for _, r := range rules {
		e.byte(byte(r.Device))
		e.string(r.Language)
		e.uvarint(uint64(len(r.Query)))
		for _, q := range r.Query {
			e.string(q.Name)
			e.string(q.Value)
		}
		e.string(r.Country)
		e.varint(r.After)
		e.varint(r.Before)
		e.string(r.URL)
	}
}

// decodeOptions reads what encodeOptions wrote; nil when there were none.
func decodeOptions(d *decoder) *Options {
	if !d.bool() {
		return nil
	}
	o := &Options{Title: d.string()}
	n := d.count(1)
	for i := 0; i < n && d.err == nil; i++ {
		o.Tags = append(o.Tags, d.string())
	}
	o.MaxVisits, o.ValidSince = d.uvarint(), d.varint()
	o.PasswordHash = d.string()
	o.ForwardQuery, o.PublicStats = d.bool(), d.bool()
	o.Rules = decodeRules(d)
	n = d.count(3)
	for i := 0; i < n && d.err == nil; i++ {
		o.History = append(o.History, Version{URL: d.string(), ChangedAt: d.varint(), KeyID: d.string()})
	}
	return o
}

// encodeOptionsExtended is encodeOptions followed by the fields of
// LevelVisitRows: the crawlable flag and each rule's browser and
// addresses (encodeRulesExtension). Extended entry types, version 10
// snapshots and links or options sent between nodes of a raised cluster
// carry it.
func encodeOptionsExtended(e *encoder, o *Options) {
	encodeOptions(e, o)
	if o.empty() {
		return
	}
	e.bool(o.Crawlable)
	encodeRulesExtension(e, o.Rules)
}

// decodeOptionsExtended reads what encodeOptionsExtended wrote.
func decodeOptionsExtended(d *decoder) *Options {
	o := decodeOptions(d)
	if o == nil {
		return nil
	}
	o.Crawlable = d.bool()
	decodeRulesExtension(d, o.Rules)
	return o
}

// encodeRulesExtension writes, for each of rules in order, its browser and
// its addresses: what LevelVisitRows added to a rule.
func encodeRulesExtension(e *encoder, rules []Rule) {
	for _, r := range rules {
		e.byte(byte(r.Browser))
		encodeStrings(e, r.Addresses)
	}
}

// decodeRulesExtension reads what encodeRulesExtension wrote into rules,
// which decodeRules read.
func decodeRulesExtension(d *decoder, rules []Rule) {
	for i := range rules {
		if d.err != nil {
			return
		}
		rules[i].Browser = Browser(d.byte())
		if rules[i].Browser >= browserCount {
			d.fail(fmt.Errorf("unknown browser %d", rules[i].Browser))
		}
		n := d.count(1)
		if n > MaxRuleAddresses {
			d.fail(fmt.Errorf("%d addresses in a rule", n))
		}
		for j := 0; j < n && d.err == nil; j++ {
			rules[i].Addresses = append(rules[i].Addresses, d.string())
		}
	}
}

// minRuleSize is the smallest encoding of a rule: eight one-byte fields.
const minRuleSize = 8

func decodeRules(d *decoder) []Rule {
	n := d.count(minRuleSize)
	var rules []Rule
	for i := 0; i < n && d.err == nil; i++ {
		r := Rule{Device: Device(d.byte()), Language: d.string()}
		k := d.count(2)
		for j := 0; j < k && d.err == nil; j++ {
			r.Query = append(r.Query, QueryParam{Name: d.string(), Value: d.string()})
		}
		r.Country, r.After, r.Before, r.URL = d.string(), d.varint(), d.varint(), d.string()
		if r.Device > DeviceDesktop {
			d.fail(fmt.Errorf("unknown device %d", r.Device))
		}
		rules = append(rules, r)
	}
	return rules
}

package httpd

import (
	"encoding/base64"
	"hash/maphash"
	"net/netip"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/httpd/agent"
)

// visitorOf is what a counted click records about who made it: the
// classes of its User-Agent, its referrer's host and its country, never
// its address. A bot keeps only that it is one. On a browser's repeated
// visit this allocates nothing: the User-Agent's classes and the
// referrer's host come from caches.
func (r *redirector) visitorOf(ctx *fasthttp.RequestCtx) (v fsm.Visitor) {
	if ua := ctx.UserAgent(); len(ua) > 0 {
		if v = r.agents.Classify(ua); v.Bot != fsm.NotBot {
			return v
		}
	}
	if referer := ctx.Referer(); len(referer) > 0 {
		v.Referrer = r.referrers.host(referer)
	}
	// The connection's address, or through a trusted proxy the one
	// X-Forwarded-For names.
	if r.countries != nil {
		v.Country = r.countryOf(ctx, r.proxies.clientIP(ctx))
	}
	return v
}

// countryOf is the country of client, ctx's client, from the table. A
// connection's requests nearly always come from one client: the last
// answer is kept on the connection, and asked again only for another.
func (r *redirector) countryOf(ctx *fasthttp.RequestCtx, client netip.Addr) (country [2]byte) {
	c := timedConnOf(ctx)
	if c != nil && c.countryKnown && c.countryOf == client {
		return c.country
	}
	if cc := r.countries.Country(client); len(cc) == 2 {
		country = [2]byte{cc[0], cc[1]}
	}
	if c != nil {
		c.countryKnown, c.countryOf, c.country = true, client, country
	}
	return country
}

// classesOf is what the statistics keep of a User-Agent: a bot's kind
// alone, or a person's browser, system and device.
func classesOf(ua []byte) fsm.Visitor {
	c := agent.Classify(ua)
	switch c.Bot {
	case agent.Crawler:
		return fsm.Visitor{Bot: fsm.Crawler}
	case agent.Preview:
		return fsm.Visitor{Bot: fsm.Preview}
	}
	return fsm.Visitor{Browser: browserOf(c.Browser), OS: osOf(c.OS), Device: deviceOf(c.Device)}
}

// The statistics name fewer browsers than agent tells apart: Samsung
// Internet counts as other.
func browserOf(b string) fsm.Browser {
	switch b {
	case agent.Chrome:
		return fsm.Chrome
	case agent.Safari:
		return fsm.Safari
	case agent.Firefox:
		return fsm.Firefox
	case agent.Edge:
		return fsm.Edge
	case agent.Opera:
		return fsm.Opera
	}
	return fsm.BrowserOther
}

func osOf(o string) fsm.OS {
	switch o {
	case agent.Windows:
		return fsm.Windows
	case agent.MacOS:
		return fsm.MacOS
	case agent.Linux:
		return fsm.Linux
	case agent.IOS:
		return fsm.IOS
	case agent.Android:
		return fsm.Android
	case agent.ChromeOS:
		return fsm.ChromeOS
	}
	return fsm.OSOther
}

func deviceOf(d agent.Device) fsm.DeviceClass {
	switch d {
	case agent.Desktop:
		return fsm.DeviceClassDesktop
	case agent.Mobile:
		return fsm.DeviceClassMobile
	case agent.Tablet:
		return fsm.DeviceClassTablet
	}
	return fsm.DeviceClassOther
}

// referrerHosts turns Referer headers into the hosts the statistics keep,
// remembering recent ones so that a repeated host costs no allocation. It
// is a direct-mapped table like agent.Cache: bounded, lock-free, and
// seeded per process so no one can aim hosts at one slot.
type referrerHosts struct {
	seed  maphash.Seed
	slots [1024]atomic.Pointer[string]
}

func newReferrerHosts() *referrerHosts { return &referrerHosts{seed: maphash.MakeSeed()} }

// host returns the lower-case host of an absolute http(s) referrer, ""
// for none, and "" too for anything that is not one: such a click counts
// as direct rather than inventing a host.
func (r *referrerHosts) host(referer []byte) string {
	if len(referer) == 0 {
		return ""
	}
	var buf [fsm.MaxReferrerLen]byte
	host, ok := referrerHost(referer, &buf)
	if !ok {
		return ""
	}
	slot := &r.slots[maphash.Bytes(r.seed, host)&(uint64(len(r.slots))-1)]
	if p := slot.Load(); p != nil && *p == string(host) {
		return *p
	}
	s := string(host)
	slot.Store(&s)
	return s
}

// referrerHost writes the host of referer, lower case, into buf, in one
// pass: scheme http or https, user info and port left out. false when
// there is none, or it is longer than a DNS name or holds what no host
// name does.
func referrerHost(referer []byte, buf *[fsm.MaxReferrerLen]byte) ([]byte, bool) {
	rest, ok := cutScheme(referer)
	if !ok {
		return nil, false
	}
	n, port, bracket := 0, false, false
	for _, c := range rest {
		k := hostBytes[c]
		if k >= hostChar && !port { // most bytes of most referrers
			if n == len(buf) {
				return nil, false
			}
			buf[n] = k
			n++
			continue
		}
		switch {
		case k == hostEnd:
			return hostIn(buf[:n])
		case k == hostUserEnd: // what came before was user info
			n, port, bracket = 0, false, false
			continue
		case port:
			continue
		case k == hostInvalid:
			return nil, false
		case k == hostColon && !bracket:
			port = true
			continue
		case k == hostBracketOpen:
			bracket = true
		case k == hostBracketClose:
			bracket = false
		}
		if n == len(buf) {
			return nil, false
		}
		buf[n] = c
		n++
	}
	return hostIn(buf[:n])
}

// What each byte of a referrer's authority is to referrerHost: one of
// these marks, or (from hostChar up) the byte a host keeps, lower case.
const (
	hostInvalid      = iota // no host name holds it
	hostEnd                 // '/', '?' or '#': the authority ends
	hostUserEnd             // '@': what came before was user info
	hostColon               // a port follows, unless inside brackets
	hostBracketOpen         // an IPv6 literal starts
	hostBracketClose        // and ends
	hostChar
)

// hostBytes maps every byte to its mark or its lower-case self; it is
// built once and never changed.
var hostBytes = func() (t [256]byte) {
	for c := range 256 {
		b := byte(c)
		switch {
		case 'A' <= b && b <= 'Z':
			t[c] = b + 'a' - 'A'
		case 'a' <= b && b <= 'z', '0' <= b && b <= '9', b == '.', b == '-', b == '_':
			t[c] = b
		}
	}
	t['/'], t['?'], t['#'] = hostEnd, hostEnd, hostEnd
	t['@'], t[':'], t['['], t[']'] = hostUserEnd, hostColon, hostBracketOpen, hostBracketClose
	return t
}()

// hostIn checks a parsed host: not empty, without the root's trailing
// dot, and not one of the names the answers use for no host and many.
func hostIn(host []byte) ([]byte, bool) {
	if n := len(host); n > 0 && host[n-1] == '.' {
		host = host[:n-1]
	}
	if len(host) == 0 || string(host) == fsm.Direct || string(host) == fsm.OtherReferrer {
		return nil, false
	}
	return host, true
}

func cutScheme(referer []byte) ([]byte, bool) {
	switch {
	case hasPrefixFold(referer, "https://"):
		return referer[len("https://"):], true
	case hasPrefixFold(referer, "http://"):
		return referer[len("http://"):], true
	}
	return nil, false
}

// hasPrefixFold reports whether b starts with the lower-case prefix,
// ASCII letters compared without case.
func hasPrefixFold(b []byte, prefix string) bool {
	if len(b) < len(prefix) {
		return false
	}
	for i := range len(prefix) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// forwardedVisitor is the visitor a peer sent along; only a peer's word
// is taken (the cluster port authenticates peers), and a malformed one is
// ignored.
func forwardedVisitor(ctx *fasthttp.RequestCtx) (fsm.Visitor, bool) {
	raw := ctx.Request.Header.Peek(wire.VisitorHeader)
	if len(raw) == 0 || !cluster.FromPeer(ctx) {
		return fsm.Visitor{}, false
	}
	bin, err := base64.RawURLEncoding.AppendDecode(nil, raw)
	if err != nil {
		return fsm.Visitor{}, false
	}
	v, err := fsm.DecodeVisitor(bin)
	return v, err == nil
}

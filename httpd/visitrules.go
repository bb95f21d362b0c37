package httpd

import (
	"bytes"
	"net/netip"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/httpd/agent"
)

// visit is what a link's rules look at, read once per redirect. It holds
// views into the request, so it is valid only while the handler runs.
type visit struct {
	device deviceClass
	langs  []byte         // the Accept-Language header, unparsed
	args   *fasthttp.Args // the query, parsed
	query  []byte         // the query as sent, for forward_query
	now    int64          // unix ms

	// What only rules on browser, address or country need, read on the
	// first such rule: the User-Agent's browser, the client's address and
	// its country (ISO 3166 alpha-2, "" when not known).
	browser  fsm.Browser
	client   netip.Addr
	country  string
	resolved bool
	ctx      *fasthttp.RequestCtx
	redir    *redirector // nil: the address is the connection's
}

// visitOf reads what rules look at from ctx. now is passed in so that a
// request is judged at one instant, the one its expiry was judged at.
func visitOf(ctx *fasthttp.RequestCtx, now time.Time) visit {
	return visit{
		device: classifyDevice(ctx.UserAgent()),
		langs:  ctx.Request.Header.Peek(fasthttp.HeaderAcceptLanguage),
		args:   ctx.QueryArgs(),
		query:  ctx.URI().QueryString(),
		now:    now.UnixMilli(),
		ctx:    ctx,
	}
}

// ruleVisit is visitOf whose address is the client's as this server
// trusts it: through a trusted proxy the one X-Forwarded-For names, on a
// visit a peer forwarded the one the peer named, never a header an
// untrusted client sent.
func (r *redirector) ruleVisit(ctx *fasthttp.RequestCtx, now time.Time) visit {
	v := visitOf(ctx, now)
	v.redir = r
	return v
}

// resolve reads the browser and the address, once per visit.
func (v *visit) resolve() {
	if v.resolved {
		return
	}
	v.resolved = true
	v.browser = browserOf(agent.Classify(v.ctx.UserAgent()).Browser) // a bot's is BrowserOther
	if v.redir != nil {
		v.client = v.redir.proxies.requestClient(v.ctx)
	} else {
		v.client, _ = netip.AddrFromSlice(v.ctx.RemoteIP())
	}
	v.client = v.client.Unmap()
	if v.redir != nil && v.redir.countries != nil && v.client.IsValid() {
		v.country = v.redir.countries.Country(v.client)
	}
}

// pickTarget is where a visit to a link with options goes: the URL of the
// first rule that holds, else target; with forward_query, the request's
// query is appended to it when it is hierarchical (hierarchical). It
// allocates only to append the query.
func pickTarget(target string, o *fsm.Options, v visit) string {
	if o == nil {
		return target
	}
	to := target
	for i := range o.Rules {
		if ruleHolds(&o.Rules[i], &v) {
			to = o.Rules[i].URL
			break
		}
	}
	if o.ForwardQuery && len(v.query) > 0 && hierarchical(to) {
		to = appendQuery(to, v.query)
	}
	return to
}

// ruleHolds reports whether every condition r sets holds for v. The cheap
// comparisons go first: most rules are decided by time or device.
func ruleHolds(r *fsm.Rule, v *visit) bool {
	switch {
	case r.After != 0 && v.now < r.After, r.Before != 0 && v.now >= r.Before:
		return false
	case !v.device.is(r.Device):
		return false
	case r.Language != "" && !acceptsLanguage(v.langs, r.Language):
		return false
	case !queryHolds(r.Query, v.args):
		return false
	}
	return r.Browser == fsm.BrowserOther && len(r.Addresses) == 0 && r.Country == "" || v.holdsClient(r)
}

// holdsClient reports whether the visit comes from the browser r asks
// for, from the country and from an address r names, where r asks: a
// visit whose browser, country or address is not known holds for no such
// rule (sending a visit to another country's target is worse than
// sending it to the link's own).
func (v *visit) holdsClient(r *fsm.Rule) bool {
	v.resolve()
	if r.Browser != fsm.BrowserOther && v.browser != r.Browser {
		return false
	}
	if r.Country != "" && r.Country != v.country {
		return false
	}
	if len(r.Addresses) == 0 {
		return true
	}
	if !v.client.IsValid() {
		return false
	}
	for _, a := range r.Addresses {
		if fsm.AddressMatches(a, v.client) {
			return true
		}
	}
	return false
}

// queryHolds reports whether args has every parameter of want with its
// value. A repeated parameter is judged by its first value, the one
// url.Values.Get and most servers read.
func queryHolds(want []fsm.QueryParam, args *fasthttp.Args) bool {
	for _, q := range want {
		if args == nil || !args.Has(q.Name) || string(args.Peek(q.Name)) != q.Value {
			return false
		}
	}
	return true
}

// appendQuery adds the raw query q to u, before u's fragment if it has one.
// Nothing in q is decoded or merged: the target's server sees both queries
// as written.
// hierarchical reports whether target's scheme is followed by "//" (an
// http(s) URL, myapp://open). The query of a mailto:, tel: or sms: target
// is not a page's parameters but the message's fields (cc, bcc, body):
// forwarded, whoever wrote the short link's query would fill them in for
// the visitor, so it is not appended there.
func hierarchical(target string) bool {
	i := strings.IndexByte(target, ':')
	return i > 0 && strings.HasPrefix(target[i+1:], "//")
}

func appendQuery(u string, q []byte) string {
	base, frag := u, ""
	if i := strings.IndexByte(u, '#'); i >= 0 {
		base, frag = u[:i], u[i:]
	}
	var sep string
	switch {
	case !strings.Contains(base, "?"):
		sep = "?"
	case !strings.HasSuffix(base, "?") && !strings.HasSuffix(base, "&"):
		sep = "&" // "…?" and "…&" already end where a parameter begins
	}
	var b strings.Builder
	b.Grow(len(base) + len(sep) + len(q) + len(frag))
	b.WriteString(base)
	b.WriteString(sep)
	b.Write(q)
	b.WriteString(frag)
	return b.String()
}

// deviceClass is what a User-Agent says about the device it runs on.
type deviceClass byte

const (
	deviceUnknown     deviceClass = iota // no User-Agent at all
	deviceIOS                            // iPhone, iPad, iPod
	deviceAndroid                        // any Android phone or tablet
	deviceOtherMobile                    // a phone or tablet of another system
	deviceDesktop                        // everything else that names itself
)

// is reports whether a visit from c satisfies a rule asking for d. A visit
// without a User-Agent satisfies only rules that ask for no device.
func (c deviceClass) is(d fsm.Device) bool {
	switch d {
	case fsm.DeviceAny:
		return true
	case fsm.DeviceIOS:
		return c == deviceIOS
	case fsm.DeviceAndroid:
		return c == deviceAndroid
	case fsm.DeviceMobile:
		return c == deviceIOS || c == deviceAndroid || c == deviceOtherMobile
	case fsm.DeviceDesktop:
		return c == deviceDesktop
	}
	return false // a device this build does not know holds for no visit
}

// classifyDevice reads the device class from a User-Agent by the tokens
// browsers have put there for a decade. It does not allocate: the literals
// do not escape, so they stay on the stack.
//
// iPadOS Safari asks for desktop pages by default and then sends the
// User-Agent of macOS Safari, with no "iPad" in it: such an iPad is
// classified as a desktop, and nothing in the request tells them apart.
func classifyDevice(ua []byte) deviceClass {
	switch {
	case len(ua) == 0:
		return deviceUnknown
	// Windows Phone browsers also say "Android" and "iPhone" so that sites
	// send them mobile pages; they are neither.
	case bytes.Contains(ua, []byte("Windows Phone")):
		return deviceOtherMobile
	case bytes.Contains(ua, []byte("iPhone")), bytes.Contains(ua, []byte("iPad")), bytes.Contains(ua, []byte("iPod")):
		return deviceIOS
	case bytes.Contains(ua, []byte("Android")):
		return deviceAndroid
	case bytes.Contains(ua, []byte("Mobi")), // "Mobi" covers "Mobile"
		bytes.Contains(ua, []byte("Opera Mini")), bytes.Contains(ua, []byte("IEMobile")):
		return deviceOtherMobile
	}
	return deviceDesktop
}

// acceptsLanguage reports whether an Accept-Language header (RFC 9110,
// 12.5.4) has a range with a non-zero weight that is lang or lies under it:
// "en" is accepted by "en" and "en-GB", "pt-br" by "pt-BR". lang is lower
// case. "*" accepts no language in particular, so it matches no rule.
// Malformed elements are skipped, as a server must not refuse a visit for
// a header it cannot read.
func acceptsLanguage(header []byte, lang string) bool {
	if lang == "" {
		return false
	}
	for len(header) > 0 {
		var elem []byte
		elem, header = cutByte(header, ',')
		tag, params := cutByte(elem, ';')
		tag = bytes.TrimSpace(tag)
		if !isLanguageRange(tag) || !underLanguage(tag, lang) {
			continue
		}
		if q, ok := weight(params); ok && q > 0 {
			return true
		}
	}
	return false
}

// underLanguage reports whether tag is lang or a subtag of it, ignoring
// ASCII case.
func underLanguage(tag []byte, lang string) bool {
	if len(tag) < len(lang) || !asciiEqualFold(tag[:len(lang)], lang) {
		return false
	}
	return len(tag) == len(lang) || tag[len(lang)] == '-'
}

// isLanguageRange reports whether r is a language range other than "*"
// (RFC 4647, 2.1): 1*8ALPHA *("-" 1*8alphanum).
func isLanguageRange(r []byte) bool {
	n, first := 0, true // length of the current subtag; whether it is the first
	for _, c := range r {
		switch {
		case c == '-':
			if n == 0 {
				return false
			}
			n, first = 0, false
			continue
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && !first: // the primary subtag is letters only
		default:
			return false
		}
		if n++; n > 8 {
			return false
		}
	}
	return n > 0
}

// weight reads the q parameter among the parameters of one element
// (";q=0.5", in any case, with optional whitespace), in thousandths. An
// element without one weighs 1000; one with a malformed weight is not ok.
func weight(params []byte) (q int, ok bool) {
	q = 1000
	for len(params) > 0 {
		var p []byte
		p, params = cutByte(params, ';')
		name, value, found := bytes.Cut(bytes.TrimSpace(p), []byte("="))
		if !found || len(name) != 1 || name[0]|0x20 != 'q' {
			continue // another parameter: none is defined, so it changes nothing
		}
		if q, ok = parseQValue(value); !ok {
			return 0, false
		}
	}
	return q, true
}

// parseQValue reads a qvalue (RFC 9110, 12.4.2): "0" or "1", then
// optionally "." and up to three digits, never above 1.
func parseQValue(v []byte) (int, bool) {
	if len(v) == 0 || len(v) > 5 || v[0] != '0' && v[0] != '1' {
		return 0, false
	}
	q := int(v[0]-'0') * 1000
	if len(v) == 1 {
		return q, true
	}
	if v[1] != '.' {
		return 0, false
	}
	for i, scale := 2, 100; i < len(v); i, scale = i+1, scale/10 {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
		q += int(v[i]-'0') * scale
	}
	return q, q <= 1000
}

// cutByte splits b around its first sep; rest is empty when there is none.
func cutByte(b []byte, sep byte) (before, rest []byte) {
	if i := bytes.IndexByte(b, sep); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

// asciiEqualFold reports whether b and s are equal ignoring ASCII case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if lowerASCII(b[i]) != lowerASCII(s[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

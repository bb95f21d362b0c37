package httpd

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

// User-Agents as the browsers and crawlers send them.
const (
	uaIPhoneSafari   = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1"
	uaIPadSafari     = "Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1"
	uaAndroidChrome  = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36"
	uaAndroidTablet  = "Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"
	uaWindowsChrome  = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"
	uaMacSafari      = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15"
	uaGooglebot      = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	uaGooglebotPhone = "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.6478.126 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	uaFirefoxMobile  = "Mozilla/5.0 (Mobile; rv:109.0) Gecko/109.0 Firefox/115.0" // KaiOS-like: a phone, neither iOS nor Android
	uaOperaMini      = "Opera/9.80 (J2ME/MIDP; Opera Mini/9.80 (S60; SymbOS; Opera Mobi/23.348; U; en) Presto/2.5.25 Version/10.54"
	uaWindowsPhone   = "Mozilla/5.0 (Windows Phone 10.0; Android 6.0.1; Microsoft; Lumia 950) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/52.0.2743.116 Mobile Safari/537.36 Edge/15.15063"
	uaCurl           = "curl/8.5.0"
)

func TestDeviceClassification(t *testing.T) {
	tests := []struct {
		name string
		ua   string
		want deviceClass
	}{
		{"iPhone Safari", uaIPhoneSafari, deviceIOS},
		{"iPad Safari", uaIPadSafari, deviceIOS},
		{"Android Chrome", uaAndroidChrome, deviceAndroid},
		{"Android tablet", uaAndroidTablet, deviceAndroid},
		{"Windows Chrome", uaWindowsChrome, deviceDesktop},
		{"macOS Safari", uaMacSafari, deviceDesktop}, // also iPadOS in desktop mode
		{"Googlebot", uaGooglebot, deviceDesktop},
		{"Googlebot smartphone", uaGooglebotPhone, deviceAndroid},
		{"Firefox OS phone", uaFirefoxMobile, deviceOtherMobile},
		{"Opera Mini", uaOperaMini, deviceOtherMobile},
		{"Windows Phone says Android", uaWindowsPhone, deviceOtherMobile},
		{"curl", uaCurl, deviceDesktop},
		{"empty", "", deviceUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classifyDevice([]byte(tt.ua)); got != tt.want {
				t.Errorf("classifyDevice(%q) = %d, want %d", tt.ua, got, tt.want)
			}
		})
	}
}

func TestDeviceRuleMatches(t *testing.T) {
	// want[d] is whether a rule asking for device d holds for the class.
	tests := []struct {
		class deviceClass
		want  [5]bool // any, ios, android, mobile, desktop
	}{
		{deviceUnknown, [5]bool{true, false, false, false, false}},
		{deviceIOS, [5]bool{true, true, false, true, false}},
		{deviceAndroid, [5]bool{true, false, true, true, false}},
		{deviceOtherMobile, [5]bool{true, false, false, true, false}},
		{deviceDesktop, [5]bool{true, false, false, false, true}},
	}
	for _, tt := range tests {
		for d, want := range tt.want {
			if got := tt.class.is(fsm.Device(d)); got != want {
				t.Errorf("class %d, rule device %v: %v, want %v", tt.class, fsm.Device(d), got, want)
			}
		}
		if tt.class.is(fsm.Device(99)) {
			t.Errorf("class %d satisfies an unknown device", tt.class)
		}
	}
}

func TestAcceptLanguage(t *testing.T) {
	tests := []struct {
		header, lang string
		want         bool
	}{
		{"en-GB,en;q=0.8", "en", true},
		{"en-GB", "en", true},
		{"EN-gb", "en", true},
		{"pt-BR", "pt-br", true},
		{"pt-BR,pt;q=0.9", "pt-br", true},
		{"pt", "pt-br", false}, // the rule is narrower than what is accepted
		{"pt-PT", "pt-br", false},
		{"eng", "en", false},   // another language, not a subtag
		{"en_GB", "en", false}, // malformed: skipped
		{"fr, en;q=0", "en", false},
		{"fr, en;q=0.000", "en", false},
		{"fr, en;q=0.001", "en", true},
		{"fr, en ; Q=0.5", "en", true},
		{"fr, en;q=1.000", "en", true},
		{"fr, en;q=1.5", "en", false},    // malformed weight: skipped
		{"fr, en;q=0.5x", "en", false},   // malformed weight
		{"fr, en;q=", "en", false},       // malformed weight
		{"fr, en;q=0.0001", "en", false}, // more than three decimals
		{"en;q=0, en-US;q=0.5", "en", true},
		{"en;level=1", "en", true}, // an unknown parameter changes nothing
		{"*", "en", false},
		{"*;q=1, de", "en", false},
		{"de-CH, de;q=0.9, *;q=0.5", "de", true},
		{"  de  ,,, ;q=1, en", "en", true},
		{"zh-Hant-TW", "zh-hant", true},
		{"zh-Hant-TW", "zh", true},
		{"1en", "en", false},
		{"en-", "en", false},
		{"en--GB", "en", false},
		{"en-abcdefghi", "en", false}, // subtag longer than eight
		{"", "en", false},
		{"en", "", false},
	}
	for _, tt := range tests {
		if got := acceptsLanguage([]byte(tt.header), tt.lang); got != tt.want {
			t.Errorf("acceptsLanguage(%q, %q) = %v, want %v", tt.header, tt.lang, got, tt.want)
		}
	}
}

// FuzzAcceptLanguage: no header makes the parser panic, and a language is
// never found in a header that does not contain it.
func FuzzAcceptLanguage(f *testing.F) {
	for _, s := range []string{"en-GB,en;q=0.8", "pt-BR", "*;q=0", "fr, en;q=0.001", "en;q=1.5", ";;,,", "de-CH;q=0.9;q=0"} {
		f.Add(s, "en")
		f.Add(s, "pt-br")
	}
	f.Fuzz(func(t *testing.T, header, lang string) {
		if !acceptsLanguage([]byte(header), lang) {
			return
		}
		if lang == "" || !bytes.Contains(lowerASCIIBytes(header), lowerASCIIBytes(lang)) {
			t.Fatalf("acceptsLanguage(%q, %q) matched a language the header does not name", header, lang)
		}
	})
}

// lowerASCIIBytes lowers only ASCII letters, as the matching does: a
// Unicode case mapping could change the other bytes.
func lowerASCIIBytes(s string) []byte {
	b := []byte(s)
	for i, c := range b {
		b[i] = lowerASCII(c)
	}
	return b
}

func TestForwardQueryAppend(t *testing.T) {
	tests := []struct{ url, query, want string }{
		{"https://example.com/a", "utm=x&b=2", "https://example.com/a?utm=x&b=2"},
		{"https://example.com/a?ref=s", "utm=x", "https://example.com/a?ref=s&utm=x"},
		{"https://example.com/a?", "utm=x", "https://example.com/a?utm=x"},
		{"https://example.com/a?ref=s&", "utm=x", "https://example.com/a?ref=s&utm=x"},
		{"https://example.com/a#top", "utm=x", "https://example.com/a?utm=x#top"},
		{"https://example.com/a?ref=s#top", "utm=x", "https://example.com/a?ref=s&utm=x#top"},
		{"https://example.com/a#frag?not-a-query", "utm=x", "https://example.com/a?utm=x#frag?not-a-query"},
		{"https://example.com/a", "q=%20a+b&x", "https://example.com/a?q=%20a+b&x"}, // as sent
	}
	for _, tt := range tests {
		if got := appendQuery(tt.url, []byte(tt.query)); got != tt.want {
			t.Errorf("appendQuery(%q, %q) = %q, want %q", tt.url, tt.query, got, tt.want)
		}
	}
}

// visitCtx is a request for uri with the given User-Agent and
// Accept-Language.
func visitCtx(uri, ua, langs string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetHost("sho.rt")
	if ua != "" {
		ctx.Request.Header.SetUserAgent(ua)
	}
	if langs != "" {
		ctx.Request.Header.Set(fasthttp.HeaderAcceptLanguage, langs)
	}
	return &ctx
}

const (
	ruleTarget = "https://example.com/"
	ruleIOS    = "https://apps.apple.com/app/id1"
	ruleDroid  = "https://play.google.com/store/apps/details?id=x"
	ruleDesk   = "https://example.com/desktop"
	ruleFrench = "https://example.fr/"
	ruleCampgn = "https://example.com/spring"
	ruleSale   = "https://example.com/sale"
	ruleFR     = "https://example.com/france"
)

func TestPickTarget(t *testing.T) {
	now := time.UnixMilli(1_750_000_000_000)
	nowMs := now.UnixMilli()
	opts := &fsm.Options{Rules: []fsm.Rule{
		{Country: "FR", URL: ruleFR}, // never holds until visits know countries
		{Query: []fsm.QueryParam{{Name: "c", Value: "spring"}, {Name: "src", Value: "mail"}}, URL: ruleCampgn},
		{After: nowMs + 1, URL: ruleSale + "/future"},
		{Before: nowMs, URL: ruleSale + "/past"},
		{After: nowMs, Before: nowMs + 1, Language: "de", URL: ruleSale},
		{Device: fsm.DeviceIOS, URL: ruleIOS},
		{Device: fsm.DeviceAndroid, URL: ruleDroid},
		{Device: fsm.DeviceDesktop, Language: "fr", URL: ruleFrench},
		{Device: fsm.DeviceDesktop, URL: ruleDesk},
	}}
	tests := []struct {
		name, uri, ua, langs string
		opts                 *fsm.Options
		want                 string
	}{
		{"no options", "/c", uaIPhoneSafari, "", nil, ruleTarget},
		{"iPhone", "/c", uaIPhoneSafari, "", opts, ruleIOS},
		{"Android", "/c", uaAndroidChrome, "", opts, ruleDroid},
		{"Windows", "/c", uaWindowsChrome, "en-US", opts, ruleDesk},
		{"macOS in French", "/c", uaMacSafari, "fr-CA,fr;q=0.9", opts, ruleFrench},
		{"French refused", "/c", uaMacSafari, "en, fr;q=0", opts, ruleDesk},
		{"Googlebot", "/c", uaGooglebot, "", opts, ruleDesk},
		{"no User-Agent", "/c", "", "", opts, ruleTarget},
		{"other phone", "/c", uaFirefoxMobile, "", opts, ruleTarget},
		{"campaign query", "/c?src=mail&c=spring", uaIPhoneSafari, "", opts, ruleCampgn},
		{"campaign, other value", "/c?src=mail&c=summer", uaIPhoneSafari, "", opts, ruleIOS},
		{"campaign, one missing", "/c?c=spring", uaIPhoneSafari, "", opts, ruleIOS},
		{"campaign, first value counts", "/c?c=autumn&c=spring&src=mail", uaIPhoneSafari, "", opts, ruleIOS},
		{"German during the sale", "/c", uaAndroidChrome, "de-AT", opts, ruleSale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := visitOf(visitCtx(tt.uri, tt.ua, tt.langs), now)
			if got := pickTarget(ruleTarget, tt.opts, v); got != tt.want {
				t.Errorf("pickTarget = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPickTargetTimeWindow(t *testing.T) {
	const after, before = 1000, 2000
	opts := &fsm.Options{Rules: []fsm.Rule{{After: after, Before: before, URL: ruleSale}}}
	for _, tt := range []struct {
		now  int64
		want string
	}{
		{after - 1, ruleTarget},
		{after, ruleSale},
		{before - 1, ruleSale},
		{before, ruleTarget},
	} {
		v := visitOf(visitCtx("/c", uaWindowsChrome, ""), time.UnixMilli(tt.now))
		if got := pickTarget(ruleTarget, opts, v); got != tt.want {
			t.Errorf("at %d: %q, want %q", tt.now, got, tt.want)
		}
	}
}

// TestRulesOnCountry: a country condition holds for the country of the
// client's address as the server trusts it (the connection's, or the one
// a trusted proxy names), and for no visit whose country is not known.
func TestRulesOnCountry(t *testing.T) {
	s := newTestServer(t, withCountries(t)) // trusts proxies on 127.0.0.0/8
	waitRaised(t, s)                        // country rules are of LevelVisitRows
	code := mustCreate(t, s, `{"url":"https://example.com/default","rules":[
		{"when":{"country":"gb"},"url":"https://example.co.uk/"},
		{"when":{"country":"NL","device":"desktop"},"url":"https://example.nl/"}]}`)
	cases := []struct {
		name, from string
		headers    []string
		want       string
	}{
		{"GB", "81.2.69.142", nil, "https://example.co.uk/"},
		{"NL on a desktop", "193.0.6.139", []string{"User-Agent", chromeWindows}, "https://example.nl/"},
		{"NL without a device", "193.0.6.139", nil, "https://example.com/default"},
		{"US", "8.8.8.8", nil, "https://example.com/default"},
		{"unknown country", "10.1.2.3", nil, "https://example.com/default"},
		{"through a trusted proxy", "127.0.0.1", []string{"X-Forwarded-For", "81.2.69.142"}, "https://example.co.uk/"},
		{"an untrusted client's header", "8.8.8.8", []string{"X-Forwarded-For", "81.2.69.142"}, "https://example.com/default"},
	}
	for _, c := range cases {
		ctx := doFrom(s, net.ParseIP(c.from), "GET", "/"+code, "", "", c.headers...)
		if got := string(ctx.Response.Header.Peek("Location")); ctx.Response.StatusCode() != 302 || got != c.want {
			t.Errorf("%s: %d to %q, want %q", c.name, ctx.Response.StatusCode(), got, c.want)
		}
	}
}

func TestPickTargetForwardQuery(t *testing.T) {
	tests := []struct {
		name, target, uri string
		rules             []fsm.Rule
		want              string
	}{
		{"no query", "https://example.com/a", "/c", nil, "https://example.com/a"},
		{"empty query", "https://example.com/a", "/c?", nil, "https://example.com/a"},
		{"target without ?", "https://example.com/a", "/c?utm_source=x", nil, "https://example.com/a?utm_source=x"},
		{"target with ?", "https://example.com/a?id=1", "/c?utm_source=x&id=2", nil, "https://example.com/a?id=1&utm_source=x&id=2"},
		{"target with fragment", "https://example.com/a#intro", "/c?utm_source=x", nil, "https://example.com/a?utm_source=x#intro"},
		{"target with ? and fragment", "https://example.com/a?id=1#intro", "/c?x=%2F", nil, "https://example.com/a?id=1&x=%2F#intro"},
		{"rule's target", "https://example.com/a", "/c?x=1",
			[]fsm.Rule{{Query: []fsm.QueryParam{{Name: "x", Value: "1"}}, URL: "https://example.com/b#f"}},
			"https://example.com/b?x=1#f"},
		{"app link", "myapp://open/item", "/c?utm_source=x", nil, "myapp://open/item?utm_source=x"},
		// A mailto: query is the message's fields: a link's query must not
		// add a bcc to the visitor's mail, nor a body to a text message.
		{"mailto", "mailto:team@example.com?subject=Hi", "/c?bcc=eve@example.com", nil, "mailto:team@example.com?subject=Hi"},
		{"sms", "sms:+15550100", "/c?body=pay", nil, "sms:+15550100"},
		{"tel rule", "https://example.com/a", "/c?x=1",
			[]fsm.Rule{{Query: []fsm.QueryParam{{Name: "x", Value: "1"}}, URL: "tel:+15550100"}}, "tel:+15550100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := &fsm.Options{ForwardQuery: true, Rules: tt.rules}
			v := visitOf(visitCtx(tt.uri, uaWindowsChrome, ""), time.Now())
			if got := pickTarget(tt.target, opts, v); got != tt.want {
				t.Errorf("pickTarget = %q, want %q", got, tt.want)
			}
			opts.ForwardQuery = false
			if got := pickTarget(tt.target, opts, v); bytes.Contains([]byte(got), []byte("utm_source")) {
				t.Errorf("query forwarded without forward_query: %q", got)
			}
		})
	}
}

// TestPickTargetAllocations: picking among rules allocates nothing; only
// appending the query may, once.
func TestPickTargetAllocations(t *testing.T) {
	opts := benchOptions()
	ctx := visitCtx("/c?src=mail&c=autumn", uaAndroidChrome, "pt-BR,pt;q=0.9,en;q=0.5")
	now := time.Now()
	if n := testing.AllocsPerRun(100, func() { _ = pickTarget(ruleTarget, opts, visitOf(ctx, now)) }); n != 0 {
		t.Errorf("pickTarget allocates %v times without forward_query", n)
	}
	fwd := *opts
	fwd.ForwardQuery = true
	if n := testing.AllocsPerRun(100, func() { _ = pickTarget(ruleTarget, &fwd, visitOf(ctx, now)) }); n > 1 {
		t.Errorf("pickTarget allocates %v times with forward_query, want at most 1", n)
	}
}

// benchOptions is a link with three rules, the last of which holds for an
// Android visit in Portuguese.
func benchOptions() *fsm.Options {
	return &fsm.Options{Rules: []fsm.Rule{
		{Query: []fsm.QueryParam{{Name: "c", Value: "spring"}, {Name: "src", Value: "mail"}}, URL: ruleCampgn},
		{Device: fsm.DeviceIOS, URL: ruleIOS},
		{Device: fsm.DeviceMobile, Language: "pt-br", URL: ruleDroid},
	}}
}

func BenchmarkPickTarget(b *testing.B) {
	for _, fwd := range []bool{false, true} {
		name := "rules"
		if fwd {
			name = "rules+forward_query"
		}
		b.Run(name, func(b *testing.B) {
			opts := benchOptions()
			opts.ForwardQuery = fwd
			ctx := visitCtx("/c?src=mail&c=autumn", uaAndroidChrome, "en-US,en;q=0.9,pt-BR;q=0.8")
			now := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				if pickTarget(ruleTarget, opts, visitOf(ctx, now)) == ruleTarget {
					b.Fatal("no rule held")
				}
			}
		})
	}
}

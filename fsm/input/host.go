package input

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"
)

// foldHost checks the characters of a host name (as net/url returns it,
// percent-decoded) and returns it lower-cased with the Unicode spellings
// that browsers rewrite into ASCII folded back to ASCII.
//
// Browsers run host names through IDNA (UTS #46) mapping before deciding
// whether they are IPv4 addresses, so "１２７。０。０。１" is visited as
// 127.0.0.1. The standard library has no IDNA, so the common mappings are
// folded here and every other character that IDNA would rewrite into ASCII
// (or delete) is refused outright; ordinary internationalised names such
// as bücher.example pass untouched.
func foldHost(h string) (string, error) {
	if !utf8.ValidString(h) {
		return "", errors.New("url: host is not valid UTF-8")
	}
	var b strings.Builder
	b.Grow(len(h))
	for _, r := range h {
		orig := r
		r = idnaFold(r)
		if r < utf8.RuneSelf {
			c, ok := hostByte(byte(r))
			if !ok {
				// Covers '%', which net/url leaves after decoding "%25":
				// browsers refuse it in a host, and so do we.
				return "", fmt.Errorf("url: host contains %q, which is not allowed in a host name", orig)
			}
			b.WriteByte(c)
			continue
		}
		if err := checkHostRune(r); err != nil {
			return "", err
		}
		b.WriteRune(r)
	}
	return b.String(), nil
}

// idnaFold folds the Unicode spellings of ASCII that IDNA maps to ASCII,
// and that browsers therefore visit as ASCII.
func idnaFold(r rune) rune {
	switch {
	case r == '\u3002' || r == '\uff0e' || r == '\uff61':
		// Ideographic, fullwidth and halfwidth full stops are label
		// separators to IDNA.
		return '.'
	case '\uff01' <= r && r <= '\uff5e':
		// Fullwidth forms of the printable ASCII characters.
		return r - 0xfee0
	case r >= utf8.RuneSelf && unicode.ToLower(r) < utf8.RuneSelf:
		// The Kelvin sign K lower-cases to an ASCII k, and similar.
		return unicode.ToLower(r)
	}
	return r
}

// hostByte is an ASCII character of a host name lower-cased, and whether
// a host name may hold it.
func hostByte(c byte) (byte, bool) {
	switch {
	case 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.':
		return c, true
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A', true
	}
	return 0, false
}

// checkHostRune refuses a non-ASCII character of a host name that IDNA
// would rewrite, or that real internationalised names are not made of.
func checkHostRune(r rune) error {
	if rewrittenByIDNA(r) {
		return fmt.Errorf("url: host contains %q (U+%04X), which browsers rewrite to something else; write the host name in its plain form", r, r)
	}
	// Letters, combining marks and decimal digits are what real
	// internationalised names are made of. Punctuation, symbols,
	// invisible format characters and unassigned code points are not,
	// and several of them are mapped to ASCII or deleted by IDNA.
	if !unicode.IsLetter(r) && !unicode.IsMark(r) && !unicode.Is(unicode.Nd, r) {
		return fmt.Errorf("url: host contains %q (U+%04X), which is not allowed in a host name", r, r)
	}
	return nil
}

// idnaRewritten lists letters, digits and marks that IDNA maps to ASCII or
// deletes (compatibility forms, ligatures, modifier and mathematical letters,
// variation selectors, fillers). The category check in foldHost catches the
// punctuation and symbols; these pass that check and so need naming.
// Whole blocks are listed where no legitimate host name would use them.
var idnaRewritten = [...][2]rune{
	{0x00aa, 0x00aa},   // ª
	{0x00ba, 0x00ba},   // º
	{0x0132, 0x0133},   // Ĳ ĳ
	{0x013f, 0x0140},   // Ŀ ŀ
	{0x0149, 0x0149},   // ŉ
	{0x017f, 0x017f},   // ſ long s
	{0x01c4, 0x01cc},   // Ǆ … ǌ
	{0x01f1, 0x01f3},   // Ǳ ǲ ǳ
	{0x02b0, 0x02b8},   // modifier letters ʰ … ʸ
	{0x02e0, 0x02e4},   // modifier letters ˠ … ˤ
	{0x034f, 0x034f},   // combining grapheme joiner
	{0x115f, 0x1160},   // Hangul fillers
	{0x17b4, 0x17b5},   // Khmer inherent vowels
	{0x180b, 0x180f},   // Mongolian variation selectors
	{0x1d2c, 0x1d6a},   // modifier letters ᴬ … ᵪ
	{0x1d9b, 0x1dbf},   // modifier letters ᶛ … ᶿ
	{0x1e9a, 0x1e9b},   // ẚ ẛ
	{0x2070, 0x209f},   // superscripts and subscripts
	{0x2100, 0x218f},   // letterlike symbols and number forms (ℓ, K, Ⅰ)
	{0x2460, 0x24ff},   // enclosed alphanumerics (①, ⓛ)
	{0x2c7c, 0x2c7d},   // ⱼ ⱽ
	{0x3164, 0x3164},   // Hangul filler
	{0xa7f2, 0xa7f4},   // modifier letters ꟲ ꟳ ꟴ
	{0xa7f8, 0xa7f9},   // modifier letters ꟸ ꟹ
	{0xab5c, 0xab5f},   // modifier letters ꭜ … ꭟ
	{0xab69, 0xab69},   // modifier letter ꭩ
	{0xfb00, 0xfb06},   // Latin ligatures ﬀ … ﬆ
	{0xfe00, 0xfe0f},   // variation selectors
	{0xffa0, 0xffa0},   // halfwidth Hangul filler
	{0x10780, 0x107bf}, // Latin extended-F modifier letters
	{0x1d400, 0x1d7ff}, // mathematical alphanumerics (𝐥, 𝟏)
	{0x1f100, 0x1f1ff}, // enclosed alphanumeric supplement
	{0x1fbf0, 0x1fbf9}, // segmented digits
	{0xe0000, 0xe0fff}, // tags and variation selectors supplement
}

func rewrittenByIDNA(r rune) bool {
	for _, rg := range idnaRewritten {
		if rg[0] <= r && r <= rg[1] {
			return true
		}
	}
	return false
}

// endsInNumber is the WHATWG URL "ends in a number" checker: a host whose
// last label is a decimal, octal or hex number is an IPv4 address or is
// invalid, never a domain name. name has no trailing dot.
func endsInNumber(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if last == "" {
		return false
	}
	if strings.Trim(last, "0123456789") == "" {
		return true
	}
	_, ok := parseIPv4Number(last)
	return ok
}

// parseIPv4 is the WHATWG URL IPv4 parser, the same rules as inet_aton:
// one to four parts, each decimal, octal (leading 0) or hex (leading 0x);
// the last part fills all remaining bytes. So 2130706433, 0x7f.1,
// 0177.0.0.1 and 127.1 all mean 127.0.0.1. name has no trailing dot.
func parseIPv4(name string) (netip.Addr, bool) {
	parts := strings.Split(name, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var nums [4]uint64
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	last := len(parts) - 1
	for i := range last {
		if nums[i] > 255 {
			return netip.Addr{}, false
		}
	}
	if nums[last] >= 1<<(8*(4-last)) {
		return netip.Addr{}, false
	}
	v := nums[last]
	for i := range last {
		v += nums[i] << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseIPv4Number parses one part of an IPv4 address. Values beyond 32 bits
// saturate instead of overflowing, since any such value is invalid anyway.
func parseIPv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
		base, s = 16, s[2:]
	case len(s) >= 2 && s[0] == '0':
		base, s = 8, s[1:]
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		var d uint64
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			d = uint64(c - '0')
		case 'a' <= c && c <= 'f':
			d = uint64(c-'a') + 10
		case 'A' <= c && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		if n < 1<<32 {
			n = n*base + d
		}
	}
	return n, true
}

// judgeName refuses host names that only mean something inside a network.
// name is lower-case without a trailing dot; labels is name split on dots.
func judgeName(shown, name string, labels []string) error {
	switch last := labels[len(labels)-1]; {
	case last == "localhost":
		return internal(shown, "a loopback host name")
	case last == "local":
		return internal(shown, "a multicast DNS (.local) name")
	case last == "internal":
		return internal(shown, "a private-use (.internal) name")
	case name == "home.arpa" || strings.HasSuffix(name, ".home.arpa"):
		return internal(shown, "a home network (.home.arpa) name")
	case len(labels) == 1:
		// Resolvers complete a dotless name with the local search
		// domains, so "http://intranet/" or "http://metadata/" lands on
		// an internal machine; no public site has such a name.
		return internal(shown, "a single-label name, which resolves inside the local network")
	}
	return nil
}

func internal(shown, what string) error {
	return fmt.Errorf("url: target %s is %s; internal targets are not allowed", shown, what)
}

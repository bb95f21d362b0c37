package input

import (
	"errors"
	"strings"
	"testing"
)

const internalMsg = "internal targets are not allowed"

// internalTargets point inside the network in some spelling a browser or
// curl accepts. They are refused unless allowPrivate, and accepted with it.
var internalTargets = []string{
	// Loopback, plain and in every IPv4 spelling WHATWG/inet_aton accept.
	"http://127.0.0.1/",
	"http://127.0.0.1:8080/admin",
	"http://127.1/",
	"http://127.0.1/",
	"http://127.255.255.254/",
	"http://2130706433/",
	"http://0x7f000001/",
	"http://0X7F000001/",
	"http://0x7f.1/",
	"http://0x7f.0.0.1/",
	"http://0x7f.0.0.01/",
	"http://0177.0.0.1/",
	"http://0177.1/",
	"http://017700000001/",
	"http://0x0000007f.0x1/",
	"http://00000000177.0.0.1/",
	"http://127.0.0.1./",
	"http://0x7f.1./",
	"http://2130706433./",
	"HTTP://127.0.0.1/",
	"https://127.0.0.1/",
	"http://127.0.0.1?x",
	"http://127.0.0.1#x",
	"http://127.0.0.1",
	// Unicode spellings that IDNA folds to ASCII before the IPv4 parser.
	"http://１２７.０.０.１/",
	"http://127。0。0。1/",
	"http://127．0．0．1/",
	"http://127｡0｡0｡1/",
	"http://%EF%BC%91%EF%BC%92%EF%BC%97.0.0.1/",
	"http://127%E3%80%820.0.1/",
	// Private (RFC 1918), shortened and numeric forms included.
	"http://10.0.0.1/",
	"http://10.1/",
	"http://10.255.255.255/",
	"http://012.0.0.1/",
	"http://0xa.0.0.1/",
	"http://167772161/",
	"http://172.16.0.1/",
	"http://172.31.255.255/",
	"http://192.168.0.1/",
	"http://192.168.1.1:443/",
	"http://0xc0.0xa8.1.1/",
	"http://3232235777/",
	"http://192.168.257/",
	// Link-local, including the cloud metadata address.
	"http://169.254.169.254/latest/meta-data/",
	"http://169.254.43518/",
	"http://2852039166/",
	"http://0xa9fea9fe/",
	"http://0251.0376.0251.0376/",
	// Shared (CGNAT) 100.64/10.
	"http://100.64.0.1/",
	"http://100.127.255.255/",
	// Unspecified / "this network" 0/8.
	"http://0.0.0.0/",
	"http://0/",
	"http://0x0/",
	"http://012/", // octal 0.0.0.10
	"http://0.1.2.3/",
	// Broadcast, multicast, reserved and special-purpose IPv4.
	"http://255.255.255.255/",
	"http://4294967295/",
	"http://0xffffffff/",
	"http://224.0.0.1/",
	"http://239.255.255.250/",
	"http://240.0.0.1/",
	"http://250.1.2.3/",
	"http://192.0.0.8/",
	"http://192.0.2.1/",
	"http://198.18.0.1/",
	"http://198.19.255.255/",
	"http://198.51.100.7/",
	"http://203.0.113.9/",
	"http://192.88.99.1/",
	// IPv6 loopback, unspecified, local and reserved ranges.
	"http://[::1]/",
	"http://[::1]:8080/",
	"http://[0:0:0:0:0:0:0:1]/",
	"http://[0000::0001]/",
	"http://[::]/",
	"http://[fe80::1]/",
	"http://[FE80::1]/",
	"http://[fe80::1%25eth0]/",
	"http://[fe80::a:b:c:d%25en0]:80/",
	"http://[fc00::1]/",
	"http://[fd12:3456:789a::1]/",
	"http://[fec0::1]/",
	"http://[ff02::1]/",
	"http://[ff05::1:3]/",
	"http://[100::1]/",
	"http://[2001:db8::1]/",
	"http://[2001::1]/",
	"http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
	"http://[2001:2::1]/",
	"http://[3fff::1]/",
	"http://[64:ff9b:1::1]/",
	"http://[::127.0.0.1]/",
	"http://[::8.8.8.8]/",
	"http://[::ffff:0:8.8.8.8]/",
	"http://[5f00::1]/",
	"http://[4000::1]/",
	"http://[2606:4700::1111%25eth0]/",
	// IPv6 forms that embed an internal IPv4 address.
	"http://[::ffff:127.0.0.1]/",
	"http://[::ffff:7f00:1]/",
	"http://[::FFFF:7F00:0001]/",
	"http://[0:0:0:0:0:ffff:127.0.0.1]/",
	"http://[::ffff:10.0.0.1]/",
	"http://[::ffff:169.254.169.254]/",
	"http://[::ffff:0.0.0.0]/",
	"http://[64:ff9b::127.0.0.1]/",
	"http://[64:ff9b::a9fe:a9fe]/",
	"http://[2002:7f00:1::]/",
	"http://[2002:c0a8:101::1]/",
	// Local-only host names.
	"http://localhost/",
	"http://localhost:3000/",
	"http://LOCALHOST/",
	"http://LocalHost./",
	"http://api.localhost/",
	"http://a.b.localhost./",
	"http://printer.local/",
	"http://PRINTER.LOCAL./",
	"http://metadata.google.internal/computeMetadata/v1/",
	"http://db.Internal/",
	"http://router.home.arpa/",
	"http://home.arpa/",
	"http://intranet/",
	"http://metadata/",
	"http://ip6-localhost/",
	"http://ｌｏｃａｌｈｏｓｔ/",
	"http://ＬＯＣＡＬＨＯＳＴ/",
	"http://\u212Aube.local/", // Kelvin sign
}

// malformedTargets are refused whatever allowPrivate says.
var malformedTargets = []struct {
	in, want string
}{
	// Required and scheme.
	{"", "url is required"},
	{"   \t\n ", "url is required"},
	{"javascript:alert(1)", "url: the javascript: scheme is not allowed: it runs script"},
	{"JavaScript://%0aalert(1)", "url: the javascript: scheme is not allowed: it runs script"},
	{"data:text/html,<script>alert(1)</script>", "url: the data: scheme is not allowed"},
	{"file:///etc/passwd", "url: the file: scheme is not allowed"},
	{"ftp://example.com/", "url: the ftp: scheme is not allowed"},
	{"gopher://127.0.0.1:70/", "url: the gopher: scheme is not allowed"},
	{"ws://example.com/", "url: the ws: scheme is not allowed"},
	{"localhost:8080/", "url: localhost:8080 looks like a host and port"},
	{"example.com:8080", "url: example.com:8080 looks like a host and port"},
	{"//example.com/", "url: must be an absolute URL"},
	{"//127.0.0.1/", "url: must be an absolute URL"},
	{"/relative/path", "url: must be an absolute URL"},
	{"relative/path", "url: must be an absolute URL"},
	{"example.com", "url: must be an absolute URL"},
	{"example.com/a:b", "url: must be an absolute URL"},
	{"?q=1", "url: must be an absolute URL"},
	{"#frag", "url: must be an absolute URL"},
	{":foo", "url: must be an absolute URL"},
	{"1http://example.com/", "url: must be an absolute URL"},
	{"http:", "url: must start with http:// or https://"},
	{"http:x", "url: must start with http:// or https://"},
	{"http:/x", "url: must start with http:// or https://"},
	{"http:example.com", "url: must start with http:// or https://"},
	{`http:\\example.com`, "url: must start with http:// or https://"},
	{`http:/\example.com`, "url: must start with http:// or https://"},
	{"http://", "url: a host is required"},
	{"http:///x", "url: a host is required"},
	{"http:////example.com", "url: a host is required"},
	{"https://?q", "url: a host is required"},
	{"https://#f", "url: a host is required"},
	{"http://:80/", "url: a host is required"},
	{"http://./", "url: a host is required"},
	// Credentials.
	{"http://user:pw@example.com/", "embedded credentials"},
	{"http://user@example.com/", "embedded credentials"},
	{"http://@example.com/", "embedded credentials"},
	{"http://google.com@evil.com/", "embedded credentials"},
	{"http://google.com:443@evil.com/", "embedded credentials"},
	{"http://user:pw@127.0.0.1/", "embedded credentials"},
	{"http://a@b@c.com/", "embedded credentials"},
	{"http://%40@example.com/", "embedded credentials"},
	// Backslashes, which browsers read as slashes.
	{`http://example.com\@127.0.0.1/`, "embedded credentials"},
	{`http://example.com\.evil.com/`, "backslash"},
	{`http://127.0.0.1\x/`, "backslash"},
	// Ports.
	{"http://example.com:0/", `port "0"`},
	{"http://example.com:65536/", `port "65536"`},
	{"http://example.com:99999999999999999999/", "from 1 to 65535"},
	{"http://example.com:/", "port is empty"},
	{"http://[2606:4700::1111]:/", "port is empty"},
	{"http://example.com:8o/", "not a valid URL"},
	{"http://example.com:-1/", "not a valid URL"},
	{"http://example.com:+80/", "not a valid URL"},
	{"http://example.com:80:80/", "not a valid URL"},
	// Host syntax.
	{"http://exa mple.com/", "whitespace"},
	{"http://exa_mple<.com/", "not allowed in a host name"},
	{"http://exa*mple.com/", "not allowed in a host name"},
	{"http://a..b/", "empty label"},
	{"http://.example.com/", "empty label"},
	{"http://example.com../", "empty label"},
	{"http://%2531.0.0.1/", "'%'"},
	{"http://a%25b.com/", "'%'"},
	{"http://%FF.com/", "not valid UTF-8"},
	{"http://%6c%6fcalhost/", "not a valid URL"},
	{"http://[1.2.3.4]/", "not a valid URL"},
	{"http://[::1/", "not a valid URL"},
	{"http://[v1.x]/", "not a valid URL"},
	{"http://[::1]x/", "not a valid URL"},
	{"http://example.com/%zz", "not a valid URL"},
	{"http://ex%00ample.com/", "not a valid URL"},
	{"http://" + strings.Repeat("a", 64) + ".com/", "longer than 63"},
	{"http://" + strings.Repeat("abcdefgh.", 30) + "com/", "longer than 253"},
	{"http://ｅｘａｍｐｌｅ％.com/", "not allowed in a host name"},
	{"http://exam\u00adple.com/", "U+00AD"},        // soft hyphen, deleted by IDNA
	{"http://loc\ufe0falhost/", "U+FE0F"},          // variation selector, deleted by IDNA
	{"http://exam\u200bple.com/", "U+200B"},        // zero width space
	{"http://\u24db\u24de\u24d2alhost/", "U+24DB"}, // circled letters
	{"http://\U0001d7cf\U0001d7d0\U0001d7d5.0.0.1/", "U+1D7CF"},
	{"http://127\u20240\u20240\u20241/", "U+2024"}, // one dot leader
	{"http://127\ufe520\ufe520\ufe521/", "U+FE52"}, // small full stop
	{"http://\u2474.0.0.1/", "U+2474"},
	{"http://\u017fite.com/", "U+017F"},
	{"http://\u2113ocalhost/", "U+2113"},
	{"http://example\u2044com/", "U+2044"},
	// Hosts whose last label is a number but are not IPv4 addresses.
	{"http://1.2.3.4.5/", "not a valid IPv4 address"},
	{"http://256.0.0.1/", "not a valid IPv4 address"},
	{"http://1.2.3.256/", "not a valid IPv4 address"},
	{"http://1.2.65536/", "not a valid IPv4 address"},
	{"http://4294967296/", "not a valid IPv4 address"},
	{"http://0x100000000/", "not a valid IPv4 address"},
	{"http://99999999999999999999999/", "not a valid IPv4 address"},
	{"http://08.0.0.1/", "not a valid IPv4 address"},
	{"http://0x7g.0.0.1/", "not a valid IPv4 address"},
	{"http://example.123/", "not a valid IPv4 address"},
	{"http://example.0x7f/", "not a valid IPv4 address"},
	{"http://foo.0x/", "not a valid IPv4 address"},
	{"http://foo.09/", "not a valid IPv4 address"},
	{"http://1.2.3.4.0x/", "not a valid IPv4 address"},
	// Control characters, whitespace and broken UTF-8 anywhere.
	{"http://example.com/a b", "whitespace"},
	{"http://example.com/a\tb", "control character"},
	{"http://example.com/a\nb", "control character"},
	{"http://example.com/a\rb", "control character"},
	{"http://exam\tple.com/", "control character"},
	{"http://127.0.0.1\t/", "control character"},
	{"http://example.com/\x00", "control character"},
	{"http://example.com/\x1b[31m", "control character"},
	{"http://example.com/\x7f", "control character"},
	{"http://example.com/\u0085x", "control character"},
	{"http://example.com/\u00a0x", "whitespace"},
	{"http://example.com/\u2028x", "whitespace"},
	{"http://example.com/\u3000x", "whitespace"},
	{"http://example.com/\u1680x", "whitespace"},
	{"http://example.com/\xff", "not valid UTF-8"},
	{"http://example.com/\xc3", "not valid UTF-8"},
	{"http://example.com/\xed\xa0\x80", "not valid UTF-8"},
	{"\x00http://example.com/", "control character"},
	{"http://example.com/\x00 ", "control character"},
	{"ht\ttp://example.com/", "control character"},
	{"java\nscript:alert(1)", "control character"},
}

// publicTargets are accepted whatever allowPrivate says.
var publicTargets = []string{
	"https://example.com/x",
	"http://example.com",
	"HTTPS://EXAMPLE.COM/Path?Q=1#Frag",
	"hTtP://example.com/",
	"https://example.com./",
	"https://www.example.co.uk:8443/a/b?c=d&e=f#g",
	"https://example.com:1/",
	"https://example.com:65535/",
	"https://example.com:00080/",
	"https://sub_domain.example.com/",
	"https://xn--bcher-kva.example/",
	"https://bücher.example/",
	"https://BÜCHER.example/",
	"https://%C3%BC.example/",
	"https://例え.テスト/",
	"https://例え。テスト/",
	"https://пример.рф/",
	"https://مثال.إختبار/",
	"https://ｅｘａｍｐｌｅ.com/",
	"https://example.com/path/with/%20escaped%2Fbits",
	"https://example.com/ünïcödé?q=☃#✓",
	"https://example.com/a\u202eb", // bidi controls outside the host are left to browsers
	"https://example.com/?next=http://127.0.0.1/",
	"https://example.com/#@evil.com",
	"https://example.com/?a=b@c",
	"https://example.com/@user",
	"https://1.1.1.1/",
	"http://8.8.8.8/",
	"http://8.8.8.8.",
	"http://134744072/",
	"http://0x8.0x8.0x8.0x8/",
	"http://010.010.010.010/",
	"http://0170000000/", // octal 1.224.0.0, not decimal 10.33.254.128
	"http://8.526344/",
	"http://172.15.255.255/",
	"http://172.32.0.0/",
	"http://100.63.255.255/",
	"http://100.128.0.0/",
	"http://169.253.255.255/",
	"http://169.255.0.0/",
	"http://192.0.1.1/",
	"http://192.0.3.1/",
	"http://192.167.255.255/",
	"http://192.169.0.0/",
	"http://198.17.255.255/",
	"http://198.20.0.0/",
	"http://223.255.255.255/",
	"http://1.0.0.0/",
	"https://[2606:4700::1111]/",
	"https://[2606:4700:4700::1111]:443/",
	"https://[2001:4860:4860::8888]/",
	"http://[2a00:1450:4001::200e]/",
	"http://[::ffff:8.8.8.8]/",
	"http://[::ffff:808:808]/",
	"http://[64:ff9b::8.8.8.8]/",
	"http://[2002:808:808::1]/",
	"http://localhost.example.com/",
	"http://local.example.com/",
	"http://internal.example.com/",
	"http://mylocalhost.com/",
	"http://example.localhost.com/",
	"http://example.cafe/",
	"http://example.0x7fz/",
	"http://123.example/",
	"http://0x7f.example.com/",
	"http://1.2.3.4.example/",
	"http://" + strings.Repeat("a", 63) + ".com/",
}

func TestTargetInternal(t *testing.T) {
	for _, in := range internalTargets {
		got, err := Target(in, false)
		if err == nil || !strings.Contains(err.Error(), internalMsg) {
			t.Errorf("Target(%q, false) = %q, %v; want an internal-target error", in, got, err)
		}
		got, err = Target(in, true)
		if err != nil || got != in {
			t.Errorf("Target(%q, true) = %q, %v; want it accepted unchanged", in, got, err)
		}
	}
}

func TestTargetPublic(t *testing.T) {
	for _, in := range publicTargets {
		for _, allowPrivate := range []bool{false, true} {
			got, err := Target(in, allowPrivate)
			if err != nil || got != in {
				t.Errorf("Target(%q, %v) = %q, %v; want it accepted unchanged", in, allowPrivate, got, err)
			}
		}
	}
}

func TestTargetMalformed(t *testing.T) {
	for _, tc := range malformedTargets {
		for _, allowPrivate := range []bool{false, true} {
			got, err := Target(tc.in, allowPrivate)
			if err == nil {
				t.Errorf("Target(%q, %v) = %q, nil; want error containing %q", tc.in, allowPrivate, got, tc.want)
				continue
			}
			if got != "" {
				t.Errorf("Target(%q, %v) returned %q along with an error", tc.in, allowPrivate, got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Target(%q, %v) error = %q; want it to contain %q", tc.in, allowPrivate, err, tc.want)
			}
			if errors.Is(err, ErrURLTooLong) {
				t.Errorf("Target(%q, %v) error %q wraps ErrURLTooLong", tc.in, allowPrivate, err)
			}
		}
	}
}

// The HTTP layer shows these verbatim, so their exact wording is part of
// the API.
func TestTargetMessages(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "url is required"},
		{"ftp://example.com/", "url: the ftp: scheme is not allowed: the browser fetches it from the network, and only http(s) hosts are judged for private addresses"},
		{"javascript:alert(1)", "url: the javascript: scheme is not allowed: it runs script in the visitor's page"},
		{"http://10.0.0.1/", "url: target 10.0.0.1 is a private address; internal targets are not allowed"},
		{"http://0x7f.1/", "url: target 0x7f.1 (127.0.0.1) is a loopback address; internal targets are not allowed"},
		{"http://[::ffff:7f00:1]/", "url: target [::ffff:7f00:1] embeds 127.0.0.1, a loopback address; internal targets are not allowed"},
		{"http://localhost/", "url: target localhost is a loopback host name; internal targets are not allowed"},
		{"http://u:p@example.com/", "url: embedded credentials (user@host) are not allowed; they are a common phishing trick to disguise the real host"},
	}
	for _, tc := range tests {
		_, err := Target(tc.in, false)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Target(%q) error = %v; want %q", tc.in, err, tc.want)
		}
	}
}

func TestTargetTrimsAndKeepsBytes(t *testing.T) {
	tests := []struct{ in, want string }{
		{"  https://example.com/x  ", "https://example.com/x"},
		{"\t\nhttps://example.com/x\r\n", "https://example.com/x"},
		{"\u00a0\u3000https://example.com/x\u2003", "https://example.com/x"},
		{"HTTPS://Example.COM:0443/%7e/./a/../b?Q=%41#F", "HTTPS://Example.COM:0443/%7e/./a/../b?Q=%41#F"},
		{"https://bücher.example/ä", "https://bücher.example/ä"},
	}
	for _, tc := range tests {
		got, err := Target(tc.in, false)
		if err != nil || got != tc.want {
			t.Errorf("Target(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestTargetLength(t *testing.T) {
	prefix := "https://example.com/"
	exact := prefix + strings.Repeat("a", MaxURLBytes-len(prefix))
	if got, err := Target(exact, false); err != nil || got != exact {
		t.Errorf("Target(2048 bytes) = %d bytes, %v; want accepted", len(got), err)
	}
	if got, err := Target("  "+exact+"\n", false); err != nil || got != exact {
		t.Errorf("Target(2048 bytes plus surrounding whitespace) = %d bytes, %v; want accepted", len(got), err)
	}
	// Multi-byte characters count as bytes, not runes.
	multi := prefix + strings.Repeat("a", MaxURLBytes-len(prefix)-1) + "é"
	if _, err := Target(multi, false); !errors.Is(err, ErrURLTooLong) {
		t.Errorf("Target(2049 bytes ending in é) error = %v; want ErrURLTooLong", err)
	}
	for _, in := range []string{
		exact + "a",
		strings.Repeat("a", 1<<20),
		"ftp://" + strings.Repeat("\x00", MaxURLBytes),
		"http://127.0.0.1/" + strings.Repeat("a", MaxURLBytes),
	} {
		_, err := Target(in, false)
		if !errors.Is(err, ErrURLTooLong) {
			t.Errorf("Target(%d bytes) error = %v; want ErrURLTooLong", len(in), err)
		}
	}
}

func TestParseIPv4(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" means invalid
	}{
		{"127.0.0.1", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"0x7f.0.0.01", "127.0.0.1"},
		{"0x", "0.0.0.0"},
		{"0x.0x.0x.0x", "0.0.0.0"},
		{"00", "0.0.0.0"},
		{"1.65535", "1.0.255.255"},
		{"1.2.65535", "1.2.255.255"},
		{"1.16777215", "1.255.255.255"},
		{"4294967295", "255.255.255.255"},
		{"0x00000000000000000000ff", "0.0.0.255"},
		{"1.2.65536", ""},
		{"1.16777216", ""},
		{"4294967296", ""},
		{"256.1", ""},
		{"1.2.3.4.5", ""},
		{"1..2", ""},
		{"08", ""},
		{"0x1g", ""},
		{"abc", ""},
		{"18446744073709551617", ""},
		{"0x10000000000000001", ""},
	}
	for _, tc := range tests {
		addr, ok := parseIPv4(tc.in)
		switch {
		case tc.want == "" && ok:
			t.Errorf("parseIPv4(%q) = %v; want invalid", tc.in, addr)
		case tc.want != "" && (!ok || addr.String() != tc.want):
			t.Errorf("parseIPv4(%q) = %v, %v; want %s", tc.in, addr, ok, tc.want)
		}
	}
}

// TestTargetSchemes: a link may open an app (mail, phone, messages, an
// app's own scheme, as Shlink's and Kutt's links and redirect rules do)
// but never run or show content inside the browser, read the visitor's
// files or reach a network other than by http(s). The stored form is the
// trimmed input.
func TestTargetSchemes(t *testing.T) {
	tests := []struct {
		in string
		// refused is the start of the error, "" for accepted; why says
		// why the rule is what it is.
		refused, why string
	}{
		// Shlink test-api CreateShortUrlTest::lonUrlSupportsDifferentTypesOfSchemas
		{"mailto:foo@example.com", "", "opens the visitor's mail client"},
		{"shlink://some/path", "", "an app's deep link"},
		{"tel:+1-555-0100", "", "opens the dialler"},
		{"sms:+15550100?body=hello", "", "opens messages"},
		{"myapp://open", "", "an app's deep link"},
		{"fb://profile/33138223345", "", "Kutt and Shlink redirect rules point at apps"},
		{"android-app://com.example/https/example.com/x", "", "an Android app link"},
		{"com.example.app:/oauth2redirect", "", "reverse-DNS app schemes have dots"},
		{"MAILTO:Foo@Example.com", "", "schemes are case-insensitive"},
		{"httpx://example.com/", "", "an unknown scheme opens an app, if any, after the browser asks"},
		{"myapp://127.0.0.1/", "", "an app's host is the app's to read, not a network address"},
		{"javascript:alert(1)", "url: the javascript: scheme is not allowed", "runs script in the page"},
		{"vbscript:msgbox(1)", "url: the vbscript: scheme is not allowed", "runs script in the page"},
		{"data:text/html;base64,PHNjcmlwdD4=", "url: the data: scheme is not allowed", "a page of its own: phishing"},
		{"file:///foo/bar", "url: the file: scheme is not allowed", "Shlink accepts it; it reads the visitor's files"},
		{"blob:https://example.com/0d5e", "url: the blob: scheme is not allowed", "another origin's content"},
		{"filesystem:https://example.com/temporary/x", "url: the filesystem: scheme is not allowed", "another origin's content"},
		{"about:blank", "url: the about: scheme is not allowed", "the browser's own pages"},
		{"chrome://settings", "url: the chrome: scheme is not allowed", "the browser's own pages"},
		{"view-source:https://example.com/", "url: the view-source: scheme is not allowed", "wraps another URL"},
		{"jar:https://example.com/a.jar!/x.html", "url: the jar: scheme is not allowed", "renders an archive as a page"},
		{"intent://scan/#Intent;scheme=zxing;S.browser_fallback_url=javascript:x;end", "url: the intent: scheme is not allowed", "any component, an unchecked fallback"},
		{"ms-msdt:/id PCWDiagnostic", "url: whitespace", "whitespace is refused before the scheme"},
		{"ms-msdt:/id%20PCWDiagnostic", "url: the ms-msdt: scheme is not allowed", "Windows handlers that ran code"},
		{"search-ms:query=x&crumb=location:\\\\evil\\share", "url: the search-ms: scheme is not allowed", "remote Windows search"},
		{"wss://example.com/", "url: the wss: scheme is not allowed", "network fetch not judged for private hosts"},
		{"mailto:", "url: nothing follows mailto:", "nothing to open"},
		{"myapp://user@open", "url: embedded credentials", "a host disguise, as for http"},
		{"https:example.com", "url: must start with http:// or https://", "web URLs keep their rules"},
	}
	for _, tc := range tests {
		got, err := Target("  "+tc.in+"\n", false)
		switch {
		case tc.refused == "" && (err != nil || got != tc.in):
			t.Errorf("Target(%q) = %q, %v; want it stored as sent (%s)", tc.in, got, err, tc.why)
		case tc.refused != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.refused)):
			t.Errorf("Target(%q) error = %v; want %q... (%s)", tc.in, err, tc.refused, tc.why)
		}
	}
}

// TestWebTarget: a webhook's URL is one the cluster sends requests to: an
// http(s) URL whose host is judged, never another scheme.
func TestWebTarget(t *testing.T) {
	for _, in := range []string{"mailto:a@example.com", "myapp://hook", "javascript:x"} {
		if _, err := WebTarget(in, true); err == nil || !strings.HasPrefix(err.Error(), "url: scheme must be http or https") {
			t.Errorf("WebTarget(%q) error = %v; want scheme must be http or https", in, err)
		}
	}
	if _, err := WebTarget("http://10.0.0.1/", false); err == nil || !strings.Contains(err.Error(), internalMsg) {
		t.Errorf("WebTarget of a private address: %v", err)
	}
	if got, err := WebTarget(" https://example.com/hook ", false); err != nil || got != "https://example.com/hook" {
		t.Errorf("WebTarget of an https URL = %q, %v", got, err)
	}
}

package codes

import (
	"errors"
	"testing"
)

var canonicalTests = []struct {
	name, in, want string
}{
	// Other schemes: without a host, the URL itself, its scheme in lower
	// case; with one, the same steps as http's.
	{"mailto", "MAILTO:Foo@Example.com?subject=Hi&body=x", "mailto:Foo@Example.com?subject=Hi&body=x"},
	{"tel", "tel:+1-555-0100", "tel:+1-555-0100"},
	{"app path without host", "MyApp:///open?b=1&a=2#x", "myapp:///open?b=1&a=2#x"},
	{"app with host", "MyApp://Open//x/?b=1&a=2", "myapp://open/x?a=2&b=1"},

	// The design document's canonical-form table.
	{"lowercase scheme and host", "HTTP://Example.com/path", "http://example.com/path"},
	{"default https port", "https://example.com:443/", "https://example.com/"},
	{"repeated slashes", "http://example.com//a///b", "http://example.com/a/b"},
	{"sorted query", "http://example.com/path?z=1&a=2", "http://example.com/path?a=2&z=1"},
	{"fragment", "http://example.com/path#section", "http://example.com/path"},
	{"trailing slash", "http://example.com/path/", "http://example.com/path"},
	{"combined", "HTTP://Example.com:80/api/users?id=123&name=john", "http://example.com/api/users?id=123&name=john"},

	// Design document group: one page, five spellings.
	{"page upper", "HTTP://EXAMPLE.COM/page", "http://example.com/page"},
	{"page plain", "http://example.com/page", "http://example.com/page"},
	{"page port", "http://example.com:80/page", "http://example.com/page"},
	{"page slash", "http://example.com/page/", "http://example.com/page"},
	{"page double slash", "http://example.com//page", "http://example.com/page"},

	// Design document group: query orders.
	{"search 1", "http://example.com/search?q=test&sort=date&page=1", "http://example.com/search?page=1&q=test&sort=date"},
	{"search 2", "http://example.com/search?page=1&q=test&sort=date", "http://example.com/search?page=1&q=test&sort=date"},
	{"search 3", "http://example.com/search?sort=date&page=1&q=test", "http://example.com/search?page=1&q=test&sort=date"},

	// Design document group: fragments.
	{"fragment 1", "https://example.com/page#section1", "https://example.com/page"},
	{"fragment 2", "https://example.com/page#section2", "https://example.com/page"},
	{"fragment none", "https://example.com/page", "https://example.com/page"},

	// Design document extras.
	{"unreserved escapes", "http://example.com/%7Euser/%41b", "http://example.com/~user/Ab"},
	{"reserved escape kept", "http://example.com/a%2Fb", "http://example.com/a%2Fb"},
	{"empty path", "http://example.com", "http://example.com/"},
	{"empty query", "http://example.com/?", "http://example.com/"},
	{"stable sort of repeated keys", "http://example.com/p?b=2&a=1&b=1", "http://example.com/p?a=1&b=2&b=1"},

	// Edges of the rules above.
	{"surrounding whitespace", " \t http://example.com/x \n", "http://example.com/x"},
	{"non-default port kept", "http://example.com:8080/", "http://example.com:8080/"},
	{"443 on http kept", "http://example.com:443/", "http://example.com:443/"},
	{"80 on https kept", "https://example.com:80/", "https://example.com:80/"},
	{"ipv6 default port", "http://[::1]:80/x", "http://[::1]/x"},
	{"ipv6 upper hex", "http://[FE80::1]/", "http://[fe80::1]/"},
	{"userinfo kept", "http://User:Pass@Example.com/", "http://User:Pass@example.com/"},
	{"empty parameters dropped", "http://example.com/?a=1&&b=2&", "http://example.com/?a=1&b=2"},
	{"only ampersands", "http://example.com/x?&&", "http://example.com/x"},
	{"key is text before first equals", "http://example.com/?b=1=2&a&a=0", "http://example.com/?a&a=0&b=1=2"},
	{"lowercase escape kept as written", "http://example.com/a%2fb?x=%2f", "http://example.com/a%2fb?x=%2f"},
	{"escape in query decoded", "http://example.com/?q=%41%2D%2e%5F%7e", "http://example.com/?q=A-._~"},
	{"escaped ampersand not split", "http://example.com/?b=1%26a=2&a=3", "http://example.com/?a=3&b=1%26a=2"},
	{"escaped key sorted after decoding", "http://example.com/?b=1&%61=2", "http://example.com/?a=2&b=1"},
	{"malformed query escape kept", "http://example.com/?q=%zz&a=%4", "http://example.com/?a=%4&q=%zz"},
	{"escaped percent not decoded twice", "http://example.com/%2541", "http://example.com/%2541"},
	{"escaped slash not collapsed", "http://example.com/a/%2F/b", "http://example.com/a/%2F/b"},
	{"dot segments kept", "http://example.com/a/./b/../c", "http://example.com/a/./b/../c"},
	{"slashes in query untouched", "http://example.com/p?u=http://x//y/", "http://example.com/p?u=http://x//y/"},
	{"root with query", "http://example.com/?a=1", "http://example.com/?a=1"},
	{"trailing slashes collapse then drop", "http://example.com/a///?x", "http://example.com/a?x"},
	{"other scheme", "FTP://Files.Example.com/pub/", "ftp://files.example.com/pub"},
	{"space in query escaped", "A://0?0 #", "a://0/?0%20"},
	{"space sorted last in query", "http://example.com/?b=1 &a=2", "http://example.com/?a=2&b=1%20"},
	{"space in path escaped by net/url", "http://example.com/a b", "http://example.com/a%20b"},
	{"non-ASCII whitespace not trimmed", "http://example.com/a\u00a0", "http://example.com/a%C2%A0"},
	{"stray percent completes escape", "A://0?%2%450", "a://0/?.0"},
	{"stray percent with two decodes", "http://example.com/?%%34%31", "http://example.com/?A"},
	{"stray percent before kept escape", "http://example.com/?%2%2F", "http://example.com/?%2%2F"},
	{"ipv6 zone", "http://[FE80::1%25EN0]:80/", "http://[fe80::1%25en0]/"},
	{"empty port kept", "http://example.com:/p", "http://example.com:/p"},
}

func TestCanonicalize(t *testing.T) {
	for _, tt := range canonicalTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize(tt.in)
			if err != nil {
				t.Fatalf("Canonicalize(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("Canonicalize(%q) = %q, want %q", tt.in, got, tt.want)
			}
			again, err := Canonicalize(got)
			if err != nil {
				t.Fatalf("Canonicalize(%q) (second pass): %v", got, err)
			}
			if again != got {
				t.Errorf("not idempotent: %q -> %q -> %q", tt.in, got, again)
			}
		})
	}
}

func TestCanonicalizeErrors(t *testing.T) {
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"whitespace", "   "},
		{"no scheme", "example.com/path"},
		{"scheme-relative", "//example.com/path"},
		{"no host", "http:///path"},
		{"opaque http", "http:example.com"},
		{"no host after an app scheme's slashes", "myapp://:80/"},
		{"path only after scheme", "http:/example.com"},
		{"port without host", "http://:80/"},
		{"bad escape in path", "http://example.com/%zz"},
		{"bad port", "http://example.com:port/"},
		{"control character", "http://example.com/\x00"},
		{"bad scheme", "1http://example.com/"},
		{"space in host", "http://exa mple.com/"},
		{"unprintable ipv6 zone", "A://[::%25\x8c]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize(tt.in)
			if err == nil {
				t.Fatalf("Canonicalize(%q) = %q, want error", tt.in, got)
			}
			if !errors.Is(err, ErrInvalidURL) {
				t.Errorf("Canonicalize(%q) error %v does not wrap ErrInvalidURL", tt.in, err)
			}
			if got != "" {
				t.Errorf("Canonicalize(%q) returned %q alongside an error", tt.in, got)
			}
		})
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, tt := range canonicalTests {
		f.Add(tt.in)
	}
	f.Add("http://[fe80::1%25EN0]:80/")
	f.Add("http://%C3%89xample.com/")
	f.Add("http://h/a b?c d")
	f.Add("http://@h/")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Canonicalize(in)
		if err != nil {
			return
		}
		again, err := Canonicalize(got)
		if err != nil {
			t.Fatalf("Canonicalize(%q) = %q, which is rejected: %v", in, got, err)
		}
		if again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, got, again)
		}
	})
}

package input

import (
	"strings"
	"testing"
)

func TestTag(t *testing.T) {
	cases := []struct {
		tag string
		ok  bool
	}{
		{"launch", true}, {"Q3_2030.v-2", true},
		{"aäa", true},      // Shlink test-api CreateShortUrlTest::createsNewShortUrlWithTags (tags with special chars)
		{"a\u0308a", true}, // the same, with a combining mark
		{"日本語", true},      // letters of any script
		{"٣", true},        // digits of any script
		{"", false}, {"fo o", false}, {"a/b", false}, {"a,b", false}, {"a?b", false}, {"#x", false},
		{"a\u00a0b", false}, // a no-break space
		{"a\u200bb", false}, // a zero-width space
		{"🔥", false},        // a symbol
		{"a\x00b", false}, {"\xffab", false},
		{strings.Repeat("a", 40), true}, {strings.Repeat("a", 41), false},
		{strings.Repeat("ä", 20), true}, {strings.Repeat("ä", 21), false}, // 40 bytes, the state's bound
	}
	for _, c := range cases {
		if err := Tag(c.tag); (err == nil) != c.ok {
			t.Errorf("Tag(%q) = %v, want ok %v", c.tag, err, c.ok)
		}
	}
}

func TestDomain(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"S.Example.com", "s.example.com", true},
		{"go.example", "go.example", true},
		{"127.0.0.1", "127.0.0.1", true},
		{"web.2", "", false}, // a last label of digits is an IPv4 address to a browser
		// Shlink test-api DomainRedirectsTest::anErrorIsReturnedWhenTryingToEditAnInvalidDomain
		{"540.38.386.0", "", false},
		{"not a domain", "", false},
		{"example.com:888888", "", false},
		{"", "", false}, {"-a.example", "", false}, {"a..example", "", false},
	}
	for _, c := range cases {
		got, err := Domain(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("Domain(%q) = %q, %v; want %q, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

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

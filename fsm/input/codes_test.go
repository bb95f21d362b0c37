package input

import (
	"strings"
	"testing"
)

func TestCustomCode(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" means valid; otherwise a substring of the error
	}{
		{"abc", ""},
		{"ABC", ""},
		{"a-b", ""},
		{"a_b", ""},
		{"---", ""},
		{"___", ""},
		{"123", ""},
		{"My-Link_2024", ""},
		{strings.Repeat("x", 64), ""},
		{"", "must be 3 to 64 characters long, got 0"},
		{"a", "must be 3 to 64 characters long, got 1"},
		{"ab", "must be 3 to 64 characters long, got 2"},
		{strings.Repeat("x", 65), "must be 3 to 64 characters long, got 65"},
		{strings.Repeat("x", 10000), "got 10000"},
		{"a/b", `character '/' is not allowed`},
		{"a.b", `character '.' is not allowed`},
		{"...", `character '.' is not allowed`},
		{"a b", `character ' ' is not allowed`},
		{" abc", `character ' ' is not allowed`},
		{"abc\n", `character '\n' is not allowed`},
		{"abc\x00", `character '\x00' is not allowed`},
		{"a%20b", `character '%' is not allowed`},
		{"a?b", `character '?' is not allowed`},
		{"a#b", `character '#' is not allowed`},
		{"a+b", `character '+' is not allowed`},
		{"a~b", `character '~' is not allowed`},
		// Letters of any script, marks, digits and emoji (Shlink test-api
		// CreateShortUrlTest::canCreateShortUrlsWithEmojis).
		{"café", ""},
		{"日本語", ""},
		{"\U0001F9A3\U0001F9A3\U0001F9A3", ""},             // 🦣🦣🦣
		{"a\U0001F44D\U0001F3FD", ""},                      // 👍🏽, a skin tone
		{"\U0001F468\u200d\U0001F469\u200d\U0001F467", ""}, // 👨‍👩‍👧, joined
		{"ok\u2764\ufe0f", ""},                             // ❤️, a variation selector
		{strings.Repeat("é", 64), ""},
		{strings.Repeat("é", 65), "must be 3 to 64 characters long, got 65"},
		{"éé", "must be 3 to 64 characters long, got 2"},
		{strings.Repeat("\U0001F9A3", 49), "at most 192 bytes"},
		{"cafe\u0301", "composed form (NFC)"}, // e and a combining accent
		{"\uff41bc", ""},                      // a fullwidth letter is a letter
		{"ab\u200b", `character '\u200b' is not allowed`},
		{"ab\u202e", `character '\u202e' is not allowed`}, // right-to-left override
		{"ab\u00a0", `character '\u00a0' is not allowed`}, // no-break space
		{"a¿b", `character '¿' is not allowed`},
		{"a€b", `character '€' is not allowed`},
		{"ab\xff", "not valid UTF-8"},
		{"\xc3", "not valid UTF-8"},
		{strings.Repeat("x", 100) + "/", `character '/' is not allowed`},
	}
	for _, tc := range tests {
		err := CustomCode(tc.in)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CustomCode(%q) = %v; want nil", tc.in, err)
		case tc.want != "" && err == nil:
			t.Errorf("CustomCode(%q) = nil; want error containing %q", tc.in, tc.want)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("CustomCode(%q) = %q; want it to contain %q", tc.in, err, tc.want)
		case err != nil && !strings.HasPrefix(err.Error(), "custom_code: "):
			t.Errorf("CustomCode(%q) = %q; want it to start with %q", tc.in, err, "custom_code: ")
		}
	}
}

func TestWorkspace(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"a", ""},
		{"Z", ""},
		{"0", ""},
		{"-", ""},
		{"_", ""},
		{"ab", ""},
		{"team-42_prod", ""},
		{strings.Repeat("w", 64), ""},
		{"", "workspace is required"},
		{strings.Repeat("w", 65), "workspace: must be 1 to 64 characters long, got 65"},
		{"a/b", `workspace: character '/' is not allowed`},
		{"a.b", `workspace: character '.' is not allowed`},
		{".", `workspace: character '.' is not allowed`},
		{"..", `workspace: character '.' is not allowed`},
		{"a b", `workspace: character ' ' is not allowed`},
		{"a\tb", `workspace: character '\t' is not allowed`},
		{"ünï", `workspace: character 'ü' is not allowed`},
		{"日本", `workspace: character '日' is not allowed`},
		{"\xff", "workspace: not valid UTF-8"},
	}
	for _, tc := range tests {
		err := Workspace(tc.in)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Workspace(%q) = %v; want nil", tc.in, err)
		case tc.want != "" && err == nil:
			t.Errorf("Workspace(%q) = nil; want error containing %q", tc.in, tc.want)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("Workspace(%q) = %q; want it to contain %q", tc.in, err, tc.want)
		}
	}
}

// FuzzToken checks the hand-written scanner against the regular
// expressions it replaces.
func FuzzToken(f *testing.F) {
	for _, s := range []string{"", "a", "ab", "abc", "a/b", "é", "\xff", strings.Repeat("x", 64), strings.Repeat("x", 65)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := CustomCode(s) == nil, codeRE.MatchString(s); isASCII(s) && got != want {
			t.Errorf("CustomCode(%q) valid = %v; regexp says %v", s, got, want)
		}
		if got, want := Workspace(s) == nil, workspaceRE.MatchString(s); got != want {
			t.Errorf("Workspace(%q) valid = %v; regexp says %v", s, got, want)
		}
	})
}

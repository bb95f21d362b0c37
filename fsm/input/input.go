// Package input owns the input rules of linkraft's public API: whether a
// submitted target URL may be shortened (syntax, scheme, credentials and the
// SSRF rules that keep links from pointing into the network), and the syntax
// of custom codes and workspace names.
//
// The same rules hold wherever input enters: httpd applies them to every
// write, a cluster leader to the creates other nodes relay to it (a peer is
// trusted to relay, not to decide what is stored), and migrate to the links
// it imports. The package sits beside fsm/codes, below all three, so none
// of them imports a package above it to reach the rules.
//
// Everything here runs on the write path, so the checks are purely
// syntactic: no DNS lookups, no network, no shared mutable state, and no
// input makes them panic. A public host name that resolves to a
// private address therefore passes; anything that later fetches a target
// server-side must still check the address it actually connects to.
//
// Error messages are shown to API users verbatim, so they name the field and
// say what is wrong in plain words.
package input

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxURLBytes is the longest target URL accepted, counted in bytes after
// surrounding whitespace is trimmed. 2048 is what old browsers and many
// proxies still handle, and it bounds what every replica must store.
const MaxURLBytes = 2048

// ErrURLTooLong is returned, possibly wrapped, when a target URL exceeds
// MaxURLBytes. It is a separate value because the HTTP layer answers it with
// 413 rather than 400.
var ErrURLTooLong = errors.New("url: too long; the limit is 2048 bytes")

// CustomCode checks the syntax of a user-chosen short code: 3 to 64
// characters, each an ASCII letter, digit, '-' or '_', or beyond ASCII a
// letter or digit of any script, a combining mark, or an emoji (a symbol,
// joined by U+200D, with its variation selectors and skin tones), as
// Shlink and Kutt take them; at most MaxCodeBytes bytes. Codes are
// compared byte for byte, so a code must come in Unicode's composed form
// (NFC): "é" as one character, not "e" and a combining accent, which would
// be another code that looks the same. Spaces, punctuation, and the
// invisible and direction-changing characters are refused. Reserved words
// are checked elsewhere.
func CustomCode(code string) error {
	if isASCII(code) {
		return token("custom_code", code, 3, 64)
	}
	if !utf8.ValidString(code) {
		return errors.New("custom_code: not valid UTF-8")
	}
	n := 0
	for _, r := range code {
		n++
		if !codeRune(r) {
			return fmt.Errorf("custom_code: character %q is not allowed; use letters and digits of any script, emoji, '-' and '_'", r)
		}
	}
	switch {
	case n < 3 || n > 64:
		return fmt.Errorf("custom_code: must be 3 to 64 characters long, got %d", n)
	case len(code) > MaxCodeBytes:
		return fmt.Errorf("custom_code: must be at most %d bytes long in UTF-8, got %d", MaxCodeBytes, len(code))
	case !norm.NFC.IsNormalString(code):
		return errors.New("custom_code: not in Unicode's composed form (NFC): send each accented letter as one character")
	}
	return nil
}

// MaxCodeBytes is the longest custom code in bytes: what a redirect's
// path takes (and under the 255 the state machine takes).
const MaxCodeBytes = 192

// codeRune reports whether r may stand in a custom code.
func codeRune(r rune) bool {
	switch {
	case r < utf8.RuneSelf:
		return isTokenByte(byte(r))
	case r == 0x200D: // the zero-width joiner of emoji sequences
		return true
	case 0x1F3FB <= r && r <= 0x1F3FF: // emoji skin tones
		return true
	}
	return unicode.In(r, unicode.L, unicode.M, unicode.Nd, unicode.So)
}

// Workspace checks the syntax of a workspace name: 1 to 64 ASCII letters,
// digits, '-' or '_', for the same reasons as CustomCode.
func Workspace(ws string) error {
	if ws == "" {
		return errors.New("workspace is required")
	}
	return token("workspace", ws, 1, 64)
}

// token checks s against ^[A-Za-z0-9_-]{min,max}$. Characters are checked
// before length because "'/' is not allowed" helps more than "too long".
func token(field, s string, minLen, maxLen int) error {
	for i := 0; i < len(s); {
		c := s[i]
		if isTokenByte(c) {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return fmt.Errorf("%s: not valid UTF-8", field)
		}
		return fmt.Errorf("%s: character %q is not allowed; use only letters A-Z and a-z, digits, '-' and '_'", field, r)
	}
	if len(s) < minLen || len(s) > maxLen {
		return fmt.Errorf("%s: must be %d to %d characters long, got %d", field, minLen, maxLen, len(s))
	}
	return nil
}

func isTokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

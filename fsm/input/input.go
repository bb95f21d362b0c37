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
	"unicode/utf8"
)

// MaxURLBytes is the longest target URL accepted, counted in bytes after
// surrounding whitespace is trimmed. 2048 is what old browsers and many
// proxies still handle, and it bounds what every replica must store.
const MaxURLBytes = 2048

// ErrURLTooLong is returned, possibly wrapped, when a target URL exceeds
// MaxURLBytes. It is a separate value because the HTTP layer answers it with
// 413 rather than 400.
var ErrURLTooLong = errors.New("url: too long; the limit is 2048 bytes")

// CustomCode checks the syntax of a user-chosen short code: 3 to 64 ASCII
// letters, digits, '-' or '_'. Codes become URL path segments and are
// compared byte for byte, so anything that would need escaping or Unicode
// normalisation is refused. Reserved words are checked elsewhere.
func CustomCode(code string) error {
	return token("custom_code", code, 3, 64)
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

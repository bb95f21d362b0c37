package codes

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// asciiSpace is the whitespace Canonicalize trims. Unicode's White_Space set
// has changed between versions; a fixed ASCII set keeps old canonical forms
// stable across Go upgrades.
const asciiSpace = " \t\n\v\f\r"

// ErrInvalidURL reports input that Canonicalize cannot turn into an absolute
// URL with a scheme and a host.
var ErrInvalidURL = errors.New("codes: invalid URL")

// Canonicalize returns the form of raw used for dedupe and for hash codes, so
// that trivially different spellings of one link share one code. It applies
// exactly these steps and nothing else, because every extra rule would
// silently merge links that some server treats as different:
//
//  1. trim surrounding ASCII whitespace and parse with net/url;
//  2. require a scheme and, for http and https, a non-empty host name; a
//     URL of another scheme without a host (mailto:, tel:, myapp:///x)
//     is its own canonical form with its scheme in lower case, since what
//     follows means what that scheme's handler makes of it;
//  3. lowercase the scheme and the host (ASCII letters only);
//  4. drop the port when it is the scheme default (:80 for http, :443 for
//     https);
//  5. take the escaped path; make an empty path "/"; collapse runs of '/'
//     into one;
//  6. in the path and the raw query, decode %XX escapes of RFC 3986
//     unreserved characters (ALPHA / DIGIT / "-" / "." / "_" / "~"), leaving
//     every other byte, including other escapes and their hex case, as
//     written (repeated until stable, see decodeUnreserved);
//  7. drop a trailing '/' unless the path is just "/";
//  8. percent-encode each space in the query as %20 (net/url keeps spaces
//     raw there, and one that sorts last would be trimmed by step 1 on the
//     next pass, breaking idempotency);
//  9. split the query on '&', drop empty parameters, stable-sort by key
//     (the bytes before the first '='), rejoin with '&', and omit '?' when
//     nothing is left.
//
// The fragment is dropped and userinfo is kept as parsed.
//
// Canonicalize is idempotent: its output, fed back in, comes out unchanged.
// Input whose canonical form net/url would not parse is rejected.
func Canonicalize(raw string) (string, error) {
	u, err := url.Parse(strings.Trim(raw, asciiSpace))
	if err != nil {
		return "", fmt.Errorf("canonicalize %q: %w: %w", raw, ErrInvalidURL, err)
	}
	if u.Scheme == "" {
		return "", fmt.Errorf("canonicalize %q: %w: missing scheme", raw, ErrInvalidURL)
	}
	scheme := asciiLower(u.Scheme)
	if u.Host == "" && scheme != "http" && scheme != "https" {
		return hostless(raw, u.Scheme, scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", fmt.Errorf("canonicalize %q: %w: missing host", raw, ErrInvalidURL)
	}

	host := asciiLower(u.Host)
	switch {
	case scheme == "http" && u.Port() == "80":
		host = strings.TrimSuffix(host, ":80")
	case scheme == "https" && u.Port() == "443":
		host = strings.TrimSuffix(host, ":443")
	}

	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	path = decodeUnreserved(collapseSlashes(path))
	if len(path) > 1 {
		path = strings.TrimSuffix(path, "/")
	}

	query := sortQuery(strings.ReplaceAll(decodeUnreserved(u.RawQuery), " ", "%20"))

	// Rebuilding scheme, userinfo and host through url.URL reuses net/url's
	// escaping, so the result parses back to the same fields; path and query
	// are appended verbatim because their escapes must survive untouched.
	base := url.URL{Scheme: scheme, User: u.User, Host: host}
	var b strings.Builder
	b.WriteString(base.String())
	b.WriteString(path)
	if query != "" {
		b.WriteByte('?')
		b.WriteString(query)
	}
	out := b.String()
	// net/url accepts some hosts it cannot print back in a parseable form
	// (a raw non-ASCII byte in an IPv6 zone is printed as an escape that
	// the parser then refuses). Such input has no canonical form.
	if _, err := url.Parse(out); err != nil {
		return "", fmt.Errorf("canonicalize %q: %w: result %q does not parse: %w", raw, ErrInvalidURL, out, err)
	}
	return out, nil
}

// hostless is the canonical form of raw, a URL of a scheme other than
// http(s) without a host, whose scheme is written as written: the trimmed
// URL with the scheme lowercased. These URLs had no canonical form before,
// so no earlier output changes.
func hostless(raw, written, scheme string) (string, error) {
	out := scheme + strings.Trim(raw, asciiSpace)[len(written):]
	if _, err := url.Parse(out); err != nil {
		return "", fmt.Errorf("canonicalize %q: %w: %w", raw, ErrInvalidURL, err)
	}
	return out, nil
}

func collapseSlashes(p string) string {
	if !strings.Contains(p, "//") {
		return p
	}
	b := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		if p[i] == '/' && len(b) > 0 && b[len(b)-1] == '/' {
			continue
		}
		b = append(b, p[i])
	}
	return string(b)
}

// decodeUnreserved decodes only escapes whose decoded byte is unreserved:
// RFC 3986 §6.2.2.2 says those are equivalent to the literal character,
// whereas decoding anything else (such as %2F or %26) can change meaning.
//
// net/url accepts a '%' not followed by two hex digits in the query, and such
// a stray '%' can combine with a decoded character into a new escape
// ("%2%45" becomes "%2E"). Decoding therefore repeats until nothing changes,
// which is what makes Canonicalize idempotent. Well-formed input never
// needs a second pass: a decoded byte is never '%', so every remaining '%'
// still starts one of the original, non-unreserved escapes.
func decodeUnreserved(s string) string {
	for {
		d, changed := decodeUnreservedOnce(s)
		if !changed {
			return s
		}
		s = d
	}
}

func decodeUnreservedOnce(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, false
	}
	changed := false
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			c := unhex(s[i+1])<<4 | unhex(s[i+2])
			if isUnreserved(c) {
				b = append(b, c)
				i += 2
				changed = true
				continue
			}
		}
		b = append(b, s[i])
	}
	return string(b), changed
}

// sortQuery sorts by key only, stably, because the order of repeated keys
// ("b=2&b=1") is significant to most servers while the order of distinct
// keys is not.
func sortQuery(q string) string {
	if q == "" {
		return ""
	}
	params := strings.Split(q, "&")
	params = slices.DeleteFunc(params, func(p string) bool { return p == "" })
	slices.SortStableFunc(params, func(a, b string) int {
		return strings.Compare(queryKey(a), queryKey(b))
	})
	return strings.Join(params, "&")
}

func queryKey(p string) string {
	k, _, _ := strings.Cut(p, "=")
	return k
}

func isUnreserved(c byte) bool {
	switch {
	case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	}
	return c == '-' || c == '.' || c == '_' || c == '~'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

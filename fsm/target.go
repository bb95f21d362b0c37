package fsm

import (
	"fmt"
	"strings"
)

// checkTarget is the state machine's own rule for a link's target (and
// its rules' targets and a domain's redirects) in a state raised to
// level raised: an absolute http or https URL, or from LevelTargets on a
// URL of another scheme SchemeRefusal does not refuse (mailto:, tel:, an
// app's own scheme), without control characters. Every node validates a
// client's target in full before proposing it (fsm/input); this is the
// floor that holds whatever a proposer sent, because a stored target is
// what every replica hands to browsers in a Location header: a
// javascript: URL runs in the visitor's page, and CR or LF would split
// the header. Builds before LevelTargets refuse every other scheme, so
// one is accepted only once every server applies this rule. It is pure
// and looks only at the request and the level, so replicas agree, and it
// runs before anything is allocated, so a refusal leaves the counter and
// every later code as they were.
func checkTarget(url string, raised int) error {
	if err := checkControl(url); err != nil {
		return err
	}
	if isWebURL(url) {
		return nil
	}
	scheme, rest, ok := SplitScheme(url)
	if !ok || rest == "" {
		return fmt.Errorf("%w: the target must be an absolute URL with a scheme", ErrInvalidRequest)
	}
	if why := SchemeRefusal(scheme); why != "" {
		return fmt.Errorf("%w: the target's scheme %s: is refused: %s", ErrInvalidRequest, strings.ToLower(scheme), why)
	}
	if raised < LevelTargets {
		return fmt.Errorf("%w: a %s: target needs every server at entry level %d (an older build refuses it)",
			ErrNotRaised, strings.ToLower(scheme), LevelTargets)
	}
	return nil
}

// checkWebURL is the floor for a URL this cluster itself sends requests
// to (a webhook's): http or https, without control characters, at every
// level.
func checkWebURL(url string) error {
	if !isWebURL(url) {
		return fmt.Errorf("%w: the URL must be an http or https URL", ErrInvalidRequest)
	}
	return checkControl(url)
}

// isWebURL reports whether url starts with http:// or https://, in any
// case.
func isWebURL(url string) bool {
	return hasPrefixFold(url, "https://") || hasPrefixFold(url, "http://")
}

// checkControl refuses control characters: CR or LF would split the
// Location header a target is sent in.
func checkControl(url string) error {
	for i := 0; i < len(url); i++ {
		if c := url[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: the target holds a control character (byte %#x at %d)", ErrInvalidRequest, c, i)
		}
	}
	return nil
}

// SchemeRefusal says why no link may point at a URL of scheme (any case),
// or "" when one may. http and https are refused here because a web URL
// is written http:// or https:// followed by a host, which the callers
// check first ("http:host" is refused). The list is part of Apply's floor
// from LevelTargets on, so it only ever grows with a new level; the input
// rules (fsm/input) read it too, so both refuse the same schemes.
//
// The schemes refused run or show content inside the browser, with the
// short link's trust (script, inline documents, another page's objects,
// the browser's own pages), reach the visitor's files, make the browser
// fetch from a network other than by http(s) (where the rule on private
// addresses, which judges http(s) hosts, would not look), or hand an
// operating system handler known to run code what the link says.
func SchemeRefusal(scheme string) string {
	s := strings.ToLower(scheme)
	switch s {
	case "http", "https":
		return "an http or https URL is written http:// or https:// followed by a host"
	case "javascript", "vbscript", "livescript", "ecmascript":
		return "it runs script in the visitor's page"
	case "data":
		return "it carries its own page, a common phishing disguise"
	case "file":
		return "it points at the visitor's own files"
	case "blob", "filesystem":
		return "it names content another page made, under that page's origin"
	case "about", "chrome", "chrome-extension", "chrome-search", "chrome-untrusted", "devtools",
		"edge", "brave", "opera", "vivaldi", "moz-extension", "resource", "view-source", "jar",
		"wyciwyg", "safari-extension", "safari-web-extension":
		return "it opens the browser's own pages or an extension's"
	case "mhtml", "mk", "its", "ms-its":
		return "it opens an archive the browser renders as a page"
	case "intent":
		return "an Android intent can start any app's component and carries its own fallback URL"
	case "ftp", "ftps", "ws", "wss", "gopher":
		return "the browser fetches it from the network, and only http(s) hosts are judged for private addresses"
	case "search", "search-ms":
		return "it opens a Windows search of a remote folder"
	}
	if strings.HasPrefix(s, "ms-") {
		return "Windows hands ms- schemes to system handlers, several of which ran code (ms-msdt, ms-officecmd)"
	}
	return ""
}

// SplitScheme splits an RFC 3986 scheme (ALPHA *( ALPHA / DIGIT / "+" /
// "-" / "." )) from the rest of s; the input rules share it.
func SplitScheme(s string) (scheme, rest string, ok bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.':
			if i == 0 {
				return "", "", false
			}
		case c == ':':
			if i == 0 {
				return "", "", false
			}
			return s[:i], s[i+1:], true
		default:
			return "", "", false
		}
	}
	return "", "", false
}

// hasPrefixFold reports whether s starts with the lower-case ASCII prefix,
// in any case.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

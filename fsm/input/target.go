package input

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/linkraft/linkraft/fsm"
)

// Target validates a link's target (and a rule's, and a domain's
// redirect) and returns the form to store: the input trimmed of
// surrounding whitespace, otherwise byte for byte as submitted. Nothing is
// normalised because the stored URL is what redirects hand back, and a
// rewrite could change what the link points at.
//
// A target is an http or https URL (WebTarget's rules), or a URL of
// another scheme that opens an app rather than a page: mailto:, tel:,
// sms:, myapp://open. Schemes that run or show content inside the browser
// (javascript:, data:, file:, blob:, about: ...) are refused, as
// fsm.SchemeRefusal lists them. The cluster stores such a target only
// once it is raised to fsm.LevelTargets (the state machine answers
// fsm.ErrNotRaised before).
func Target(raw string, allowPrivate bool) (string, error) {
	s, err := trimmed(raw)
	if err != nil {
		return "", err
	}
	if scheme, rest, ok := fsm.SplitScheme(s); ok && !isWebScheme(scheme) {
		if err := checkOtherScheme(s, scheme, rest); err != nil {
			return "", err
		}
		return s, nil
	}
	if err := checkWeb(s, allowPrivate); err != nil {
		return "", err
	}
	return s, nil
}

// WebTarget validates a URL this cluster sends requests to (a webhook's)
// and returns the form to store, trimmed as Target's: an absolute http or
// https URL with a host.
//
// Unless allowPrivate is set, URLs that point inside the network
// (loopback, private, link-local and other special-purpose addresses, in
// every spelling browsers accept, and local-only host names) are refused.
// The other rules apply either way.
func WebTarget(raw string, allowPrivate bool) (string, error) {
	s, err := trimmed(raw)
	if err != nil {
		return "", err
	}
	if err := checkWeb(s, allowPrivate); err != nil {
		return "", err
	}
	return s, nil
}

// trimmed is raw without surrounding whitespace, if it is a length and of
// characters any URL may have.
func trimmed(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", errors.New("url is required")
	}
	if len(s) > MaxURLBytes {
		return "", fmt.Errorf("%w (got %d bytes)", ErrURLTooLong, len(s))
	}
	if err := checkCharacters(s); err != nil {
		return "", err
	}
	return s, nil
}

// checkWeb holds s to the rules of an http or https URL: the host a
// browser would visit, judged for private addresses unless allowPrivate.
func checkWeb(s string, allowPrivate bool) error {
	if err := checkAuthority(s); err != nil {
		return err
	}
	u, err := parseURL(s)
	if err != nil {
		return err
	}
	// The hand-split above already guarantees these; checking again costs
	// nothing and keeps a future net/url change from slipping through.
	if u.Scheme != "http" && u.Scheme != "https" || u.Opaque != "" || u.User != nil || u.Host == "" {
		return errors.New("url: must be an absolute http or https URL with a host")
	}
	if err := checkPort(u); err != nil {
		return err
	}
	return checkHost(u, allowPrivate)
}

// checkOtherScheme holds s, a URL of a scheme other than http(s), to the
// rules of an app's link. Its host, if any, is the app's to read, not a
// network address: the rule on private addresses does not apply.
func checkOtherScheme(s, scheme, rest string) error {
	lower := strings.ToLower(scheme)
	if why := fsm.SchemeRefusal(scheme); why != "" {
		return fmt.Errorf("url: the %s: scheme is not allowed: %s", lower, why)
	}
	if rest == "" {
		return fmt.Errorf("url: nothing follows %s:", lower)
	}
	// "localhost:8080/" and "example.com:8080" parse as a scheme and a
	// path, but mean a host and port without http://.
	if (lower == "localhost" || strings.Contains(lower, ".")) && portLike(rest) {
		return fmt.Errorf("url: %s:%s looks like a host and port; start it with http:// or https://", scheme, rest[:strings.IndexAny(rest+"/", "/?#")])
	}
	if _, err := parseURL(s); err != nil {
		return err
	}
	if authority, ok := strings.CutPrefix(rest, "//"); ok {
		if i := strings.IndexAny(authority, "/?#"); i >= 0 {
			authority = authority[:i]
		}
		if strings.Contains(authority, "@") {
			return errors.New("url: embedded credentials (user@host) are not allowed; they are a common phishing trick to disguise the real host")
		}
		if strings.Contains(authority, `\`) {
			return errors.New(`url: a backslash is not allowed in the host part`)
		}
	}
	return nil
}

// parseURL is url.Parse's URL of s, or its reason without the URL
// repeated.
func parseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("url: not a valid URL: %v", err)
	}
	return u, nil
}

// portLike reports whether rest starts with a port number that ends it or
// a path, query or fragment.
func portLike(rest string) bool {
	i := 0
	for i < len(rest) && '0' <= rest[i] && rest[i] <= '9' {
		i++
	}
	return i > 0 && (i == len(rest) || strings.IndexByte("/?#", rest[i]) >= 0)
}

// isWebScheme reports whether scheme is http or https, in any case.
func isWebScheme(scheme string) bool {
	return strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https")
}

// checkAuthority checks a URL's scheme and authority as a browser would
// split them.
func checkAuthority(s string) error {
	// The scheme and authority are split by hand before net/url sees them:
	// net/url is more lenient than browsers in places (it accepts "http:x"
	// as opaque, and an authority ends at different characters), and the
	// rules below must judge the same host a browser would visit.
	scheme, rest, ok := fsm.SplitScheme(s)
	if !ok {
		return errors.New("url: must be an absolute URL starting with http:// or https://")
	}
	if !strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https") {
		return errors.New("url: scheme must be http or https")
	}
	// Browsers read "http:host", "http:/host" and "http:\\host" as
	// "http://host"; refusing them keeps the stored form unambiguous.
	if !strings.HasPrefix(rest, "//") {
		return errors.New("url: must start with http:// or https:// followed by a host")
	}
	authority := rest[2:]
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	if authority == "" {
		return errors.New("url: a host is required")
	}
	if strings.Contains(authority, "@") {
		return errors.New("url: embedded credentials (user@host) are not allowed; they are a common phishing trick to disguise the real host")
	}
	// A browser ends the authority at a backslash too, so "http://a\@b"
	// would be judged as host b here but visited as host a.
	if strings.Contains(authority, `\`) {
		return errors.New(`url: a backslash is not allowed in the host part`)
	}
	return nil
}

// checkCharacters refuses what a browser would silently strip or encode
// (tabs and newlines are removed anywhere in a URL by WHATWG parsers), so
// that the URL we judge is the URL that gets visited.
func checkCharacters(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("url: not valid UTF-8")
	}
	for _, r := range s {
		switch {
		case unicode.IsControl(r):
			return fmt.Errorf("url: control character %q is not allowed", r)
		case unicode.IsSpace(r):
			return fmt.Errorf("url: whitespace %q is not allowed inside a URL; encode spaces as %%20", r)
		}
	}
	return nil
}

// checkPort insists on a port number a client can actually connect to.
// net/url accepts an empty port ("host:") and any run of digits.
func checkPort(u *url.URL) error {
	p := u.Port()
	if p == "" && !strings.HasSuffix(u.Host, ":") {
		return nil
	}
	n := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c < '0' || c > '9' {
			n = -1
			break
		}
		if n <= 65535 {
			n = n*10 + int(c-'0')
		}
	}
	if p == "" {
		return errors.New("url: port is empty; remove the ':' after the host or give a number from 1 to 65535")
	}
	if n < 1 || n > 65535 {
		return fmt.Errorf("url: port %q must be a number from 1 to 65535", p)
	}
	return nil
}

// checkHost validates the host and, unless allowPrivate, refuses hosts that
// point inside the network.
func checkHost(u *url.URL, allowPrivate bool) error {
	shown := u.Hostname()
	if strings.HasPrefix(u.Host, "[") {
		addr, err := netip.ParseAddr(shown)
		if err != nil || !addr.Is6() {
			return fmt.Errorf("url: [%s] is not a valid IPv6 address", shown)
		}
		if allowPrivate {
			return nil
		}
		return judgeAddr("["+shown+"]", addr)
	}

	host, err := foldHost(shown)
	if err != nil {
		return err
	}
	// One trailing dot is the fully qualified spelling of the same name
	// ("localhost." is localhost); more than one leaves an empty label.
	name := strings.TrimSuffix(host, ".")
	if name == "" {
		return errors.New("url: a host is required")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" {
			return fmt.Errorf("url: host %s has an empty label", shown)
		}
	}

	// WHATWG URL parsers turn any host whose last label is a number into an
	// IPv4 address, or fail; so do we, or "http://0x7f.1/" would slip past
	// as a host name and then be visited as 127.0.0.1.
	if endsInNumber(name) {
		addr, ok := parseIPv4(name)
		if !ok {
			return fmt.Errorf("url: host %s ends in a number but is not a valid IPv4 address", shown)
		}
		if allowPrivate {
			return nil
		}
		if addr.String() != shown {
			shown += " (" + addr.String() + ")"
		}
		return judgeAddr(shown, addr)
	}

	if len(name) > 253 {
		return errors.New("url: host name is longer than 253 characters")
	}
	for _, l := range labels {
		if len(l) > 63 && isASCII(l) {
			return fmt.Errorf("url: host name label %s is longer than 63 characters", l)
		}
	}
	if allowPrivate {
		return nil
	}
	return judgeName(shown, name, labels)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

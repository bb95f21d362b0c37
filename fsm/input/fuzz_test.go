package input

import (
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/linkraft/linkraft/fsm"
)

var (
	codeRE      = regexp.MustCompile(`^[A-Za-z0-9_-]{3,64}$`)
	workspaceRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

func FuzzTarget(f *testing.F) {
	for _, s := range internalTargets {
		f.Add(s, false)
		f.Add(s, true)
	}
	for _, s := range publicTargets {
		f.Add(s, false)
	}
	for _, tc := range malformedTargets {
		f.Add(tc.in, false)
	}
	for _, s := range []string{"mailto:a@example.com", "myapp://open/x?y", "tel:+1555", "JavaScript:x", "ms-msdt:x"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, raw string, allowPrivate bool) {
		got, err := Target(raw, allowPrivate)
		if err != nil {
			if got != "" {
				t.Fatalf("Target(%q) returned %q along with error %v", raw, got, err)
			}
			if err.Error() == "" {
				t.Fatalf("Target(%q) returned an empty error message", raw)
			}
			return
		}
		checkAccepted(t, raw, got, allowPrivate)
	})
}

// checkAcceptedApp re-derives what every accepted target of a scheme
// other than http(s) must have: a scheme none of the dangerous ones, and
// no credentials.
func checkAcceptedApp(t *testing.T, raw string, u *url.URL) {
	t.Helper()
	switch u.Scheme {
	case "javascript", "vbscript", "data", "file", "blob", "filesystem", "about", "view-source", "intent", "ftp", "ws", "wss":
		t.Fatalf("Target(%q) accepted scheme %q", raw, u.Scheme)
	}
	if strings.HasPrefix(u.Scheme, "ms-") || fsm.SchemeRefusal(u.Scheme) != "" {
		t.Fatalf("Target(%q) accepted scheme %q", raw, u.Scheme)
	}
	if u.User != nil {
		t.Fatalf("Target(%q) accepted userinfo", raw)
	}
}

// checkAccepted re-derives, independently of the code under test, the
// properties every accepted target must have.
func checkAccepted(t *testing.T, raw, got string, allowPrivate bool) {
	t.Helper()
	if got != strings.TrimSpace(raw) {
		t.Fatalf("Target(%q) = %q; want the trimmed input", raw, got)
	}
	if !utf8.ValidString(got) {
		t.Fatalf("Target(%q) accepted invalid UTF-8", raw)
	}
	if len(got) == 0 || len(got) > MaxURLBytes {
		t.Fatalf("Target(%q) accepted %d bytes", raw, len(got))
	}
	for _, r := range got {
		if r < 0x20 || r == 0x7f || unicode.IsControl(r) || unicode.IsSpace(r) {
			t.Fatalf("Target(%q) accepted control or space character %q", raw, r)
		}
	}
	u, err := url.Parse(got)
	if err != nil {
		t.Fatalf("Target(%q) accepted something net/url rejects: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		checkAcceptedApp(t, raw, u)
		return
	}
	if u.Hostname() == "" {
		t.Fatalf("Target(%q) accepted an empty host", raw)
	}
	if u.User != nil || u.Opaque != "" {
		t.Fatalf("Target(%q) accepted userinfo or an opaque URL", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			t.Fatalf("Target(%q) accepted port %q", raw, p)
		}
	}
	if allowPrivate {
		return
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || strings.HasSuffix(host, ".local") || strings.HasSuffix(host, ".internal") {
		t.Fatalf("Target(%q) accepted local host name %q", raw, host)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		// A lone decimal number is an IPv4 address to browsers; with a
		// leading zero it is octal, which this check leaves alone.
		if n, err := strconv.ParseUint(host, 10, 32); err == nil && host[0] != '0' {
			ip = net.IPv4(byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		}
	}
	if ip != nil && (ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.Equal(net.IPv4bcast)) {
		t.Fatalf("Target(%q) accepted internal address %v", raw, ip)
	}
}

package fsm

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// An address pattern is what a rule's address condition holds, in the
// three forms Shlink's ip-address condition takes: one address
// ("203.0.113.7", "2001:db8::1"), a CIDR block ("10.0.0.0/8"), or an
// IPv4 address with "*" for any number of its four parts
// ("192.168.1.*", "10.*.*.1"). Patterns are stored as text, in the form
// ParseAddressPattern returns, and parsed again when a rule is judged:
// only a link with such a rule pays for it, and parsing an IPv4 or
// IPv6 address or prefix does not allocate.

// AddressPattern is one parsed address pattern.
type AddressPattern struct {
	kind   addressKind
	addr   netip.Addr   // addressOne
	prefix netip.Prefix // addressBlock
	parts  [4]int16     // addressWildcard: each part's value, -1 for "*"
}

type addressKind byte

const (
	addressOne addressKind = iota + 1
	addressBlock
	addressWildcard
)

// errAddressPattern refuses text that is none of the three forms.
var errAddressPattern = errors.New("an address condition is an IP address, a CIDR block such as 192.168.0.0/16, or an IPv4 address with * for some parts such as 192.168.1.*")

// ParseAddressPattern reads an address pattern. String is its stored
// form: the address or the block's masked prefix as netip writes them,
// the wildcard as given.
func ParseAddressPattern(s string) (AddressPattern, error) {
	switch {
	case strings.Contains(s, "*"):
		return parseWildcard(s)
	case strings.Contains(s, "/"):
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Addr().Is4In6() { // write an IPv4 block as one
			return AddressPattern{}, errAddressPattern
		}
		return AddressPattern{kind: addressBlock, prefix: p.Masked()}, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return AddressPattern{}, errAddressPattern
	}
	return AddressPattern{kind: addressOne, addr: a.Unmap()}, nil
}

func parseWildcard(s string) (AddressPattern, error) {
	p := AddressPattern{kind: addressWildcard}
	rest := s
	for i := range p.parts {
		part, tail, found := strings.Cut(rest, ".")
		if found == (i == 3) { // three dots exactly
			return AddressPattern{}, errAddressPattern
		}
		rest = tail
		if part == "*" {
			p.parts[i] = -1
			continue
		}
		n, ok := octet(part)
		if !ok {
			return AddressPattern{}, errAddressPattern
		}
		p.parts[i] = n
	}
	return p, nil
}

// octet reads a decimal 0–255 without leading zeros.
func octet(s string) (int16, bool) {
	if s == "" || len(s) > 3 || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	var n int16
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int16(s[i]-'0')
	}
	return n, n <= 255
}

// String is the pattern's stored form.
func (p AddressPattern) String() string {
	switch p.kind {
	case addressOne:
		return p.addr.String()
	case addressBlock:
		return p.prefix.String()
	case addressWildcard:
		var b strings.Builder
		for i, n := range p.parts {
			if i > 0 {
				b.WriteByte('.')
			}
			if n < 0 {
				b.WriteByte('*')
			} else {
				b.WriteString(strconv.Itoa(int(n)))
			}
		}
		return b.String()
	}
	return ""
}

// Matches reports whether ip (unmapped) is one the pattern names.
func (p AddressPattern) Matches(ip netip.Addr) bool {
	switch p.kind {
	case addressOne:
		return ip == p.addr
	case addressBlock:
		return p.prefix.Contains(ip)
	case addressWildcard:
		if !ip.Is4() {
			return false
		}
		b := ip.As4()
		for i, n := range p.parts {
			if n >= 0 && int16(b[i]) != n {
				return false
			}
		}
		return true
	}
	return false
}

// AddressMatches reports whether ip matches the stored pattern; a pattern
// that does not parse matches nothing. It does not allocate.
func AddressMatches(pattern string, ip netip.Addr) bool {
	p, err := ParseAddressPattern(pattern)
	return err == nil && p.Matches(ip.Unmap())
}

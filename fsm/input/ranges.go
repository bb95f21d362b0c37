package input

import (
	"fmt"
	"net/netip"
)

type addrRange struct {
	prefix netip.Prefix
	what   string
}

// v4Internal lists the IPv4 ranges a shortened link must not point at:
// everything in the IANA special-purpose registry that is not globally
// reachable, plus the documentation and benchmarking ranges, which no real
// site uses. The first match names the range in the error.
var v4Internal = [...]addrRange{
	{netip.MustParsePrefix("255.255.255.255/32"), "the broadcast address"},
	{netip.MustParsePrefix("0.0.0.0/8"), `an unspecified ("this network") address`},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "a special-purpose address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("192.88.99.0/24"), "a reserved (6to4 relay) address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
}

// v6Internal lists IPv6 ranges refused outright. Ranges that embed an IPv4
// address (IPv4-mapped, NAT64, 6to4) are not here: judgeAddr judges the
// embedded address instead, so they are as reachable as it is.
var v6Internal = [...]addrRange{
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("::/128"), "an unspecified address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo tunnel address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("2001::/23"), "a special-purpose (IETF protocol) address"},
	{netip.MustParsePrefix("3fff::/20"), "a documentation address"},
	{netip.MustParsePrefix("fc00::/7"), "a unique local (private) address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

var (
	v6Mapped     = netip.MustParsePrefix("::ffff:0:0/96")
	v6NAT64      = netip.MustParsePrefix("64:ff9b::/96")
	v6SixToFour  = netip.MustParsePrefix("2002::/16")
	v6GlobalUnic = netip.MustParsePrefix("2000::/3")
)

// Reachable returns an error when addr lies inside the network (loopback,
// private, link-local and the other ranges a target may not point at), as
// a target naming it would get. Something that fetches a URL checks the
// address it actually connects to with it: a name that passed as a target
// may resolve inside the network.
func Reachable(addr netip.Addr) error { return judgeAddr(addr.String(), addr) }

// judgeAddr returns an error if addr points inside the network. shown is
// how the address appears in the error.
func judgeAddr(shown string, addr netip.Addr) error {
	if addr.Is4() {
		if what := v4What(addr); what != "" {
			return internal(shown, what)
		}
		return nil
	}
	// A zone names an interface on the machine doing the fetching; such an
	// address means nothing anywhere else.
	if addr.Zone() != "" {
		return internal(shown, "an address with a zone (interface) id")
	}
	if v4, ok := embeddedV4(addr); ok {
		if what := v4What(v4); what != "" {
			return fmt.Errorf("url: target %s embeds %s, %s; internal targets are not allowed", shown, v4, what)
		}
		return nil
	}
	for _, r := range v6Internal {
		if r.prefix.Contains(addr) {
			return internal(shown, r.what)
		}
	}
	// Only 2000::/3 is allocated for global unicast; everything else is
	// reserved, deprecated (IPv4-compatible ::a.b.c.d, site-local) or local.
	if !v6GlobalUnic.Contains(addr) {
		return internal(shown, "a reserved address")
	}
	return nil
}

func v4What(addr netip.Addr) string {
	for _, r := range v4Internal {
		if r.prefix.Contains(addr) {
			return r.what
		}
	}
	return ""
}

// embeddedV4 extracts the IPv4 address carried by an IPv4-mapped, NAT64
// (well-known prefix) or 6to4 address; the packet ends up at that address.
func embeddedV4(addr netip.Addr) (netip.Addr, bool) {
	b := addr.As16()
	switch {
	case v6Mapped.Contains(addr), v6NAT64.Contains(addr):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case v6SixToFour.Contains(addr):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

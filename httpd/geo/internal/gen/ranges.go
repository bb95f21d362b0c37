package main

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/linkraft/linkraft/httpd/geo/internal/geofile"
)

// u128 is an address as a number; IPv4 addresses use the low 32 bits.
type u128 struct{ hi, lo uint64 }

func toU128(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()
		return u128{lo: uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])}
	}
	b := a.As16()
	var v u128
	for i := range 8 {
		v.hi = v.hi<<8 | uint64(b[i])
		v.lo = v.lo<<8 | uint64(b[8+i])
	}
	return v
}

func (a u128) cmp(b u128) int {
	if c := cmp.Compare(a.hi, b.hi); c != 0 {
		return c
	}
	return cmp.Compare(a.lo, b.lo)
}

// next returns a+1; callers never ask past the family's last address.
func (a u128) next() u128 {
	if a.lo == ^uint64(0) {
		return u128{hi: a.hi + 1}
	}
	return u128{a.hi, a.lo + 1}
}

func (a u128) prev() u128 {
	if a.lo == 0 {
		return u128{hi: a.hi - 1, lo: ^uint64(0)}
	}
	return u128{a.hi, a.lo - 1}
}

// span is an inclusive address range and its country; "" is no country.
type span struct {
	from, to u128
	code     string
}

// Special-purpose ranges (RFC 6890 and the IANA registries) never map to a
// country, whatever the source says: clicks from them come through proxies
// or misconfigured networks, and the source has been seen to list private
// ranges such as 192.168.0.0/16 under a country.
var (
	v4Special = prefixes(
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8",
		"169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24",
		"192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
		"203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
	)
	// Outside 2000::/3 nothing is global unicast. Inside it, 2001::/23 is
	// IETF protocol space (Teredo, benchmarking, ORCHID), 2002::/16 is 6to4
	// and the other two are documentation.
	v6Special = prefixes(
		"::/3", "4000::/2", "8000::/1", "2001::/23", "2001:db8::/32",
		"2002::/16", "3fff::/20",
	)
)

func prefixes(ss ...string) []span {
	out := make([]span, len(ss))
	for i, s := range ss {
		p := netip.MustParsePrefix(s)
		out[i] = span{from: toU128(p.Masked().Addr()), to: toU128(lastAddr(p))}
	}
	return out
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for bit := p.Bits(); bit < len(b)*8; bit++ {
		b[bit/8] |= 0x80 >> (bit % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// build turns the CSV rows of both families into a table.
func build(v4, v6 []span) (*geofile.File, error) {
	codes := codeIndex(v4, v6)
	f := &geofile.File{Codes: make([]string, len(codes))}
	for c, i := range codes {
		f.Codes[i-1] = c
	}
	if len(f.Codes) > geofile.MaxCodes {
		return nil, fmt.Errorf("%d countries; the table holds at most %d", len(f.Codes), geofile.MaxCodes)
	}
	starts4, idx4 := flatten(v4, v4Special, u128{lo: 1<<32 - 1}, codes)
	for _, s := range starts4 {
		f.V4Start = append(f.V4Start, uint32(s.lo))
	}
	f.V4Index = idx4
	starts6, idx6 := flatten(v6, v6Special, u128{^uint64(0), ^uint64(0)}, codes)
	for _, s := range starts6 {
		f.V6High = append(f.V6High, s.hi)
		f.V6Low = append(f.V6Low, s.lo)
	}
	f.V6Index = idx6
	return f, nil
}

// codeIndex numbers the countries in sorted order from 1, so the same
// data always gives the same file.
func codeIndex(lists ...[]span) map[string]byte {
	var all []string
	for _, l := range lists {
		for _, s := range l {
			all = append(all, s.code)
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	codes := make(map[string]byte, len(all))
	for i, c := range all {
		codes[c] = byte(min(i+1, 255))
	}
	return codes
}

// flatten resolves overlapping rows, clears the special ranges and returns the start and
// country index of every range, covering the family from address 0 to end,
// its last address: gaps get index 0 and neighbours with the same index are
// merged.
func flatten(rows, special []span, end u128, codes map[string]byte) ([]u128, []byte) {
	rows = resolve(rows)
	for _, cut := range special {
		rows = subtract(rows, cut)
	}
	starts, idx := []u128{{}}, []byte{0}
	var next u128 // first address not yet covered
	for _, r := range rows {
		if r.from.cmp(next) > 0 && idx[len(idx)-1] != 0 {
			starts, idx = append(starts, next), append(idx, 0)
		}
		if i := codes[r.code]; i != idx[len(idx)-1] {
			if starts[len(starts)-1] == r.from {
				idx[len(idx)-1] = i // replaces an empty gap at address 0
			} else {
				starts, idx = append(starts, r.from), append(idx, i)
			}
		}
		next = r.to.next()
	}
	if len(rows) > 0 && rows[len(rows)-1].to != end && idx[len(idx)-1] != 0 {
		starts, idx = append(starts, next), append(idx, 0)
	}
	return starts, idx
}

// subtract removes cut from sorted, disjoint rows, splitting a row that
// spans it.
func subtract(rows []span, cut span) []span {
	out := make([]span, 0, len(rows)+1)
	for _, r := range rows {
		if r.to.cmp(cut.from) < 0 || r.from.cmp(cut.to) > 0 {
			out = append(out, r)
			continue
		}
		if r.from.cmp(cut.from) < 0 {
			out = append(out, span{r.from, cut.from.prev(), r.code})
		}
		if r.to.cmp(cut.to) > 0 {
			out = append(out, span{cut.to.next(), r.to, r.code})
		}
	}
	return out
}

package geo

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"
)

// table is loaded once for all tests; Load is what is under test in
// TestLoad.
var table = mustLoad()

func mustLoad() *Table {
	t, err := Load()
	if err != nil {
		panic(err)
	}
	return t
}

func TestLoad(t *testing.T) {
	version, date := table.Version()
	if version != "2.3.2026061719" || date != "2026-06-17" {
		t.Errorf("Version() = %q, %q; update the package doc and this test with the data", version, date)
	}
	if len(table.v4Start) < 100_000 || len(table.v6High) < 100_000 {
		t.Errorf("only %d IPv4 and %d IPv6 ranges", len(table.v4Start), len(table.v6High))
	}
}

// The embedded file must fail to load when any part of it is damaged: the
// gzip trailer catches most damage and the SHA-256 inside the rest.
func TestLoadRefusesDamage(t *testing.T) {
	for _, at := range []int{0, 10, len(embedded) / 2, len(embedded) - 1} {
		bad := bytes.Clone(embedded)
		bad[at] ^= 0x01
		if _, err := parse(bad); err == nil {
			t.Errorf("byte %d flipped: table loaded", at)
		}
	}
	if _, err := parse(embedded[:len(embedded)-100]); err == nil {
		t.Error("truncated table loaded")
	}
}

// The countries pinned here are what data version 2.3.2026061719 says
// (checked in its CSVs); a refresh may move some of them.
func TestCountry(t *testing.T) {
	tests := []struct {
		addr string
		want string
	}{
		{"8.8.8.8", "US"},
		{"1.1.1.1", "AU"},
		{"81.2.69.142", "GB"},
		{"193.0.6.139", "NL"},
		{"200.160.2.3", "BR"},
		{"133.11.0.1", "JP"},
		{"2001:4860:4860::8888", "US"},
		{"2001:67c:2e8:22::c100:68b", "NL"},
		{"2a00:1450:4001:81c::200e", "IE"},
		{"2a01:4f8::1", "DE"},

		// IPv4-mapped IPv6 is looked up as IPv4; a zone changes nothing.
		{"::ffff:8.8.8.8", "US"},
		{"::ffff:193.0.6.139", "NL"},
		{"2001:4860:4860::8888%eth0", "US"},

		// Boundaries: 1.0.0.0-1.0.0.255 AU, 1.0.1.0-1.0.3.255 CN,
		// 1.0.4.0 onwards AU, and 0.0.0.0/8 before it is reserved.
		{"0.255.255.255", ""},
		{"1.0.0.0", "AU"},
		{"1.0.0.255", "AU"},
		{"1.0.1.0", "CN"},
		{"1.0.3.255", "CN"},
		{"1.0.4.0", "AU"},

		// IPv6 boundaries: 2001:506:8::-2001:506:9::3 US, ::4-::5 BR,
		// ::6-::2d US.
		{"2001:506:9::3", "US"},
		{"2001:506:9::4", "BR"},
		{"2001:506:9::5", "BR"},
		{"2001:506:9::6", "US"},

		// Overlapping rows: 2.58.196.0-2.58.197.255 DE contains a
		// narrower 2.58.197.15 BE, which wins, and 3.2.35.0-3.2.35.63 DE
		// contains 3.2.35.40-47 TR and 3.2.35.48-55 GR.
		{"2.58.196.0", "DE"},
		{"2.58.197.14", "DE"},
		{"2.58.197.15", "BE"},
		{"2.58.197.16", "DE"},
		{"3.2.35.39", "DE"},
		{"3.2.35.40", "TR"},
		{"3.2.35.48", "GR"},
		{"3.2.35.56", "DE"},

		// The source names AU for these private ranges; geo does not.
		{"192.168.1.1", ""},
		{"172.16.0.1", ""},
		{"10.1.2.3", ""},
		{"127.0.0.1", ""},
		{"::1", ""},
		{"::", ""},
		{"fe80::1", ""},
		{"fd00::1", ""},
		{"2001:2::1", ""}, // benchmarking; the source says JP
		{"::ffff:192.168.1.1", ""},
		{"255.255.255.255", ""},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},
	}
	for _, tc := range tests {
		if got := table.Country(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Country(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
	if got := table.Country(netip.Addr{}); got != "" {
		t.Errorf("Country(zero Addr) = %q, want \"\"", got)
	}
}

// Every special-purpose range is empty from its first address to its last,
// whatever the source says.
func TestSpecialRangesHaveNoCountry(t *testing.T) {
	for _, p := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8",
		"169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24",
		"192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
		"203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"::/3", "4000::/2", "8000::/1", "2001::/23", "2001:db8::/32",
		"2002::/16", "3fff::/20", "fc00::/7", "fe80::/10", "ff00::/8",
	} {
		prefix := netip.MustParsePrefix(p)
		first, final := prefix.Addr(), lastOf(prefix)
		for _, a := range []netip.Addr{first, final} {
			if got := table.Country(a); got != "" {
				t.Errorf("Country(%s) in %s = %q, want \"\"", a, p, got)
			}
		}
		// The table has one range covering the whole prefix.
		if first.Is4() {
			if table.last4(u32(first)) != table.last4(u32(final)) {
				t.Errorf("%s is split across ranges", p)
			}
		}
	}
}

func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for bit := p.Bits(); bit < len(b)*8; bit++ {
		b[bit/8] |= 0x80 >> (bit % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// The /16 index finds the same range as a search of every start would, at
// each range's first and last address and at every /16's edges.
func TestBlockIndexAgreesWithFullSearch(t *testing.T) {
	full := func(x uint32) int {
		i, found := slices.BinarySearch(table.v4Start, x)
		if found {
			return i
		}
		return i - 1
	}
	check := func(x uint32) {
		if got, want := table.last4(x), full(x); got != want {
			t.Fatalf("last4(%#08x) = %d, a full search finds %d", x, got, want)
		}
	}
	for _, s := range table.v4Start {
		check(s)
		check(s - 1) // the previous range's last address (wraps at 0 to the top)
	}
	for p := range uint32(1 << 16) {
		check(p << 16)
		check(p<<16 | 0xffff)
	}
}

// Adjacent ranges never repeat a country: the generator merged them.
func TestRangesMerged(t *testing.T) {
	for i := 1; i < len(table.v4Index); i++ {
		if table.v4Index[i] == table.v4Index[i-1] {
			t.Fatalf("IPv4 ranges %d and %d have the same country", i-1, i)
		}
	}
	for i := 1; i < len(table.v6Index); i++ {
		if table.v6Index[i] == table.v6Index[i-1] {
			t.Fatalf("IPv6 ranges %d and %d have the same country", i-1, i)
		}
	}
}

func TestCountryDoesNotAllocate(t *testing.T) {
	addrs := []netip.Addr{
		netip.MustParseAddr("8.8.8.8"),
		netip.MustParseAddr("::ffff:8.8.8.8"),
		netip.MustParseAddr("2001:4860:4860::8888"),
		netip.MustParseAddr("10.0.0.1"),
	}
	for _, a := range addrs {
		if n := testing.AllocsPerRun(1000, func() { _ = table.Country(a) }); n != 0 {
			t.Errorf("Country(%s) allocates %v times", a, n)
		}
	}
}

func FuzzCountry(f *testing.F) {
	for _, s := range []string{"8.8.8.8", "::ffff:1.0.0.0", "2001:506:9::4", "::", "ffff::ffff"} {
		a16 := netip.MustParseAddr(s).As16()
		f.Add(a16[:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var a16 [16]byte
		copy(a16[:], b)
		addr := netip.AddrFrom16(a16)
		got := table.Country(addr)
		if got != "" && (len(got) != 2 || got[0] < 'A' || got[0] > 'Z' || got[1] < 'A' || got[1] > 'Z') {
			t.Fatalf("Country(%s) = %q, not a country code", addr, got)
		}
		if addr.Is4In6() {
			if v4 := table.Country(addr.Unmap()); v4 != got {
				t.Fatalf("Country(%s) = %q but Country(%s) = %q", addr, got, addr.Unmap(), v4)
			}
		}
		if len(b) >= 4 {
			_ = table.Country(netip.AddrFrom4([4]byte(b[:4])))
		}
	})
}

var sink string

func BenchmarkCountryIPv4(b *testing.B) {
	addr := netip.MustParseAddr("81.2.69.142")
	b.ReportAllocs()
	for b.Loop() {
		sink = table.Country(addr)
	}
}

func BenchmarkCountryIPv6(b *testing.B) {
	addr := netip.MustParseAddr("2a00:1450:4001:81c::200e")
	b.ReportAllocs()
	for b.Loop() {
		sink = table.Country(addr)
	}
}

func BenchmarkLoad(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(); err != nil {
			b.Fatal(err)
		}
	}
}

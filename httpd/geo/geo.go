package geo

import (
	_ "embed"
	"fmt"
	"net/netip"
	"slices"

	"github.com/linkraft/linkraft/httpd/geo/internal/geofile"
)

//go:generate go run ./internal/gen -out table.bin.gz

//go:embed table.bin.gz
var embedded []byte

// Table maps addresses to countries. It is immutable once loaded and safe
// for concurrent use.
type Table struct {
	version, date string
	codes         []string

	v4Start []uint32
	v4Index []byte
	// v4Block[p] is the index of the first start at or above p<<16, for
	// every 16-bit prefix p and one past the last: a lookup searches only
	// the few ranges that start inside its address's /16.
	v4Block []uint32

	v6High  []uint64
	v6Low   []uint64
	v6Index []byte
}

// Load decodes the embedded table after verifying its checksum. It takes
// about 20 ms and keeps about 6.4 MB (passing through some 20 MB while it
// decompresses), so callers load it once at start-up and share the result.
func Load() (*Table, error) {
	return parse(embedded)
}

func parse(data []byte) (*Table, error) {
	f, err := geofile.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("geo: load the embedded table: %w", err)
	}
	// Index 0 means no country, so a lookup can index codes directly.
	codes := append([]string{""}, f.Codes...)
	return &Table{
		version: f.Version, date: f.Date, codes: codes,
		v4Start: f.V4Start, v4Index: f.V4Index, v4Block: blocks(f.V4Start),
		v6High: f.V6High, v6Low: f.V6Low, v6Index: f.V6Index,
	}, nil
}

// Version returns the version and date (YYYY-MM-DD) of the source data, for
// start-up logs and the admin API.
func (t *Table) Version() (version, date string) {
	return t.version, t.date
}

// Country returns the ISO 3166-1 alpha-2 code of addr's country, or "" when
// the data has none: private, loopback, link-local, documentation and other
// special-purpose addresses, unallocated space and the zero Addr. An
// IPv4-mapped IPv6 address is looked up as the IPv4 address it carries,
// which is how a dual-stack listener reports IPv4 clients. A zone is
// ignored. It does not allocate.
func (t *Table) Country(addr netip.Addr) string {
	addr = addr.Unmap()
	switch {
	case addr.Is4():
		b := addr.As4()
		return t.codes[t.v4Index[t.last4(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3]))]]
	case addr.Is6():
		b := addr.As16()
		hi, lo := be64(b[:8]), be64(b[8:])
		return t.codes[t.v6Index[t.last6(hi, lo)]]
	}
	return ""
}

// blocks indexes sorted starts by their top 16 bits (see Table.v4Block).
func blocks(starts []uint32) []uint32 {
	b := make([]uint32, 1<<16+1)
	i := 0
	for p := range b {
		for i < len(starts) && starts[i]>>16 < uint32(p) {
			i++
		}
		b[p] = uint32(i)
	}
	return b
}

// last4 returns the index of the last start <= x. starts[0] is 0, so there
// always is one: in x's /16, or else the last one before it.
func (t *Table) last4(x uint32) int {
	lo, hi := int(t.v4Block[x>>16]), int(t.v4Block[x>>16+1])
	i, found := slices.BinarySearch(t.v4Start[lo:hi], x)
	if found {
		return lo + i
	}
	return lo + i - 1
}

// last6 is last for 128-bit starts kept as high and low halves.
func (t *Table) last6(hi, lo uint64) int {
	// Find the first start greater than (hi, lo); the range before it holds
	// the address.
	i, j := 0, len(t.v6High)
	for i < j {
		m := int(uint(i+j) >> 1)
		if t.v6High[m] < hi || t.v6High[m] == hi && t.v6Low[m] <= lo {
			i = m + 1
		} else {
			j = m
		}
	}
	return i - 1
}

func be64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

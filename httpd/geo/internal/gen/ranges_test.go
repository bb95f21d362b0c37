package main

import (
	"net/netip"
	"reflect"
	"testing"
)

func row(from, to, code string) span {
	return span{toU128(netip.MustParseAddr(from)), toU128(netip.MustParseAddr(to)), code}
}

func TestFlattenIPv4(t *testing.T) {
	codes := map[string]byte{"AU": 1, "BE": 2, "DE": 3}
	tests := []struct {
		name    string
		rows    []span
		special []span
		starts  []string
		idx     []byte
	}{
		{
			name:   "gaps at both ends",
			rows:   []span{row("1.0.0.0", "1.0.0.255", "AU")},
			starts: []string{"0.0.0.0", "1.0.0.0", "1.0.1.0"},
			idx:    []byte{0, 1, 0},
		},
		{
			name:   "from the first address",
			rows:   []span{row("0.0.0.0", "0.0.0.255", "AU")},
			starts: []string{"0.0.0.0", "0.0.1.0"},
			idx:    []byte{1, 0},
		},
		{
			name:   "to the last address",
			rows:   []span{row("255.0.0.0", "255.255.255.255", "AU")},
			starts: []string{"0.0.0.0", "255.0.0.0"},
			idx:    []byte{0, 1},
		},
		{
			name: "adjacent same country merged, unsorted input",
			rows: []span{
				row("1.0.1.0", "1.0.1.255", "AU"),
				row("1.0.0.0", "1.0.0.255", "AU"),
				row("1.0.2.0", "1.0.2.255", "BE"),
			},
			starts: []string{"0.0.0.0", "1.0.0.0", "1.0.2.0", "1.0.3.0"},
			idx:    []byte{0, 1, 2, 0},
		},
		{
			name: "narrower row wins inside a wider one",
			rows: []span{
				row("2.58.196.0", "2.58.197.255", "DE"),
				row("2.58.197.15", "2.58.197.15", "BE"),
			},
			starts: []string{"0.0.0.0", "2.58.196.0", "2.58.197.15", "2.58.197.16", "2.58.198.0"},
			idx:    []byte{0, 3, 2, 3, 0},
		},
		{
			name:    "special range cut out of a row",
			rows:    []span{row("192.0.0.0", "192.255.255.255", "AU")},
			special: prefixes("192.168.0.0/16"),
			starts:  []string{"0.0.0.0", "192.0.0.0", "192.168.0.0", "192.169.0.0", "193.0.0.0"},
			idx:     []byte{0, 1, 0, 1, 0},
		},
	}
	for _, tc := range tests {
		starts, idx := flatten(tc.rows, tc.special, u128{lo: 1<<32 - 1}, codes)
		var got []string
		for _, s := range starts {
			got = append(got, netip.AddrFrom4([4]byte{byte(s.lo >> 24), byte(s.lo >> 16), byte(s.lo >> 8), byte(s.lo)}).String())
		}
		if !reflect.DeepEqual(got, tc.starts) || !reflect.DeepEqual(idx, tc.idx) {
			t.Errorf("%s: flatten = %v %v, want %v %v", tc.name, got, idx, tc.starts, tc.idx)
		}
	}
}

func TestResolvePartialOverlap(t *testing.T) {
	// Neither row contains the other; the narrower wins where they meet.
	// resolve splits at every boundary and leaves merging to flatten.
	got := resolve([]span{
		row("::1", "::10", "AU"),
		row("::8", "::f0", "BE"),
	})
	want := []span{
		row("::1", "::7", "AU"),
		row("::8", "::10", "AU"),
		row("::11", "::f0", "BE"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("resolve = %v, want %v", got, want)
	}
}

func TestDateOf(t *testing.T) {
	if got, err := dateOf("2.3.2026061719"); err != nil || got != "2026-06-17" {
		t.Errorf("dateOf = %q, %v", got, err)
	}
	if _, err := dateOf("2.3.0"); err == nil {
		t.Error("dateOf(2.3.0) succeeded")
	}
}

func TestParseRow(t *testing.T) {
	for _, tc := range []struct {
		row string
		v4  bool
		ok  bool
	}{
		{"1.0.0.0,1.0.0.255,AU", true, true},
		{"2001:200::,2001:200::ff,JP", false, true},
		{"2001:200::,2001:200::ff,JP", true, false},
		{"1.0.0.255,1.0.0.0,AU", true, false},
		{"1.0.0.0,1.0.0.255,au", true, false},
		{"1.0.0.0,1.0.0.255", true, false},
		{"1.0.0.0,1.0.0.x,AU", true, false},
	} {
		if _, err := parseRow(tc.row, tc.v4); (err == nil) != tc.ok {
			t.Errorf("parseRow(%q, %v) error = %v", tc.row, tc.v4, err)
		}
	}
}

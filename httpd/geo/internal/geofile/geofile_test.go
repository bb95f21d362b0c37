package geofile

import (
	"bytes"
	"compress/gzip"
	"io"
	"reflect"
	"strings"
	"testing"
)

func sample() *File {
	return &File{
		Version: "1.2.3", Date: "2026-01-02",
		Codes:   []string{"AU", "CN"},
		V4Start: []uint32{0, 16777216, 16777472, 16778240},
		V4Index: []byte{0, 1, 2, 1},
		V6High:  []uint64{0, 0x2001_0200_0000_0000, 0x2001_0200_0000_0000},
		V6Low:   []uint64{0, 0, 7},
		V6Index: []byte{0, 2, 0},
	}
}

func TestRoundTrip(t *testing.T) {
	want := sample()
	data, err := want.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse(Marshal(f)) = %+v, want %+v", got, want)
	}
}

// rewrite decompresses an encoded table, lets change alter the layout and
// compresses it again, so tests reach the checks behind gzip's own CRC.
func rewrite(t *testing.T, data []byte, change func([]byte) []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	out, err := compress(change(raw))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseRefuses(t *testing.T) {
	good, err := sample().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "not a gzip stream"},
		{"not gzip", []byte("LKGEO"), "not a gzip stream"},
		{"truncated gzip", good[:len(good)-5], "decompress"},
		{"flipped byte", rewrite(t, good, func(b []byte) []byte { b[20] ^= 1; return b }), "checksum mismatch"},
		{"short", rewrite(t, good, func(b []byte) []byte { return b[:10] }), "too short"},
		{"cut before checksum", rewrite(t, good, func(b []byte) []byte { return b[:40] }), "checksum mismatch"},
	}
	for _, tc := range tests {
		_, err := Parse(tc.data)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Parse error = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestMarshalRefuses(t *testing.T) {
	tests := []struct {
		name   string
		change func(*File)
	}{
		{"lower-case code", func(f *File) { f.Codes[0] = "au" }},
		{"long code", func(f *File) { f.Codes[0] = "AUS" }},
		{"IPv4 not from 0", func(f *File) { f.V4Start[0] = 1 }},
		{"IPv4 not increasing", func(f *File) { f.V4Start[2] = f.V4Start[1] }},
		{"IPv4 index missing", func(f *File) { f.V4Index = f.V4Index[:1] }},
		{"IPv6 not increasing", func(f *File) { f.V6Low[2] = 0 }},
		{"IPv6 not from 0", func(f *File) { f.V6Low[0] = 1 }},
		{"index past codes", func(f *File) { f.V6Index[1] = 3 }},
		{"too many codes", func(f *File) { f.Codes = make([]string, MaxCodes+1) }},
	}
	for _, tc := range tests {
		f := sample()
		tc.change(f)
		if _, err := f.Marshal(); err == nil {
			t.Errorf("%s: Marshal succeeded", tc.name)
		}
	}
}

// FuzzParse checks that no input makes Parse panic or accept a table that
// does not encode back to an equal one.
func FuzzParse(f *testing.F) {
	good, err := sample().Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Parse(data)
		if err != nil {
			return
		}
		again, err := got.Marshal()
		if err != nil {
			t.Fatalf("parsed table does not encode: %v", err)
		}
		if back, err := Parse(again); err != nil || !reflect.DeepEqual(back, got) {
			t.Fatalf("round trip changed the table: %v", err)
		}
	})
}

// Package geofile owns the binary encoding of linkraft's embedded
// IP-to-country table: the generator writes it and package geo reads it, so
// both sides share one definition of the layout and its checks.
//
// A table covers each address family completely with sorted ranges. Range i
// runs from Start[i] up to the address before Start[i+1] (the last one runs to
// the end of the family) and maps to Codes[Index[i]-1], or to no country when
// Index[i] is 0. Storing only starts halves the table, and covering gaps with
// index-0 ranges makes every lookup a plain "last start <= address" search.
//
// The file is a gzip stream, which with the delta coding below shrinks it
// about tenfold (what matters for the binary and the repository), of this
// layout, integers little-endian:
//
//	magic      8 bytes  "LKGEO\x00\x00\x01" (the last byte is the layout version)
//	version    1-byte length, then the source data's version
//	date       1-byte length, then the source data's date (YYYY-MM-DD)
//	codes      uint16 count, then two ASCII capital letters per code
//	IPv4       uint32 count n, n uint32 starts, n index bytes
//	IPv6       uint32 count m, m uint64 high halves, m uint64 low halves,
//	           m index bytes
//	checksum   SHA-256 of every byte before it
//
// Starts and high halves are stored as differences from the previous entry
// (the first from 0): sorted neighbours differ by small, often repeated
// numbers, which compress far better than the addresses themselves.
//
// One index byte per range limits a table to 255 countries; ISO 3166 has 249.
package geofile

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MaxCodes is how many country codes one index byte can name; index 0 means
// no country.
const MaxCodes = 255

// maxRaw bounds the decompressed layout, so a damaged or hostile file cannot
// make Parse allocate without limit; today's table is about 6.4 MB.
const maxRaw = 64 << 20

var magic = [8]byte{'L', 'K', 'G', 'E', 'O', 0, 0, 1}

// File is a decoded table. Codes holds two-letter country codes; the index
// slices refer to them one-based so that 0 can mean "no country".
type File struct {
	Version string // of the source data, e.g. the npm package version
	Date    string // of the source data, YYYY-MM-DD
	Codes   []string

	V4Start []uint32
	V4Index []byte

	V6High  []uint64
	V6Low   []uint64
	V6Index []byte
}

// Marshal encodes f after checking it, so a generator cannot write a table
// the loader would refuse.
func (f *File) Marshal() ([]byte, error) {
	if err := f.check(); err != nil {
		return nil, fmt.Errorf("geofile: encode: %w", err)
	}
	var b bytes.Buffer
	b.Write(magic[:])
	writeShort(&b, f.Version)
	writeShort(&b, f.Date)
	b.Write(binary.LittleEndian.AppendUint16(nil, uint16(len(f.Codes))))
	for _, c := range f.Codes {
		b.WriteString(c)
	}
	b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(f.V4Start))))
	prev4 := uint32(0)
	for _, s := range f.V4Start {
		b.Write(binary.LittleEndian.AppendUint32(nil, s-prev4))
		prev4 = s
	}
	b.Write(f.V4Index)
	b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(f.V6High))))
	prev6 := uint64(0)
	for _, s := range f.V6High {
		b.Write(binary.LittleEndian.AppendUint64(nil, s-prev6))
		prev6 = s
	}
	for _, s := range f.V6Low {
		b.Write(binary.LittleEndian.AppendUint64(nil, s))
	}
	b.Write(f.V6Index)
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return compress(b.Bytes())
}

func compress(raw []byte) ([]byte, error) {
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return nil, fmt.Errorf("geofile: compress: %w", err)
	}
	if _, err := zw.Write(raw); err != nil {
		return nil, fmt.Errorf("geofile: compress: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("geofile: compress: %w", err)
	}
	return out.Bytes(), nil
}

func decompress(file []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(file))
	if err != nil {
		return nil, fmt.Errorf("geofile: not a gzip stream: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxRaw+1))
	if err != nil {
		return nil, fmt.Errorf("geofile: decompress: %w", err)
	}
	if len(raw) > maxRaw {
		return nil, fmt.Errorf("geofile: decompresses to more than %d bytes", maxRaw)
	}
	return raw, nil
}

// writeShort writes a string of at most 255 bytes behind its length; check
// has already bounded it.
func writeShort(b *bytes.Buffer, s string) {
	b.WriteByte(byte(len(s)))
	b.WriteString(s)
}

// Parse decodes and checks an encoded table. The checksum is verified first,
// so a damaged file fails with a clear error instead of a confusing one.
func Parse(file []byte) (*File, error) {
	data, err := decompress(file)
	if err != nil {
		return nil, err
	}
	if len(data) < len(magic)+sha256.Size {
		return nil, fmt.Errorf("geofile: %d bytes is too short for a table", len(data))
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, errors.New("geofile: checksum mismatch; the table is damaged")
	}
	if !bytes.Equal(body[:len(magic)], magic[:]) {
		return nil, errors.New("geofile: not a table of this layout version")
	}
	r := reader{buf: body[len(magic):]}
	f := &File{Version: r.short(), Date: r.short()}
	f.Codes = make([]string, r.uint16())
	for i := range f.Codes {
		f.Codes[i] = string(r.bytes(2))
	}
	f.V4Start = make([]uint32, r.count(5))
	prev4 := uint32(0)
	for i := range f.V4Start {
		prev4 += binary.LittleEndian.Uint32(r.bytes(4))
		f.V4Start[i] = prev4
	}
	f.V4Index = bytes.Clone(r.bytes(len(f.V4Start)))
	n6 := r.count(17)
	f.V6High, f.V6Low = make([]uint64, n6), make([]uint64, n6)
	prev6 := uint64(0)
	for i := range f.V6High {
		prev6 += binary.LittleEndian.Uint64(r.bytes(8))
		f.V6High[i] = prev6
	}
	for i := range f.V6Low {
		f.V6Low[i] = binary.LittleEndian.Uint64(r.bytes(8))
	}
	f.V6Index = bytes.Clone(r.bytes(n6))
	if r.err != nil {
		return nil, fmt.Errorf("geofile: %w", r.err)
	}
	if len(r.buf) != 0 {
		return nil, fmt.Errorf("geofile: %d unexpected bytes before the checksum", len(r.buf))
	}
	if err := f.check(); err != nil {
		return nil, fmt.Errorf("geofile: %w", err)
	}
	return f, nil
}

// check enforces what lookups rely on: every address is covered (the first
// start is the family's first address), starts strictly increase, and every
// index names a code.
func (f *File) check() error {
	for _, check := range []func() error{f.checkCodes, f.checkV4, f.checkV6, f.checkIndexes} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// checkCodes checks the header's strings and the country codes.
func (f *File) checkCodes() error {
	if len(f.Version) > 255 || len(f.Date) > 255 {
		return errors.New("version or date longer than 255 bytes")
	}
	if len(f.Codes) > MaxCodes {
		return fmt.Errorf("%d country codes; at most %d fit", len(f.Codes), MaxCodes)
	}
	for _, c := range f.Codes {
		if len(c) != 2 || !isUpper(c[0]) || !isUpper(c[1]) {
			return fmt.Errorf("country code %q is not two capital letters", c)
		}
	}
	return nil
}

// checkV4 checks that the IPv4 ranges cover every address in order.
func (f *File) checkV4() error {
	if len(f.V4Start) == 0 || f.V4Start[0] != 0 || len(f.V4Index) != len(f.V4Start) {
		return errors.New("IPv4 ranges do not start at 0.0.0.0 or lack indexes")
	}
	for i := 1; i < len(f.V4Start); i++ {
		if f.V4Start[i] <= f.V4Start[i-1] {
			return fmt.Errorf("IPv4 range %d does not start after range %d", i, i-1)
		}
	}
	return nil
}

// checkV6 checks that the IPv6 ranges cover every address in order.
func (f *File) checkV6() error {
	n := len(f.V6High)
	if n == 0 || f.V6High[0] != 0 || f.V6Low[0] != 0 || len(f.V6Low) != n || len(f.V6Index) != n {
		return errors.New("IPv6 ranges do not start at :: or lack halves or indexes")
	}
	for i := 1; i < n; i++ {
		if f.V6High[i] < f.V6High[i-1] || f.V6High[i] == f.V6High[i-1] && f.V6Low[i] <= f.V6Low[i-1] {
			return fmt.Errorf("IPv6 range %d does not start after range %d", i, i-1)
		}
	}
	return nil
}

// checkIndexes checks that every range's index names a country code.
func (f *File) checkIndexes() error {
	for _, idx := range [][]byte{f.V4Index, f.V6Index} {
		for _, x := range idx {
			if int(x) > len(f.Codes) {
				return fmt.Errorf("index %d names no country code (there are %d)", x, len(f.Codes))
			}
		}
	}
	return nil
}

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }

// reader consumes a buffer front to back and remembers the first shortfall,
// so Parse can read every field and check once.
type reader struct {
	buf []byte
	err error
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n > len(r.buf) {
		if r.err == nil {
			r.err = errors.New("table is truncated")
		}
		return make([]byte, n)
	}
	b := r.buf[:n]
	r.buf = r.buf[n:]
	return b
}

func (r *reader) short() string {
	n := r.bytes(1)[0]
	return string(r.bytes(int(n)))
}

func (r *reader) uint16() int { return int(binary.LittleEndian.Uint16(r.bytes(2))) }

// count reads a uint32 entry count and refuses one whose entries, each
// perBytes long, could not fit in what is left, so a bad count cannot make
// Parse allocate gigabytes.
func (r *reader) count(perBytes int) int {
	n := uint64(binary.LittleEndian.Uint32(r.bytes(4)))
	if r.err == nil && n*uint64(perBytes) > uint64(len(r.buf)) {
		r.err = fmt.Errorf("count %d does not fit in the %d bytes left", n, len(r.buf))
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

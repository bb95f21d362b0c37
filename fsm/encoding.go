package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"strings"
	"unsafe"
)

// errTruncated reports input that ended in the middle of a value, errRead
// a stream whose source failed.
var (
	errTruncated = errors.New("truncated input")
	errRead      = errors.New("read")
)

// maxStringLen bounds any length prefix so a corrupt or hostile length can
// never make the decoder allocate more than the input could hold.
const maxStringLen = 1 << 20

// encoder appends values to a byte slice. Integers are varints, strings are
// length-prefixed; the format is defined by the order of the calls.
type encoder struct{ buf []byte }

func (e *encoder) byte(b byte)      { e.buf = append(e.buf, b) }
func (e *encoder) uvarint(v uint64) { e.buf = binary.AppendUvarint(e.buf, v) }
func (e *encoder) varint(v int64)   { e.buf = binary.AppendVarint(e.buf, v) }
func (e *encoder) string(s string)  { e.uvarint(uint64(len(s))); e.buf = append(e.buf, s...) }
func (e *encoder) bool(b bool)      { e.byte(boolByte(b)) }
func (e *encoder) fixed(b []byte)   { e.buf = append(e.buf, b...) }
func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// decoder reads what encoder wrote. The first error sticks: later reads
// return zero values, so callers check err once at the end.
//
// A decoder over a byte slice (a log entry) reads only that slice. A
// stream decoder (a snapshot) reads its source in blocks as it goes and
// passes every byte it consumes to sum.
type decoder struct {
	buf []byte // unread input
	err error

	src      io.Reader // nil: buf is all the input
	sum      hash.Hash32
	consumed []byte // of the current block: read, not yet summed
	eof      bool
}

// streamBlock is how much a stream decoder reads at a time.
const streamBlock = 64 << 10

func newStreamDecoder(src io.Reader, sum hash.Hash32) *decoder {
	return &decoder{src: src, sum: sum}
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// need reports whether n unread bytes are available, reading more from a
// stream's source if it must. A refill reads into a new block, so views
// (stringView) of the previous block stay valid.
func (d *decoder) need(n int) bool {
	if len(d.buf) >= n {
		return true
	}
	if d.src == nil || d.eof {
		return false
	}
	d.flushSum()
	block := make([]byte, len(d.buf), max(streamBlock, 2*n))
	copy(block, d.buf)
	for len(block) < n && !d.eof {
		m, err := d.src.Read(block[len(block):cap(block)])
		block = block[:len(block)+m]
		switch {
		case err == io.EOF:
			d.eof = true
		case err != nil:
			d.fail(fmt.Errorf("%w: %w", errRead, err))
			d.eof = true
		}
	}
	d.buf, d.consumed = block, block
	return len(d.buf) >= n
}

// advance consumes n bytes.
func (d *decoder) advance(n int) { d.buf = d.buf[n:] }

// flushSum passes the bytes consumed from the current block to sum.
func (d *decoder) flushSum() {
	if d.sum != nil && d.consumed != nil {
		d.sum.Write(d.consumed[:len(d.consumed)-len(d.buf)])
		d.consumed = d.consumed[len(d.consumed)-len(d.buf):]
	}
}

// trailer consumes the rest of a stream but its last four bytes, which it
// returns; ok is false when fewer than four remain or reading failed.
func (d *decoder) trailer() (last []byte, ok bool) {
	for {
		if len(d.buf) > 4 {
			d.advance(len(d.buf) - 4)
		}
		if !d.need(5) {
			break
		}
	}
	d.flushSum()
	return d.buf, len(d.buf) == 4 && !errors.Is(d.err, errRead)
}

func (d *decoder) byte() byte {
	if d.err != nil || !d.need(1) {
		d.fail(errTruncated)
		return 0
	}
	b := d.buf[0]
	d.advance(1)
	return b
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	d.need(binary.MaxVarintLen64) // a shorter varint may end the input
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail(fmt.Errorf("bad varint: %w", errTruncated))
		return 0
	}
	d.advance(n)
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	d.need(binary.MaxVarintLen64)
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.fail(fmt.Errorf("bad varint: %w", errTruncated))
		return 0
	}
	d.advance(n)
	return v
}

func (d *decoder) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail(errors.New("bad bool"))
		return false
	}
}

func (d *decoder) string() string { return strings.Clone(d.stringView()) }

// stringView is string without the copy: the result points into the
// input and is valid only as long as the input is. Callers copy what
// they keep.
func (d *decoder) stringView() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > maxStringLen || !d.need(int(n)) {
		d.fail(fmt.Errorf("string of %d bytes: %w", n, errTruncated))
		return ""
	}
	if n == 0 {
		return ""
	}
	s := unsafe.String(&d.buf[0], n)
	d.advance(int(n))
	return s
}

func (d *decoder) fixed(dst []byte) {
	if d.err != nil || !d.need(len(dst)) {
		d.fail(errTruncated)
		return
	}
	copy(dst, d.buf)
	d.advance(len(dst))
}

// count reads a collection length and rejects one that could not fit in the
// remaining input given that each element takes at least minSize bytes. A
// stream's remaining length is unknown: its counts are only bounded by
// maxInt, and callers must not allocate by them.
func (d *decoder) count(minSize int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if d.src != nil {
		return int(min(n, math.MaxInt32))
	}
	if n > uint64(len(d.buf)/minSize) {
		d.fail(fmt.Errorf("count %d exceeds input: %w", n, errTruncated))
		return 0
	}
	return int(n)
}

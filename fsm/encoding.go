package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// errTruncated reports input that ended in the middle of a value.
var errTruncated = errors.New("truncated input")

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
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.buf) < 1 {
		d.fail(errTruncated)
		return 0
	}
	b := d.buf[0]
	d.buf = d.buf[1:]
	return b
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail(fmt.Errorf("bad varint: %w", errTruncated))
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.fail(fmt.Errorf("bad varint: %w", errTruncated))
		return 0
	}
	d.buf = d.buf[n:]
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
	if n > maxStringLen || n > uint64(len(d.buf)) {
		d.fail(fmt.Errorf("string of %d bytes: %w", n, errTruncated))
		return ""
	}
	if n == 0 {
		return ""
	}
	s := unsafe.String(&d.buf[0], n)
	d.buf = d.buf[n:]
	return s
}

func (d *decoder) fixed(dst []byte) {
	if d.err != nil || len(d.buf) < len(dst) {
		d.fail(errTruncated)
		return
	}
	copy(dst, d.buf)
	d.buf = d.buf[len(dst):]
}

// count reads a collection length and rejects one that could not fit in the
// remaining input given that each element takes at least minSize bytes.
func (d *decoder) count(minSize int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.buf)/minSize) {
		d.fail(fmt.Errorf("count %d exceeds input: %w", n, errTruncated))
		return 0
	}
	return int(n)
}

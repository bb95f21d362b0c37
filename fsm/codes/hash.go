package codes

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"strconv"
)

// Base58Alphabet is the digit order for hash codes; index i is digit i. It
// omits 0, O, I and l so that codes survive being read aloud or retyped.
const Base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// HashLength is the length of every hash code.
const HashLength = 10

// MaxHashSalt is the largest salt the caller should try when a hash code
// collides with a different URL; HashCode itself accepts any salt.
const MaxHashSalt = 10

// base58Width is the most base58 digits a 128-bit value can have
// (58^21 < 2^128 <= 58^22).
const base58Width = 22

// HashCode derives the content-addressed code for a canonical URL within a
// workspace, so the same link in the same workspace always gets the same code
// on every replica without coordination. salt > 0 gives an alternative code
// for the rare collision; salt <= 0 means no salt.
//
// The construction, fixed forever:
//
//   - message = canonicalURL + "|" + workspace, followed by "|" + the decimal
//     form of salt when salt > 0;
//   - d = SHA-256(message); v = d[0:16] read as a big-endian unsigned 128-bit
//     integer;
//   - s = v in base 58 over Base58Alphabet, most significant digit first,
//     without leading zero digits, then left-padded with '1' (digit zero)
//     only up to 10 characters (the reference pseudocode pads to the target
//     length, not to the 22-digit width of a 128-bit value);
//   - the code is s[0:10].
func HashCode(canonicalURL, workspace string, salt int) string {
	// Typical messages fit the stack buffer; longer ones grow onto the heap.
	var buf [256]byte
	msg := append(buf[:0], canonicalURL...)
	msg = append(msg, '|')
	msg = append(msg, workspace...)
	if salt > 0 {
		msg = append(msg, '|')
		msg = strconv.AppendInt(msg, int64(salt), 10)
	}
	d := sha256.Sum256(msg)
	hi := binary.BigEndian.Uint64(d[0:8])
	lo := binary.BigEndian.Uint64(d[8:16])

	var digits [base58Width]byte
	i := base58Width
	for hi != 0 || lo != 0 {
		var r uint64
		hi, r = hi/58, hi%58
		lo, r = bits.Div64(r, lo, 58)
		i--
		digits[i] = Base58Alphabet[r]
	}
	for base58Width-i < HashLength {
		i--
		digits[i] = Base58Alphabet[0]
	}
	return string(digits[i : i+HashLength])
}

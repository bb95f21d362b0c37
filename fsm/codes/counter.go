package codes

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// Base62Alphabet is the digit order for counter codes; index i is digit i.
const Base62Alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Counter code lengths are bounded above because the permutation works in a
// uint64: 62^10 < 2^64 but 62^11 is not.
const (
	MinCounterLength = 1
	MaxCounterLength = 10
)

// feistelRounds is part of the code format. Eight rounds is well past the
// four that Luby–Rackoff needs for a pseudo-random permutation, and the cost
// is dominated by SHA-256 either way.
const feistelRounds = 8

// Key is the secret that selects one permutation out of the family. It is
// created once at cluster bootstrap and must never change afterwards, or
// counters already issued would map to different codes.
type Key [32]byte

var (
	// ErrInvalidLength reports a code length outside
	// [MinCounterLength, MaxCounterLength].
	ErrInvalidLength = errors.New("codes: counter code length out of range")
	// ErrCounterOutOfRange reports a counter at or beyond CounterSpace(length),
	// i.e. the code space of that length is exhausted.
	ErrCounterOutOfRange = errors.New("codes: counter outside code space")
)

// CounterSpace returns 62^length, the number of distinct codes of that
// length. It returns 0 for a length outside [MinCounterLength,
// MaxCounterLength] so that no counter is ever considered inside an invalid
// space.
func CounterSpace(length int) uint64 {
	if length < MinCounterLength || length > MaxCounterLength {
		return 0
	}
	s := uint64(1)
	for i := 0; i < length; i++ {
		s *= 62
	}
	return s
}

// CounterCode maps the n-th issued counter to its code of exactly length
// characters: the base62 form of P_key(n), left-padded with '0', where P_key
// is a keyed pseudo-random permutation of [0, 62^length). Being a
// permutation, distinct counters never collide, so the FSM needs no lookup to
// guarantee uniqueness; being pseudo-random, codes do not reveal how many
// links exist or which link was created next.
//
// P_key is the following construction, fixed forever:
//
//   - Let k be the smallest integer with 2^(2k) >= 62^length (k = 3*length
//     for every allowed length) and mask = 2^k - 1.
//   - E(x), for x in [0, 2^(2k)): set L = x >> k, R = x & mask; for round
//     i = 0..7 compute F = SHA-256(key[0:32] || byte(i) || byte(length) ||
//     uint64_big_endian(R)) (a 42-byte message), take the first 8 bytes of
//     the digest as a big-endian uint64 and AND it with mask, then set
//     (L, R) = (R, L XOR F). The result is L<<k | R.
//   - P_key(n) = E(n), re-applied while the value is >= 62^length (cycle
//     walking).
//
// A balanced Feistel network is a bijection on [0, 2^(2k)) whatever the round
// function, and cycle walking restricts a bijection to a bijection on any
// prefix [0, m) of its domain, so P_key is a permutation of [0, 62^length).
// Because 2^(2k) < 1.4 * 62^length here, the walk averages under 1.4 steps.
func CounterCode(key Key, n uint64, length int) (string, error) {
	space := CounterSpace(length)
	if space == 0 {
		return "", fmt.Errorf("counter code length %d not in [%d, %d]: %w",
			length, MinCounterLength, MaxCounterLength, ErrInvalidLength)
	}
	if n >= space {
		return "", fmt.Errorf("counter %d with length %d (space %d): %w",
			n, length, space, ErrCounterOutOfRange)
	}

	f := newFeistel(&key, length, space)
	v := f.encrypt(n)
	for v >= space {
		v = f.encrypt(v)
	}

	var out [MaxCounterLength]byte
	for i := length - 1; i >= 0; i-- {
		out[i] = Base62Alphabet[v%62]
		v /= 62
	}
	return string(out[:length]), nil
}

// feistel carries the round-function message buffer so that only the round
// number and right half are rewritten per round; keeping it a value on the
// stack keeps the hot loop free of heap allocation.
type feistel struct {
	msg  [sha256.Size + 1 + 1 + 8]byte
	k    uint
	mask uint64
}

const (
	msgRound = sha256.Size
	msgLen   = sha256.Size + 1
	msgRight = sha256.Size + 2
)

func newFeistel(key *Key, length int, space uint64) feistel {
	var f feistel
	copy(f.msg[:sha256.Size], key[:])
	f.msg[msgLen] = byte(length)
	f.k = halfBits(space)
	f.mask = 1<<f.k - 1
	return f
}

// halfBits returns the smallest k with 2^(2k) >= space, for space <= 2^62.
func halfBits(space uint64) uint {
	k := uint(1)
	for uint64(1)<<(2*k) < space {
		k++
	}
	return k
}

func (f *feistel) encrypt(x uint64) uint64 {
	l, r := x>>f.k, x&f.mask
	for i := 0; i < feistelRounds; i++ {
		l, r = r, l^f.round(i, r)
	}
	return l<<f.k | r
}

func (f *feistel) round(i int, r uint64) uint64 {
	f.msg[msgRound] = byte(i)
	binary.BigEndian.PutUint64(f.msg[msgRight:], r)
	sum := sha256.Sum256(f.msg[:])
	return binary.BigEndian.Uint64(sum[:8]) & f.mask
}

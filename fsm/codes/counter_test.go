package codes

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

var testKey = Key{
	0x6c, 0x69, 0x6e, 0x6b, 0x72, 0x61, 0x66, 0x74, 0x2d, 0x74, 0x65, 0x73, 0x74, 0x2d, 0x6b, 0x65,
	0x79, 0x2d, 0x30, 0x31, 0x9a, 0x4f, 0x11, 0xe2, 0x03, 0x77, 0xc5, 0x58, 0xbd, 0x20, 0x61, 0xf0,
}

// decodeBase62 is the inverse of the package's padding-and-digits step,
// written independently so bijection tests check values, not just strings.
func decodeBase62(t *testing.T, s string) uint64 {
	t.Helper()
	var v uint64
	for i := 0; i < len(s); i++ {
		d := strings.IndexByte(Base62Alphabet, s[i])
		if d < 0 {
			t.Fatalf("code %q has %q outside the base62 alphabet", s, s[i])
		}
		v = v*62 + uint64(d)
	}
	return v
}

func TestCounterSpace(t *testing.T) {
	tests := []struct {
		length int
		want   uint64
	}{
		{-1, 0},
		{0, 0},
		{1, 62},
		{2, 3844},
		{3, 238328},
		{7, 3521614606208},
		{10, 839299365868340224},
		{11, 0},
	}
	for _, tt := range tests {
		if got := CounterSpace(tt.length); got != tt.want {
			t.Errorf("CounterSpace(%d) = %d, want %d", tt.length, got, tt.want)
		}
	}
}

func TestHalfBitsIsSmallestEvenWidth(t *testing.T) {
	for length := MinCounterLength; length <= MaxCounterLength; length++ {
		space := CounterSpace(length)
		k := halfBits(space)
		if k != uint(3*length) {
			t.Errorf("length %d: halfBits = %d, want %d", length, k, 3*length)
		}
		if uint64(1)<<(2*k) < space || uint64(1)<<(2*k-2) >= space {
			t.Errorf("length %d: 2k = %d is not the smallest even width covering %d", length, 2*k, space)
		}
	}
}

func TestCounterCodeIsBijection(t *testing.T) {
	for _, length := range []int{1, 2, 3} {
		t.Run("length="+strconv.Itoa(length), func(t *testing.T) {
			space := CounterSpace(length)
			seen := make([]bool, space)
			for n := uint64(0); n < space; n++ {
				code, err := CounterCode(testKey, n, length)
				if err != nil {
					t.Fatalf("CounterCode(%d, %d): %v", n, length, err)
				}
				if len(code) != length {
					t.Fatalf("CounterCode(%d, %d) = %q, want %d chars", n, length, code, length)
				}
				v := decodeBase62(t, code)
				if v >= space {
					t.Fatalf("CounterCode(%d, %d) = %q decodes to %d >= %d", n, length, code, v, space)
				}
				if seen[v] {
					t.Fatalf("CounterCode(%d, %d) = %q repeats an earlier code", n, length, code)
				}
				seen[v] = true
			}
		})
	}
}

func TestCounterCodeDependsOnKey(t *testing.T) {
	other := testKey
	other[31] ^= 1
	const length = 3
	same := 0
	for n := uint64(0); n < 10000; n++ {
		a, _ := CounterCode(testKey, n, length)
		b, _ := CounterCode(other, n, length)
		if a == b {
			same++
		}
	}
	// Two independent permutations of 238328 values agree at about
	// 10000/238328 < 1 of these points; a key that is ignored agrees at all.
	if same > 5 {
		t.Errorf("keys differing in one bit agree on %d of 10000 counters", same)
	}
}

func TestCounterCodeDependsOnLength(t *testing.T) {
	// Each length gets its own permutation, so a short code is not a
	// truncation of the long code for the same counter.
	prefix := 0
	for n := uint64(0); n < 1000; n++ {
		a, _ := CounterCode(testKey, n, 6)
		b, _ := CounterCode(testKey, n, 7)
		if strings.HasPrefix(b, a[:3]) || strings.HasSuffix(b, a[3:]) {
			prefix++
		}
	}
	if prefix > 5 {
		t.Errorf("lengths 6 and 7 share a 3-char prefix or suffix on %d of 1000 counters", prefix)
	}
}

// TestCounterCodeHidesOrder fails for an affine map a*n+b mod 62^L (one
// distinct step), for counter+salt (prefix shared almost always, always
// increasing) and for digit-wise substitutions (shared prefixes).
func TestCounterCodeHidesOrder(t *testing.T) {
	const (
		length = 7
		count  = 1000
		start  = 123456789
	)
	space := CounterSpace(length)
	var (
		sharedPrefix int
		increasing   int
		steps        = make(map[uint64]bool)
		prev         string
		prevV        uint64
	)
	for n := uint64(start); n < start+count; n++ {
		code, err := CounterCode(testKey, n, length)
		if err != nil {
			t.Fatal(err)
		}
		v := decodeBase62(t, code)
		if n > start {
			if code[:3] == prev[:3] {
				sharedPrefix++
			}
			if v > prevV {
				increasing++
			}
			steps[(v+space-prevV)%space] = true
		}
		prev, prevV = code, v
	}
	if sharedPrefix > 3 {
		t.Errorf("%d consecutive pairs share their first 3 chars; expected about 0", sharedPrefix)
	}
	if increasing < 400 || increasing > 600 {
		t.Errorf("%d of %d consecutive steps increase; expected about half", increasing, count-1)
	}
	if len(steps) < count-10 {
		t.Errorf("only %d distinct steps between consecutive codes; expected about %d", len(steps), count-1)
	}
}

// TestCounterCodeGolden pins the format: if this fails, codes already
// issued by a running cluster would change meaning. The expected values come
// from a separate Python implementation of the construction documented on
// CounterCode, so they also check that the documentation is complete.
func TestCounterCodeGolden(t *testing.T) {
	tests := []struct {
		key    Key
		n      uint64
		length int
		want   string
	}{
		{Key{}, 0, 1, "3"},
		{Key{}, 0, 7, "KqrGcRm"},
		{testKey, 0, 7, "TnlBcnn"},
		{testKey, 1, 7, "qDo2K8i"},
		{testKey, 839299365868340223, 10, "OyWtHKEnaE"},
	}
	for _, tt := range tests {
		got, err := CounterCode(tt.key, tt.n, tt.length)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("CounterCode(%x.., %d, %d) = %q, want %q", tt.key[:4], tt.n, tt.length, got, tt.want)
		}
	}
}

func TestCounterCodeErrors(t *testing.T) {
	tests := []struct {
		name   string
		n      uint64
		length int
		want   error
	}{
		{"length zero", 0, 0, ErrInvalidLength},
		{"length negative", 0, -3, ErrInvalidLength},
		{"length eleven", 0, 11, ErrInvalidLength},
		{"n equals space", 62, 1, ErrCounterOutOfRange},
		{"n beyond space", 1 << 40, 3, ErrCounterOutOfRange},
		{"n equals space at max length", 839299365868340224, 10, ErrCounterOutOfRange},
		{"n max uint64", ^uint64(0), 10, ErrCounterOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, err := CounterCode(testKey, tt.n, tt.length)
			if !errors.Is(err, tt.want) {
				t.Fatalf("CounterCode(%d, %d) = %q, %v; want error %v", tt.n, tt.length, code, err, tt.want)
			}
			if code != "" {
				t.Errorf("CounterCode returned code %q alongside an error", code)
			}
		})
	}
}

func FuzzCounterCode(f *testing.F) {
	f.Add([]byte("seed"), uint64(0), 1)
	f.Add([]byte{}, uint64(61), 1)
	f.Add([]byte{0xff}, uint64(1)<<59, 10)
	f.Add([]byte("linkraft"), uint64(3521614606207), 7)
	f.Fuzz(func(t *testing.T, keyBytes []byte, n uint64, length int) {
		var key Key
		copy(key[:], keyBytes)
		length = MinCounterLength + int(uint(length)%MaxCounterLength)
		n %= CounterSpace(length)

		code, err := CounterCode(key, n, length)
		if err != nil {
			t.Fatalf("CounterCode(%d, %d): %v", n, length, err)
		}
		if len(code) != length {
			t.Fatalf("CounterCode(%d, %d) = %q, want %d chars", n, length, code, length)
		}
		if v := decodeBase62(t, code); v >= CounterSpace(length) {
			t.Fatalf("CounterCode(%d, %d) = %q is outside the code space", n, length, code)
		}
		again, err := CounterCode(key, n, length)
		if err != nil || again != code {
			t.Fatalf("CounterCode(%d, %d) not deterministic: %q then %q, %v", n, length, code, again, err)
		}
	})
}

func BenchmarkCounterCode(b *testing.B) {
	for _, length := range []int{1, 7, 10} {
		b.Run("length="+strconv.Itoa(length), func(b *testing.B) {
			space := CounterSpace(length)
			b.ReportAllocs()
			var n uint64
			for b.Loop() {
				if _, err := CounterCode(testKey, n%space, length); err != nil {
					b.Fatal(err)
				}
				n++
			}
		})
	}
}

package store

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
	"testing"
)

// benchKey is a link's key as fsm will lay it out: a table byte and a
// 7-character code (DESIGN.md, "Keys").
func benchKey(dst []byte, i uint64) []byte {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	dst = append(dst[:0], 'c')
	x := i*0x9e3779b97f4a7c15 + 1 // spread, so that insertion order is not key order
	for range 7 {
		dst = append(dst, alphabet[x%62])
		x /= 62
	}
	return binary.BigEndian.AppendUint64(dst, i) // unique whatever the spread
}

// benchValue is a link record's size: a URL of 60–90 bytes and ~30 bytes
// of times, counts and ids.
func benchValue(i uint64) []byte {
	v := make([]byte, 100+i%30)
	copy(v, "https://www.example.com/some/path/to/a/page?utm_source=newsletter&id=")
	binary.BigEndian.PutUint64(v[len(v)-8:], i)
	return v
}

// fill commits n records in 1000-record batches and returns the store.
func fill(b *testing.B, n uint64, opts Options) *Store {
	b.Helper()
	s, err := Open(b.TempDir()+"/engine", opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	batch := s.NewBatch()
	var key []byte
	for i := uint64(0); i < n; i++ {
		key = benchKey(key, i)
		batch.Set(key, benchValue(i))
		if (i+1)%1000 == 0 || i == n-1 {
			if err := s.Commit(batch, s.AppliedIndex()+1); err != nil {
				b.Fatal(err)
			}
		}
	}
	return s
}

// BenchmarkCommit: one Raft apply batch of 1000 link records, committed
// with its applied index and no fsync, in a plain and an indexed batch.
// One op is one batch.
func BenchmarkCommit(b *testing.B) {
	for _, indexed := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "indexed"}[indexed]
		b.Run(name, func(b *testing.B) {
			s, err := Open(b.TempDir()+"/engine", Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			batch := s.NewBatch()
			if indexed {
				batch = s.NewIndexedBatch()
			}
			var key []byte
			values := make([][]byte, 1000)
			for i := range values {
				values[i] = benchValue(uint64(i))
			}
			b.ResetTimer()
			var n uint64
			for i := 0; i < b.N; i++ {
				for j := range 1000 {
					key = benchKey(key, n)
					batch.Set(key, values[j])
					n++
				}
				if err := s.Commit(batch, uint64(i+1)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkGet reads link records by key. Hot: 1000 keys, always in the
// block cache. Cold: uniform over 1M records with a 1 MiB block cache, so
// nearly every read misses it and reads a block from the files (which the
// OS's page cache holds on this machine: not a disk read).
func BenchmarkGet(b *testing.B) {
	cases := []struct {
		name    string
		records uint64
		keys    uint64
		cache   int64
	}{
		{"hot", 100_000, 1000, 64 << 20},
		{"cold", 1_000_000, 1_000_000, 1 << 20},
	}
	for _, c := range cases {
		s := fill(b, c.records, Options{BlockCacheBytes: c.cache}) // once, not per b.N
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			var key, buf []byte
			before := s.Stats()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				key = benchKey(key, rng.Uint64N(c.keys))
				var ok bool
				var err error
				buf, ok, err = s.Get(key, buf[:0])
				if err != nil || !ok {
					b.Fatalf("Get: %v, %v", ok, err)
				}
			}
			st := s.Stats()
			b.ReportMetric(float64(st.DiskBytes)/float64(c.records), "disk-B/record")
			hits, misses := st.BlockCacheHits-before.BlockCacheHits, st.BlockCacheMisses-before.BlockCacheMisses
			b.ReportMetric(float64(hits)/float64(hits+misses), "cache-hit-ratio")
		})
	}
}

// BenchmarkStream writes the whole state of 200k link records as a stream
// and installs it in a fresh engine. One op is one full pass.
func BenchmarkStream(b *testing.B) {
	const records = 200_000
	s := fill(b, records, Options{})
	b.Run("write", func(b *testing.B) {
		var size countingWriter
		for i := 0; i < b.N; i++ {
			if _, _, err := s.WriteStream(&size); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(records*b.N)/b.Elapsed().Seconds(), "records/s")
		b.ReportMetric(float64(size)/float64(b.N)/records, "B/record")
	})
	b.Run("read", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			pr, pw := io.Pipe()
			go func() {
				_, _, err := s.WriteStream(pw)
				pw.CloseWithError(err)
			}()
			if _, err := ReadStream(pr, b.TempDir()+"/install", Options{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(records*b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

// BenchmarkOpen: a restart's cost in the engine, 200k records, closed and
// opened again (Raft's replay after it is not included).
func BenchmarkOpen(b *testing.B) {
	s := fill(b, 200_000, Options{})
	dir := s.dir
	for i := 0; i < b.N; i++ {
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		var err error
		if s, err = Open(dir, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	s.Close()
}

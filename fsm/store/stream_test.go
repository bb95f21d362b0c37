package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// A stream installed elsewhere is the same state at the same index, and
// streams again to the same bytes: a follower and a restored backup hold
// exactly what the leader held.
func TestStreamRoundTrip(t *testing.T) {
	s, dir := openTemp(t)
	for i := range 50 {
		sets := map[string]string{}
		for j := range 40 {
			sets[fmt.Sprintf("l/%03d/%02d", i, j)] = fmt.Sprintf("https://example.com/%d/%d", i, j)
		}
		if i > 0 {
			sets[fmt.Sprintf("l/%03d/%02d", i-1, i%40)] = "" // deletes leave nothing in the stream
		}
		commit(t, s, uint64(10+i), sets)
	}
	var first bytes.Buffer
	applied, records, err := s.WriteStream(&first)
	if err != nil {
		t.Fatal(err)
	}
	if applied != 59 || records != 50*40-49 {
		t.Fatalf("stream at %d with %d records, want 59 and %d", applied, records, 50*40-49)
	}
	copyDir := dir + ".copy"
	got, err := ReadStream(bytes.NewReader(first.Bytes()), copyDir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(copyDir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got != 59 || c.AppliedIndex() != 59 {
		t.Errorf("installed at %d, opens at %d; want 59", got, c.AppliedIndex())
	}
	var second bytes.Buffer
	if _, _, err := c.WriteStream(&second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Errorf("the installed copy streams %d bytes unlike the original's %d", second.Len(), first.Len())
	}
	if v, ok := getString(t, c, "l/049/39"); v != "https://example.com/49/39" || !ok {
		t.Errorf("l/049/39 = %q, %v in the copy", v, ok)
	}
}

// streamOf encodes records in the given order, sorted or not.
func streamOf(applied uint64, keys ...string) []byte {
	var buf bytes.Buffer
	sw := newStreamWriter(&buf, applied)
	for _, k := range keys {
		sw.record([]byte(k), []byte("v:"+k))
	}
	sw.end()
	return buf.Bytes()
}

// A stream that is not one WriteStream wrote is refused and leaves no
// engine behind.
func TestReadStreamRefusesCorruptStreams(t *testing.T) {
	good := streamOf(9, "l/a", "l/b", "l/c")
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 1
	var miscounted bytes.Buffer
	sw := newStreamWriter(&miscounted, 9)
	sw.record([]byte("l/a"), []byte("v"))
	sw.n++
	sw.end()
	newer := bytes.Clone(good)
	newer[len(streamMagic)] = streamVersion + 1
	tests := []struct {
		name   string
		stream []byte
	}{
		{"a flipped bit", flipped},
		{"truncated", good[:len(good)-6]},
		{"without its checksum", good[:len(good)-4]},
		{"empty", nil},
		{"another magic", append([]byte("LKSTORX\n"), good[len(streamMagic):]...)},
		{"a newer version", newer},
		{"keys out of order", streamOf(9, "l/b", "l/a")},
		{"a key twice", streamOf(9, "l/a", "l/a")},
		{"a key that is a prefix of the one before", streamOf(9, "l/ab", "l/a")},
		{"a reserved key", streamOf(9, "\x00a", "l/a")},
		{"a count that does not match", miscounted.Bytes()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "engine")
			if _, err := ReadStream(bytes.NewReader(tt.stream), dir, Options{}); err == nil {
				t.Fatal("ReadStream succeeded")
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s left behind: %v", dir, err)
			}
		})
	}
	dir := filepath.Join(t.TempDir(), "engine")
	if applied, err := ReadStream(bytes.NewReader(good), dir, Options{}); err != nil || applied != 9 {
		t.Errorf("the good stream: %d, %v", applied, err)
	}
}

// Installing a stream holds a bounded amount of memory, not the state:
// 256 MiB of records pass through a reader whose heap grows by far less.
func TestReadStreamHoldsBoundedMemory(t *testing.T) {
	const valueSize, bound = 16 << 10, 64 << 20
	records := 16 << 10 // 256 MiB
	if testing.Short() {
		records = 4 << 10
	}
	pr, pw := io.Pipe()
	go func() {
		sw := newStreamWriter(pw, 77)
		key, value := make([]byte, 12), make([]byte, valueSize)
		for i := range records {
			copy(key, "l/")
			binary.BigEndian.PutUint64(key[2:], uint64(i))
			for j := 0; j < len(value); j += 8 {
				binary.LittleEndian.PutUint64(value[j:], uint64(i*j)) // compressible
			}
			sw.record(key, value)
		}
		pw.CloseWithError(sw.end())
	}()
	peak := watchHeap(t)
	applied, err := ReadStream(pr, filepath.Join(t.TempDir(), "engine"), Options{BlockCacheBytes: 2 << 20, MemTableBytes: 2 << 20})
	grown := peak()
	if err != nil || applied != 77 {
		t.Fatalf("ReadStream: %d, %v", applied, err)
	}
	t.Logf("%d MiB streamed; heap grew by at most %.1f MiB", records*valueSize>>20, float64(grown)/(1<<20))
	if grown > bound {
		t.Errorf("heap grew by %d MiB while streaming %d MiB; bound %d MiB", grown>>20, records*valueSize>>20, bound>>20)
	}
}

// watchHeap samples the live and unswept heap until the returned function
// is called, which reports the largest growth over the start.
func watchHeap(t *testing.T) func() uint64 {
	t.Helper()
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var (
		mu   sync.Mutex
		max  uint64
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if v := read(); v > base {
					mu.Lock()
					max = maxOf(max, v-base)
					mu.Unlock()
				}
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return max
	}
}

func maxOf(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// makeEngine leaves a closed engine in dir at index, holding key "l/<index>".
func makeEngine(t *testing.T, dir string, index uint64) {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, index, map[string]string{fmt.Sprintf("l/%d", index): "x"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// Whatever step of a swap a crash stops at, Open finds one whole engine:
// the new one once the old one has left dir, else the old one.
func TestOpenFinishesASwapCutShort(t *testing.T) {
	tests := []struct {
		name         string
		dir, install uint64 // the engines' indexes, 0: none
		old          uint64
		partial      bool // the install is cut short (no engine yet)
		want         uint64
	}{
		{name: "between the two renames", old: 1, install: 2, want: 2},
		{name: "before the first rename", dir: 1, install: 2, want: 1},
		{name: "during the install", dir: 1, partial: true, want: 1},
		{name: "before the old engine is removed", dir: 2, old: 1, want: 2},
		{name: "a new node's first install", partial: true, want: 0},
		{name: "the install lost after the first rename", old: 1, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "engine")
			// dir first: an Open of dir would finish the swap the others set up.
			for _, e := range []struct {
				path  string
				index uint64
			}{{dir, tt.dir}, {InstallDir(dir), tt.install}, {oldDir(dir), tt.old}} {
				if e.index > 0 {
					makeEngine(t, e.path, e.index)
				}
			}
			if tt.partial {
				os.MkdirAll(InstallDir(dir), 0o700)
				os.WriteFile(filepath.Join(InstallDir(dir), "000001.sst"), []byte("half"), 0o600)
			}
			s, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.AppliedIndex() != tt.want {
				t.Errorf("opened at %d, want %d", s.AppliedIndex(), tt.want)
			}
			for _, left := range []string{InstallDir(dir), oldDir(dir)} {
				if _, err := os.Stat(left); err == nil {
					t.Errorf("%s is left beside the engine", filepath.Base(left))
				}
			}
		})
	}
}

// The install flow end to end: a stream read beside a live engine, the
// engine closed, swapped, reopened at the stream's index.
func TestSwapInstallsAStream(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "engine")
	makeEngine(t, dir, 5)
	applied, err := ReadStream(bytes.NewReader(streamOf(40, "l/x")), InstallDir(dir), Options{})
	if err != nil || applied != 40 {
		t.Fatalf("ReadStream: %d, %v", applied, err)
	}
	if err := Swap(dir); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, hasOld := getString(t, s, "l/5")
	if v, _ := getString(t, s, "l/x"); s.AppliedIndex() != 40 || v != "v:l/x" || hasOld {
		t.Errorf("after the swap: applied %d, l/x = %q, l/5 present %v", s.AppliedIndex(), v, hasOld)
	}
}

// FuzzDecodeStream: any bytes decode without a panic, and what decodes is
// exactly what the writer writes for those records (bytes after the
// checksum aside): one stream per state.
func FuzzDecodeStream(f *testing.F) {
	f.Add(streamOf(9, "l/a", "l/b", "l/c"))
	f.Add(streamOf(0))
	f.Add(streamOf(1<<40, "c", "cab", "cb", "x\xff\xff"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		var keys, values [][]byte
		applied, err := decodeStream(bytes.NewReader(stream), func(key, value []byte) error {
			keys, values = append(keys, bytes.Clone(key)), append(values, bytes.Clone(value))
			return nil
		})
		if err != nil {
			return
		}
		var again bytes.Buffer
		sw := newStreamWriter(&again, applied)
		for i := range keys {
			sw.record(keys[i], values[i])
		}
		if err := sw.end(); err != nil {
			t.Fatal(err)
		}
		if again.Len() > len(stream) || !bytes.Equal(again.Bytes(), stream[:again.Len()]) {
			t.Fatalf("decoded %q, which encodes to %q", stream, again.Bytes())
		}
	})
}

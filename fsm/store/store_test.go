package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "engine")
	s, err := Open(dir, Options{BlockCacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

// commit writes sets (key → value, "" value: delete) at index.
func commit(t testing.TB, s *Store, index uint64, sets map[string]string) {
	t.Helper()
	b := s.NewBatch()
	defer b.Close()
	for k, v := range sets {
		var err error
		if v == "" {
			err = b.Delete([]byte(k))
		} else {
			err = b.Set([]byte(k), []byte(v))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit(b, index); err != nil {
		t.Fatal(err)
	}
}

func getString(t testing.TB, s *Store, key string) (string, bool) {
	t.Helper()
	v, ok, err := s.Get([]byte(key), nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ok
}

// A restart finds what was committed and the index it was committed at,
// so Raft replays only what came after.
func TestCommitSurvivesReopen(t *testing.T) {
	s, dir := openTemp(t)
	if s.AppliedIndex() != 0 {
		t.Fatalf("a new engine has applied %d, want 0", s.AppliedIndex())
	}
	commit(t, s, 3, map[string]string{"l/abc": "one", "l/abd": "two"})
	commit(t, s, 7, map[string]string{"l/abd": "", "l/abe": "three"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.AppliedIndex() != 7 {
		t.Errorf("applied %d after reopen, want 7", s.AppliedIndex())
	}
	for key, want := range map[string]string{"l/abc": "one", "l/abd": "", "l/abe": "three"} {
		got, ok := getString(t, s, key)
		if got != want || ok != (want != "") {
			t.Errorf("%s = %q (found %v), want %q", key, got, ok, want)
		}
	}
}

// An entry at or below the applied index is already in the engine: a
// replay must not apply it twice, so Commit refuses it and writes nothing.
func TestCommitRefusesAnAppliedIndex(t *testing.T) {
	s, _ := openTemp(t)
	commit(t, s, 10, map[string]string{"c/x": "1"})
	for _, index := range []uint64{10, 9, 1} {
		b := s.NewBatch()
		b.Set([]byte("c/x"), []byte("replayed"))
		err := s.Commit(b, index)
		b.Close()
		if !errors.Is(err, ErrStale) {
			t.Errorf("commit at %d after 10: %v, want ErrStale", index, err)
		}
	}
	if got, _ := getString(t, s, "c/x"); got != "1" {
		t.Errorf("c/x = %q after refused commits, want 1", got)
	}
	if s.AppliedIndex() != 10 {
		t.Errorf("applied %d, want 10", s.AppliedIndex())
	}
}

// The store's own keys (the zero-byte prefix) cannot be written by a batch.
func TestBatchRefusesReservedKeys(t *testing.T) {
	s, _ := openTemp(t)
	b := s.NewBatch()
	defer b.Close()
	for _, key := range [][]byte{nil, {}, appliedKey, formatKey, {0, 'x'}} {
		if err := b.Set(key, []byte("v")); !errors.Is(err, ErrReservedKey) {
			t.Errorf("Set(%q): %v, want ErrReservedKey", key, err)
		}
		if err := b.Delete(key); !errors.Is(err, ErrReservedKey) {
			t.Errorf("Delete(%q): %v, want ErrReservedKey", key, err)
		}
	}
}

func TestScanPrefixFrom(t *testing.T) {
	s, _ := openTemp(t)
	commit(t, s, 1, map[string]string{
		"a/1": "x", "w/1/a": "1", "w/1/b": "2", "w/1/c": "3", "w/2/a": "4", "w/\xff": "5", "z": "6",
	})
	tests := []struct {
		prefix, from string
		limit        int
		want         []string
	}{
		{"w/1/", "", 0, []string{"w/1/a", "w/1/b", "w/1/c"}},
		{"w/1/", "w/1/b", 0, []string{"w/1/b", "w/1/c"}},
		{"w/1/", "w/1/bb", 0, []string{"w/1/c"}},
		{"w/1/", "w/0", 0, []string{"w/1/a", "w/1/b", "w/1/c"}}, // from before the prefix: its start
		{"w/", "", 2, []string{"w/1/a", "w/1/b"}},
		{"w/", "", 0, []string{"w/1/a", "w/1/b", "w/1/c", "w/2/a", "w/\xff"}},
		{"w/\xff", "", 0, []string{"w/\xff"}},
		{"q/", "", 0, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q from %q", tt.prefix, tt.from), func(t *testing.T) {
			var got []string
			err := s.Scan([]byte(tt.prefix), []byte(tt.from), func(k, _ []byte) bool {
				got = append(got, string(k))
				return tt.limit == 0 || len(got) < tt.limit
			})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// A database written by a newer build (a higher key format) is refused,
// not misread.
func TestOpenRefusesNewerFormat(t *testing.T) {
	s, dir := openTemp(t)
	var v [8]byte
	if err := s.db.Set(formatKey, binary.BigEndian.AppendUint64(v[:0], formatVersion+1), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(dir, Options{}); err == nil {
		s.Close()
		t.Fatal("Open of a newer format succeeded")
	}
}

// A checkpoint is the engine at the index it returns, unaffected by
// later commits.
func TestCheckpointOpensAtItsIndex(t *testing.T) {
	s, dir := openTemp(t)
	commit(t, s, 1, map[string]string{"l/a": "1"})
	commit(t, s, 2, map[string]string{"l/b": "2"})
	cp := dir + ".checkpoint"
	index, err := s.Checkpoint(cp)
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, 3, map[string]string{"l/a": "", "l/c": "3"})
	c, err := Open(cp, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if index != 2 || c.AppliedIndex() != 2 {
		t.Errorf("checkpoint at %d opens at %d, want 2 and 2", index, c.AppliedIndex())
	}
	for key, want := range map[string]bool{"l/a": true, "l/b": true, "l/c": false} {
		if _, ok := getString(t, c, key); ok != want {
			t.Errorf("checkpoint has %s: %v, want %v", key, ok, want)
		}
	}
}

// A snapshot reads the state of its index while commits go on.
func TestSnapshotReadsItsIndex(t *testing.T) {
	s, _ := openTemp(t)
	commit(t, s, 5, map[string]string{"l/a": "1", "l/b": "2"})
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Close()
	commit(t, s, 6, map[string]string{"l/a": "", "l/c": "3"})
	var keys []string
	sn.Scan([]byte("l/"), nil, func(k, _ []byte) bool { keys = append(keys, string(k)); return true })
	if sn.AppliedIndex() != 5 || fmt.Sprint(keys) != "[l/a l/b]" {
		t.Errorf("snapshot at %d holds %q, want 5 and [l/a l/b]", sn.AppliedIndex(), keys)
	}
}

// Get appends to the caller's buffer: a reused buffer is not reallocated.
func TestGetAppendsToTheBuffer(t *testing.T) {
	s, _ := openTemp(t)
	commit(t, s, 1, map[string]string{"l/a": "https://example.com/"})
	buf := make([]byte, 0, 64)
	v, ok, err := s.Get([]byte("l/a"), buf[:0])
	if err != nil || !ok || string(v) != "https://example.com/" || &v[0] != &buf[:1][0] {
		t.Errorf("Get = %q, %v, %v; want the value in the caller's buffer", v, ok, err)
	}
	if v, ok, _ := s.Get([]byte("l/zz"), buf[:0]); ok || len(v) != 0 {
		t.Errorf("Get of an absent key = %q, %v", v, ok)
	}
}

// Within one apply batch, a later entry reads what an earlier one wrote
// (an indexed batch); nothing is visible outside it before Commit.
func TestIndexedBatchReadsItsOwnWrites(t *testing.T) {
	s, _ := openTemp(t)
	commit(t, s, 1, map[string]string{"c/a": "old", "c/b": "kept"})
	b := s.NewIndexedBatch()
	defer b.Close()
	b.Set([]byte("c/a"), []byte("new"))
	b.Delete([]byte("c/b"))
	for key, want := range map[string]string{"c/a": "new", "c/b": ""} {
		v, ok, err := b.Get([]byte(key), nil)
		if err != nil || string(v) != want || ok != (want != "") {
			t.Errorf("batch Get(%s) = %q, %v, %v; want %q", key, v, ok, err, want)
		}
	}
	b.Set([]byte("c/c"), []byte("added"))
	var scanned []string
	if err := b.Scan([]byte("c/"), nil, func(k, v []byte) bool {
		scanned = append(scanned, string(k)+"="+string(v))
		return true
	}); err != nil || strings.Join(scanned, " ") != "c/a=new c/c=added" {
		t.Errorf("batch Scan = %v, %v; want the batch's writes over the engine's", scanned, err)
	}
	if v, _ := getString(t, s, "c/a"); v != "old" {
		t.Errorf("c/a = %q outside the batch before Commit, want old", v)
	}
	if err := s.Commit(b, 2); err != nil {
		t.Fatal(err)
	}
	if v, _ := getString(t, s, "c/a"); v != "new" {
		t.Errorf("c/a = %q after Commit, want new", v)
	}
	if _, _, err := s.NewBatch().Get([]byte("c/a"), nil); err == nil {
		t.Error("Get on a plain batch succeeded")
	}
}

// A checkpoint taken while another goroutine commits holds exactly the
// batches up to the index it returns.
func TestCheckpointWhileCommitting(t *testing.T) {
	s, dir := openTemp(t)
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() {
		b := s.NewBatch()
		defer b.Close()
		for i := uint64(1); i < 1_000_000; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			b.Set([]byte(fmt.Sprintf("k/%07d", i)), []byte("v"))
			if err := s.Commit(b, i); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var last uint64
	for n := range 3 {
		for s.AppliedIndex() < last+100 {
			time.Sleep(time.Millisecond)
		}
		cp := fmt.Sprintf("%s.cp%d", dir, n)
		index, err := s.Checkpoint(cp)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Open(cp, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var keys uint64
		c.Scan([]byte("k/"), nil, func(_, _ []byte) bool { keys++; return true })
		if c.AppliedIndex() != index || keys != index {
			t.Errorf("checkpoint at %d opens at %d with %d batches", index, c.AppliedIndex(), keys)
		}
		c.Close()
		last = index
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s.AppliedIndex() <= last {
		t.Errorf("no commit after the last checkpoint (at %d): the test did not interleave", last)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestCommitKeepsEachKeysWritesInOrder: Commit hands Pebble a batch's
// writes in key order; the state is the one the batch's own order gives,
// where a key written several times in one batch ends as its last write
// left it (sets, deletes, count additions), in plain and indexed batches.
func TestCommitKeepsEachKeysWritesInOrder(t *testing.T) {
	s, _ := openTemp(t)
	rng := rand.New(rand.NewPCG(1, 2))
	values := map[string]string{} // the model: what the batches' order gives
	counts := map[string]uint32{}
	for index := uint64(1); index <= 20; index++ {
		b := s.NewBatch()
		if index%2 == 0 {
			b = s.NewIndexedBatch()
		}
		for range 300 {
			n := rng.IntN(40)
			key := fmt.Sprintf("s/%02d", n)
			switch op := rng.IntN(3); {
			case op == 0:
				delete(values, key)
				b.Delete([]byte(key))
			default:
				v := fmt.Sprintf("v%d", rng.IntN(1000))
				values[key] = v
				b.Set([]byte(key), []byte(v))
			}
			key = fmt.Sprintf("n/%02d", n)
			switch op := rng.IntN(4); {
			case op == 0:
				delete(counts, key)
				b.Delete([]byte(key))
			case op == 1:
				counts[key] = uint32(n)
				b.Set([]byte(key), binary.BigEndian.AppendUint32(nil, uint32(n)))
			default:
				counts[key]++
				b.AddCount([]byte(key), 1)
			}
		}
		if err := s.Commit(b, index); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	for n := range 40 {
		key := fmt.Sprintf("s/%02d", n)
		if got, ok := getString(t, s, key); got != values[key] || ok != (values[key] != "") {
			t.Errorf("%s = %q (found %v), want %q", key, got, ok, values[key])
		}
		key = fmt.Sprintf("n/%02d", n)
		want, exists := counts[key]
		got, ok := getString(t, s, key)
		if ok != exists || (ok && binary.BigEndian.Uint32([]byte(got)) != want) {
			t.Errorf("%s = %x (found %v), want %d (exists %v)", key, got, ok, want, exists)
		}
	}
}

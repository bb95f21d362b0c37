package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"
)

// TestCountsAddUp: additions to a count sum up whatever reads them (the
// batch that made them, the store, a view, a stream installed elsewhere)
// and after the engine compacts them; a Set writes the count whole and
// later additions add to it; the sum saturates.
func TestCountsAddUp(t *testing.T) {
	s, _ := openTemp(t)
	count := func(v []byte, found bool, err error) uint32 {
		t.Helper()
		if err != nil || !found || len(v) != 4 {
			t.Fatalf("count: %x, %v, %v", v, found, err)
		}
		return binary.BigEndian.Uint32(v)
	}
	b := s.NewIndexedBatch()
	defer b.Close()
	for _, n := range []uint64{1, 2, 3} {
		if err := b.AddCount([]byte("h/a"), n); err != nil {
			t.Fatal(err)
		}
	}
	if got := count(b.Get([]byte("h/a"), nil)); got != 6 {
		t.Errorf("within the batch: %d, want 6", got)
	}
	if err := s.Commit(b, 1); err != nil {
		t.Fatal(err)
	}
	b.AddCount([]byte("h/a"), 4)
	b.Set([]byte("h/b"), binary.BigEndian.AppendUint32(nil, math.MaxUint32-1))
	b.AddCount([]byte("h/b"), 5)
	if err := s.Commit(b, 2); err != nil {
		t.Fatal(err)
	}
	if got := count(s.Get([]byte("h/a"), nil)); got != 10 {
		t.Errorf("committed: %d, want 10", got)
	}
	if got := count(s.Get([]byte("h/b"), nil)); got != math.MaxUint32 {
		t.Errorf("saturated: %d, want %d", got, uint32(math.MaxUint32))
	}
	if err := s.db.Compact(context.Background(), []byte("h/"), []byte("h0"), true); err != nil {
		t.Fatal(err)
	}
	if got := count(s.Get([]byte("h/a"), nil)); got != 10 {
		t.Errorf("after a compaction: %d, want 10", got)
	}
	var stream bytes.Buffer
	if _, _, err := s.WriteStream(&stream); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "installed")
	if _, err := ReadStream(&stream, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	installed, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer installed.Close()
	if got := count(installed.Get([]byte("h/a"), nil)); got != 10 {
		t.Errorf("installed from a stream: %d, want 10", got)
	}
}

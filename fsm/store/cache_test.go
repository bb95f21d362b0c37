package store

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnginesShareACache: two engines opened with one Cache read through
// it together (what one reads is counted in the other's cache size), and
// each keeps working after the other closes and the cache's maker lets go.
func TestEnginesShareACache(t *testing.T) {
	cache := NewCache(4 << 20)
	var engines []*Store
	for i, name := range []string{"a", "b"} {
		s, err := Open(filepath.Join(t.TempDir(), name), Options{Cache: cache})
		if err != nil {
			t.Fatal(err)
		}
		sets := map[string]string{"k/" + name: name}
		for j := range 2000 * (1 - i) { // a has 2000 more keys, b one
			sets[fmt.Sprintf("k/%s%05d", name, j)] = strings.Repeat("v", 100)
		}
		commit(t, s, 1, sets)
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
		engines = append(engines, s)
	}
	cache.Release()
	if _, ok := getString(t, engines[1], "k/b"); !ok {
		t.Fatal("b lost its key")
	}
	alone := engines[1].Stats().BlockCacheBytes
	if err := engines[0].Scan([]byte("k/"), nil, func(_, _ []byte) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if a, b := engines[0].Stats().BlockCacheBytes, engines[1].Stats().BlockCacheBytes; b <= alone || a != b {
		t.Fatalf("b's cache held %d bytes, then %d after a read 2000 keys (a's: %d): not one cache", alone, b, a)
	}
	engines[0].Close()
	if v, ok := getString(t, engines[1], "k/b"); !ok || v != "b" {
		t.Errorf("the engine left open reads %q, %v", v, ok)
	}
	engines[1].Close()
}

package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercent(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 100},
		{8 << 20, 100},  // small heaps keep Go's default
		{32 << 20, 100}, // the headroom equals live data
		{64 << 20, 50},  // half of live data is the headroom
		{256 << 20, 12}, // a million links: 32 MiB of growth
		{4 << 30, 10},   // never below 10 %
		{1 << 50, 10},
	} {
		if got := gcPercent(c.live); got != c.want {
			t.Errorf("gcPercent(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}

// gogc reads the collector's current GOGC without changing it.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// TestTuneGCFollowsTheLiveHeap holds a large live heap and checks that the
// target is lowered after collections, and that stop ends the tuning.
func TestTuneGCFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	stop := tuneGC()
	held := make([]byte, 256<<20) // noscan, like the link state
	for i := range held {
		held[i] = 1
	}
	// The hook runs on the finalizer goroutine after each collection.
	for i := 0; i < 100 && gogc() > 15; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := gogc(); got > 15 {
		t.Errorf("GOGC with 256 MiB live: %d, want about 12", got)
	}
	stop()
	debug.SetGCPercent(50)
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := gogc(); got != 50 {
		t.Errorf("GOGC changed after stop: %d, want 50", got)
	}
	runtime.KeepAlive(held)
}

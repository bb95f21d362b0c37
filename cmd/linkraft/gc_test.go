package main

import "testing"

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

package main

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// gcHeadroom is how much the heap may grow past live data between
// collections once the data set is large. Go's default (GOGC=100) lets it
// grow by as much as is live, so a node holding 200 MiB of links would use
// 400 MiB. Nearly all of a node's live heap is the link state, which holds
// no pointers (see fsm/DESIGN.md): a collection marks little, whatever the
// number of links, so collecting more often costs little CPU.
const gcHeadroom = 32 << 20

// gcPercent is the GOGC value that gives about gcHeadroom of growth for
// live bytes of live heap: never more than Go's default of 100, never less
// than 10.
func gcPercent(live uint64) int {
	if live == 0 {
		return 100
	}
	return int(min(100, max(10, 100*gcHeadroom/live)))
}

// tuneGC sets the collector's target from the live heap every few seconds
// until done is closed. An operator's GOGC wins: then it does nothing.
func tuneGC(done <-chan struct{}) {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		metrics.Read(live)
		if live[0].Value.Kind() == metrics.KindUint64 {
			debug.SetGCPercent(gcPercent(live[0].Value.Uint64()))
		}
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

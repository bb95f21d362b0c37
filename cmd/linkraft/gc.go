package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
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

// tuneGC sets the collector's target after every collection, from the
// live heap that collection found, until the returned stop is called. An
// operator's GOGC wins: then it does nothing.
//
// The hook is an object that is unreachable as soon as it is made: its
// finalizer runs after each collection and makes the next one. Retuning
// on a timer would lag a bulk import, which can grow the live heap by
// hundreds of megabytes within a second.
func tuneGC() (stop func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	var stopped atomic.Bool
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	current := 100
	var arm func()
	arm = func() {
		runtime.SetFinalizer(&gcHook{}, func(*gcHook) {
			if stopped.Load() {
				return
			}
			metrics.Read(live)
			if live[0].Value.Kind() == metrics.KindUint64 {
				if p := gcPercent(live[0].Value.Uint64()); p != current {
					debug.SetGCPercent(p)
					current = p
				}
			}
			arm()
		})
	}
	arm()
	return func() { stopped.Store(true) }
}

// gcHook has a pointer so that it is not a tiny allocation, whose
// finalizer might never run.
type gcHook struct{ _ *byte }

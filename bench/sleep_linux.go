//go:build linux

package bench

import (
	"syscall"
	"time"
)

// preciseSleep sleeps for d with nanosleep(2), which wakes within about
// 0.1 ms: Go's timers can wake a millisecond late on Linux, which would
// make every open-loop send late.
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // EINTR: the caller checks the time again
}

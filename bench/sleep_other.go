//go:build !linux

package bench

import "time"

// preciseSleep sleeps for d; only Linux has a more precise version.
func preciseSleep(d time.Duration) { time.Sleep(d) }

//go:build race

package httpd

// raceEnabled: the test binary runs under the race detector, which
// allocates on its own and drops values put in a sync.Pool at random, so
// counting allocations means nothing.
const raceEnabled = true

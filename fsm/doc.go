// Package fsm owns linkraft's replicated state: the link map, the per-length
// code counters and the permutation key, the live links of each target URL
// (for dedupe), click counts with the per-node batch sequence numbers that
// make click flushes exactly-once, tombstones of deleted codes, and the
// idempotency window of recent create requests.
//
// It also owns the binary encoding of the commands that change that state and
// of snapshots. Everything here is deterministic: the same committed commands
// produce the same state and byte-identical snapshots on every node. There are
// no clocks, files or network calls in this package; the leader's clock
// travels inside each command.
package fsm

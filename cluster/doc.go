// Package cluster owns everything that makes one linkraft process a member
// of a replicated service: the Raft instance and its storage (raft-boltdb for
// the log and stable store, a file snapshot store), the transport, the write
// path that batches concurrent creates into single log entries, the per-node
// click aggregation that flushes through Raft exactly once, and the leader's
// housekeeping (the code key, purging expired links).
//
// Reads do not pass through this package: callers read the fsm.FSM directly.
// See DESIGN.md for the flows and the reasons behind them.
package cluster

// Package codes owns every rule that turns an input into a short code or a
// dedupe key: the keyed counter permutation, the content hash, the URL
// canonical form and the reserved-word list.
//
// Everything here runs inside the Raft FSM Apply, on every replica, for the
// lifetime of the log. The package is therefore pure: no clocks, no I/O, no
// randomness and no mutable package state, and each algorithm is specified
// in its comments precisely enough to be re-implemented byte for byte.
// Changing any output for an existing input is a data-format change, not a
// refactor: old log entries would replay to different codes.
package codes

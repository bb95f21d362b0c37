// Package store is the on-disk engine under the replicated state: the only
// package of fsm that reads or writes files. It owns one Pebble database
// per node, the Raft index applied to it (written in the same batch as the
// changes of that index, so that after any crash the two agree), the
// format version of its keys, and the versioned stream of its contents that
// a follower installs and a backup keeps.
//
// It knows nothing of links: fsm lays out the keys (fsm/store/DESIGN.md)
// and decides what each Raft entry changes; store makes a batch of those
// changes durable as one unit, serves reads, and moves the whole state in
// and out.
package store

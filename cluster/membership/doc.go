// Package membership owns who is in the Raft configuration: adding a
// server (as a learner that the leader promotes once it has caught up, or
// as a non-voter that remains one), promoting, removing for good (the
// removal records that keep a removed server out) and handing leadership
// over; and the leader duties that keep the configuration in order: the
// promoter, the reconciliation with gossip, and the registry of servers'
// HTTP addresses.
//
// It holds no Raft of its own: it changes the configuration through a
// small Raft interface (the part of *raft.Raft it uses, shaped like
// raft-autopilot's), writes its records through a Proposer, asks other
// servers through Peers and reads gossip through Gossip, so its refusal
// rules are tested against fakes. Package cluster wires it to the node.
// DESIGN.md gives the rules that keep the configuration safe.
package membership

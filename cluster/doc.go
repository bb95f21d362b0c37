// Package cluster makes one linkraft process a member of a replicated
// service. It owns:
//
//   - Raft (hashicorp/raft) and its storage: raft-boltdb for the log and
//     stable store, a file snapshot store, and the transport with mutual TLS
//     from the cluster key (package secure);
//   - the write path: creates batched into shared log entries, deletes,
//     backup and restore;
//   - clicks: each node's aggregation and its exactly-once flush through
//     the leader (package clicks; this package sends its batches);
//   - reads that must not miss an acknowledged write: Lookup, built on
//     ReadIndex;
//   - leadership: the duties a leader starts and stops with Raft's
//     notifications (the code key, membership reconciliation, purges);
//   - membership: memberlist discovery, bootstrap-expect, graceful leave,
//     a removed server's retirement, and offline recovery of a cluster
//     that lost quorum; join, promotion, removal and reconciliation are
//     package membership's, wired to the node here;
//   - the node-to-node protocol, both ends (with package wire): the
//     handlers and the HTTP server on the cluster port, which the stream
//     layer of package secure shares between Raft and internal HTTP behind
//     mutual TLS, the client, and the forwarding of public writes to the
//     leader.
//
// The state itself is package fsm's; callers read it directly through
// Node.FSM. HTTP for clients is package httpd's. DESIGN.md gives the flows
// and the reasons behind them.
package cluster

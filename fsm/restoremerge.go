package fsm

import (
	"fmt"
	"io"
	"maps"
	"slices"
)

// A restore replaces the whole state with a backup's, but it must not take
// back what the cluster has already handed out: a code created after the
// backup was taken lives on in printed links, QR codes and bookmarks, and
// handing it out again would send their holders to a stranger's target.
//
// So the leader merges, into the backup it is about to install, what the
// current state has handed out, and gives Raft the merged snapshot: every
// node installs those same bytes, and Apply stays a function of the log
// alone. The merge reads the current state only; callers make sure no
// create is applied between the merge and the install.

// KeepHandedOut merges into backup what this FSM's state has handed out
// (see keepHandedOut). backup must not be in use elsewhere.
func (f *FSM) KeepHandedOut(backup *Snapshot) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	keepHandedOut(backup.s, f.s)
}

// keepHandedOut changes next, the state a restore installs, so that it never
// hands out again what cur, the state it replaces, has handed out:
//
//   - each code length's counter is the larger of the two, so the counter
//     walk does not revisit values cur used (codes it skips are fine);
//   - every code cur holds, live or tombstoned, that next has no live link
//     for becomes a tombstone in next, which covers custom, hash and
//     imported codes and codes cur made under another key;
//   - the last link id is the larger of the two, since ids only grow;
//   - a backup of a cluster that never initialised its key takes cur's key,
//     so creates work at once after the restore (the cluster id is
//     recordRestore's);
//   - API keys are those of both, less every key either one revoked: a
//     restore neither locks out a key made since the backup (the initial
//     admin key of a node restored into, above all) nor brings back one
//     revoked since;
//   - the audit log is cur's: it records what happened in this cluster;
//     the level the cluster was raised to is the higher of the two (a
//     raised backup holds what only raised builds read);
//   - the certificates and the ACME account are cur's: their keys are
//     sealed with this cluster's key, and they are for the names this
//     cluster serves now;
//   - the removed servers are cur's, and next forgets their HTTP
//     addresses: the membership is this cluster's, and a restore must not
//     let a server it removed back in;
//   - the registered domains are those of both, next's settings first, so
//     a host the cluster serves does not fall back to the default domain;
//   - a webhook both hold keeps cur's registration, outbox and numbering:
//     its receiver has had cur's events up to the acknowledgement, which
//     next's outbox would send again, and a number delivered once must
//     never name another event (it is the delivery's id).
//
// Everything else is next's: links, targets, clicks, idempotency records,
// servers, webhooks only one of them holds. A code live in next stays live even when cur deleted it: the
// restore brings back the link it named, not another one.
//
// The result depends only on the two states (map order decides nothing),
// so it is the same whoever computes it.
func keepHandedOut(next, cur *state) {
	for length, n := range cur.counters {
		next.counters[length] = max(next.counters[length], n)
	}
	next.lastID = max(next.lastID, cur.lastID)
	if !next.hasKey && cur.hasKey {
		next.hasKey, next.key = true, cur.key
	}
	cur.links.recs.scan(true, func(r *record) bool {
		if r.live() {
			next.retire(r.code)
		}
		return true
	})
	// A failure to read cur's engine is next's: its next write or view
	// reports it.
	next.eng.fail(scanTombstones(cur.eng.scanCommitted, func(code []byte) bool {
		next.retire(string(code))
		return true
	}))
	for id := range cur.revoked {
		next.revoked[id] = struct{}{}
		delete(next.keys, id)
		next.links.forgetAuthor(id) // only live keys author links (authors.go)
	}
	for id, k := range cur.keys {
		if _, revoked := next.revoked[id]; !revoked {
			next.keys[id] = k // keys never change: the two states may share it
		}
	}
	next.audit = cur.audit.clone()
	next.certs = cur.certs.clone()
	next.servers.removed = maps.Clone(cur.servers.removed)
	for id := range next.servers.removed {
		delete(next.servers.addrs, id)
	}
	next.raised = max(next.raised, cur.raised)
	if next.bounded() {
		next.audit.keepApart()
	}
	for name, d := range cur.domains {
		if _, ok := next.domains[name]; !ok {
			next.domains[name] = d
		}
	}
	for id, h := range cur.hooks.byID {
		if _, ok := next.hooks.byID[id]; ok {
			kept := *h
			kept.events = slices.Clip(kept.events) // never appended to through next
			next.hooks.byID[id] = &kept
		}
	}
	next.hooks.recompute()
}

// RestoreRecord is who performs a restore and when, as its audit entry
// records it.
type RestoreRecord struct {
	KeyID string // the credential performing it: a key id, or RootKeyID for the operator's token
	At    int64  // unix ms: the leader's clock
	// Backup says what vouched for the backup ("authenticated by the
	// cluster key", "foreign"): the entry's subject.
	Backup string
	// NewClusterID is the identity of a cluster restored before it had
	// one (a disaster recovery's new cluster), drawn by its leader.
	NewClusterID [16]byte
}

// RecordRestore finishes the state a restore installs, after KeepHandedOut
// (see recordRestore). It reports whether the restoring key was kept
// against the backup. backup must not be in use elsewhere.
func (f *FSM) RecordRestore(backup *Snapshot, r RestoreRecord) (keptKey bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return recordRestore(backup.s, f.s, r)
}

// recordRestore makes sure the credential performing a restore works after
// it, gives next the cluster's identity, and records the restore in next's
// audit log:
//
//   - the cluster id is cur's: a cluster that restores a backup, its own or
//     another's, stays the cluster it is (its nodes, its backups' series);
//     a cluster restored before it had an id (a disaster recovery) takes
//     r.NewClusterID, so it never passes for the cluster that was lost;
//   - a key of cur's that performs the restore stays valid even when next
//     revoked it (or holds another key under its id): a restore must never
//     lock out whoever performs it, who could not restore again;
//   - one audit entry, at the leader's clock, names the key, what vouched
//     for the backup, and a key kept against it.
//
// The operator's token is not in any state: nothing to keep.
func recordRestore(next, cur *state, r RestoreRecord) (keptKey bool) {
	next.clusterID = r.NewClusterID
	if cur.hasKey {
		next.clusterID = cur.clusterID
	}
	subject := r.Backup
	if k, ok := cur.keys[r.KeyID]; ok {
		_, revoked := next.revoked[r.KeyID]
		if held, ok := next.keys[r.KeyID]; revoked || !ok || held.Hash != k.Hash {
			delete(next.revoked, r.KeyID)
			next.keys[r.KeyID] = k // keys never change: the two states may share it
			subject += "; kept key " + r.KeyID + ", which performed the restore, against the backup"
			keptKey = true
		}
	}
	next.audit.add(AuditEntry{At: r.At, KeyID: r.KeyID, Action: AuditBackupRestore, Subject: subject})
	return keptKey
}

// retire makes code a tombstone unless a live link holds it.
func (s *state) retire(code string) {
	if _, live := s.links.lookup(code); live {
		return
	}
	s.tombstones.add(code)
}

// WriteTo encodes the snapshot in the snapshot format and returns the bytes
// written. Equal states encode to equal bytes, so a first pass into
// io.Discard gives the size of the second. Not for concurrent use.
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	snap, err := s.s.snapshot()
	if err != nil {
		return 0, err
	}
	defer snap.Release()
	cw := &countingWriter{w: w}
	if err := snap.writeTo(cw); err != nil {
		return cw.n, fmt.Errorf("encode snapshot: %w", err)
	}
	return cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

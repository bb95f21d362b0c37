package cluster

import (
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// A clean stop keeps the state machine's state on disk (fsm.Keep) and the
// next start resumes it instead of restoring Raft's latest snapshot: Raft
// then starts with NoSnapshotRestoreOnStart and hands the FSM the log after
// that snapshot, whose entries up to the kept index the FSM skips. A start
// after a crash finds nothing kept and restores the snapshot, as Raft
// always did (DESIGN.md, "Start-up").

// resumeState resumes the state the last stop kept when this node's Raft
// state holds the entry it was kept at: the latest snapshot's own entry,
// or one of the log after it with the same term (an entry's index and
// term name the whole log before it). A state kept at an index below the
// latest snapshot, or of a log that is gone (raft.db removed, a log a
// recovery replaced) or next to a damaged snapshot, is dropped. It reports
// whether it resumed.
func resumeState(f *fsm.FSM, snaps raft.SnapshotStore, logs raft.LogStore, log *slog.Logger) bool {
	list, err := snaps.List()
	if err != nil {
		log.Warn("the kept state was not resumed: the snapshots could not be listed", "err", err)
		return false
	}
	accept := func(index, term uint64) bool {
		if len(list) > 0 && (index < list[0].Index || !snapshotReads(snaps, list[0].ID)) {
			return false
		}
		if len(list) > 0 && index == list[0].Index {
			return term == list[0].Term
		}
		var entry raft.Log
		return logs.GetLog(index, &entry) == nil && entry.Term == term
	}
	start := time.Now()
	index, ok, err := f.Resume(accept)
	switch {
	case err != nil:
		log.Warn("the state kept at the last stop was not resumed: rebuilding it from the snapshot and log", "err", err)
	case ok:
		log.Info("resumed the state kept at the last stop", "index", index, "took", time.Since(start).Round(time.Millisecond))
	}
	return ok
}

// snapshotReads reports whether the snapshot's checksum holds (the
// store's Open reads it whole). A node that resumes never reads its
// latest snapshot otherwise, until it sends it to a follower; a damaged
// one is found now, and the start takes Raft's way, which falls back to
// an older snapshot or names the damage (checkSnapshots).
func snapshotReads(snaps raft.SnapshotStore, id string) bool {
	_, rc, err := snaps.Open(id)
	if err != nil {
		return false
	}
	rc.Close()
	return true
}

// keepState keeps the state machine's state for the next start, once Raft
// is shut down and applies nothing more.
func keepState(f *fsm.FSM, log *slog.Logger) {
	index, err := f.Keep()
	switch {
	case err != nil:
		log.Info("the state was not kept: the next start rebuilds it from the snapshot and log", "reason", err)
	case index != 0:
		log.Info("kept the state for the next start", "index", index)
	}
}

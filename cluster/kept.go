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
// after a crash finds nothing kept and resumes the checkpoint the latest
// snapshot refers to (fsm.ResumeFrom); one whose latest snapshot is a
// stream (installed from a leader, or written by an older build) has Raft
// restore it, as before (DESIGN.md, "Start-up").

// resumeState resumes the state the last stop kept when this node's Raft
// state holds the entry it was kept at: the latest snapshot's own entry,
// the entry of the checkpoint that snapshot refers to (a snapshot may be
// labelled past it, by entries the FSM is not handed: no-ops, barriers,
// configurations), or one of the log after it with the same term (an
// entry's index and term name the whole log before it). A state kept at
// another index below the latest snapshot, or of a log that is gone
// (raft.db removed, a log a recovery replaced), or next to a damaged
// snapshot, is dropped. With nothing kept (a crash) or a state dropped,
// it resumes the latest snapshot's checkpoint when the snapshot refers to
// one. It reports whether it resumed; m then reports the latest
// snapshot's label as applied at least (appliedFSM.resumedAt).
func resumeState(m *appliedFSM, snaps ownerOnlySnapshots, logs raft.LogStore, log *slog.Logger) bool {
	f := m.FSM
	list, err := snaps.List()
	if err != nil {
		log.Warn("the kept state was not resumed: the snapshots could not be listed", "err", err)
		return false
	}
	var latest *raft.SnapshotMeta
	var readable bool
	var ref checkpointAt
	if len(list) > 0 {
		latest = list[0]
		readable, ref = snaps.inspect(latest.ID)
	}
	accept := func(index, term uint64) bool {
		switch {
		case latest == nil:
		case !readable:
			return false
		case index == latest.Index:
			return term == latest.Term
		case index < latest.Index:
			return ref.ok && index == ref.index && term == ref.term
		}
		var entry raft.Log
		return logs.GetLog(index, &entry) == nil && entry.Term == term
	}
	start := time.Now()
	index, ok, err := f.Resume(accept)
	switch {
	case err != nil:
		log.Warn("the state kept at the last stop was not resumed: starting from the latest snapshot", "err", err)
	case ok:
		if latest != nil {
			m.resumedAt.Store(latest.Index)
		}
		log.Info(resumedKept, "index", index, "took", time.Since(start).Round(time.Millisecond))
		return true
	}
	if !ref.ok {
		return false
	}
	if err := f.ResumeFrom(snaps.path(latest.ID), latest.Index, latest.Term); err != nil {
		log.Warn("the latest snapshot's checkpoint was not resumed: restoring its stream", "err", err)
		return false
	}
	log.Info(resumedSnapshot, "index", latest.Index, "took", time.Since(start).Round(time.Millisecond))
	return true
}

// What a start logs when it resumes rather than rebuilds.
const (
	resumedKept     = "resumed the state kept at the last stop"
	resumedSnapshot = "resumed the state of the latest snapshot"
)

// keepState keeps the state machine's state for the next start, once Raft
// is shut down and applies nothing more.
func keepState(f *fsm.FSM, log *slog.Logger) {
	index, err := f.Keep()
	switch {
	case err != nil:
		log.Info("the state was not kept: the next start begins at the latest snapshot and replays the log", "reason", err)
	case index != 0:
		log.Info("kept the state for the next start", "index", index)
	}
}

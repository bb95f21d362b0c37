package cluster

import (
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// defaultSnapshotBytes is how many bytes of log entries a node applies
// before it takes a snapshot, whatever Raft's entry-count threshold says.
// Entries vary from one click batch to thousands of imported links, so a
// count alone lets the log since the last snapshot grow to gigabytes, and
// a restart replays all of it. 64 MiB replays in well under a second.
const defaultSnapshotBytes = 64 << 20

// logVolume counts the bytes applied since the last snapshot and signals
// once they pass its limit.
type logVolume struct {
	limit int64
	since atomic.Int64
	due   chan struct{} // capacity 1: one pending request is enough
}

func newLogVolume(limit int64) *logVolume {
	return &logVolume{limit: limit, due: make(chan struct{}, 1)}
}

func (v *logVolume) applied(logs []*raft.Log) {
	var n int64
	for _, l := range logs {
		n += int64(len(l.Data))
	}
	if v.since.Add(n) >= v.limit {
		select {
		case v.due <- struct{}{}:
		default:
		}
	}
}

// snapshotted starts counting afresh; every snapshot, whatever asked for
// it, passes here.
func (v *logVolume) snapshotted() { v.since.Store(0) }

// compactor takes the snapshots the log's volume asks for, and the one
// after an import, and hands back what they leave resident: raft.db's
// pages (storepages.go).
type compactor struct {
	raft  *raft.Raft
	store *boltStore
	log   *slog.Logger
}

// run takes a snapshot whenever volume says so, until closing.
func (c compactor) run(volume *logVolume, closing <-chan struct{}) {
	for {
		select {
		case <-closing:
			return
		case <-volume.due:
		}
		// The volume just written, and the compaction that followed the
		// snapshot, left raft.db's pages resident.
		c.snapshot("after a large log volume")
	}
}

// snapshot takes a snapshot, which compacts the log, and releases the
// store's pages.
func (c compactor) snapshot(why string) {
	err := c.raft.Snapshot().Error()
	if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) && !errors.Is(err, raft.ErrRaftShutdown) {
		c.log.Warn("snapshot "+why+" failed", "err", err)
	}
	c.releasePages()
}

// releasePages drops raft.db's mapped pages from memory.
func (c compactor) releasePages() {
	if err := c.store.releasePages(); err != nil {
		c.log.Warn("releasing raft.db's mapped pages failed; they stay resident until the kernel reclaims them", "err", err)
	}
}

package cluster

import (
	"errors"
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

// runVolumeSnapshots takes a snapshot whenever logVolume says so.
func (n *Node) runVolumeSnapshots() {
	for {
		select {
		case <-n.closing:
			return
		case <-n.machine.volume.due:
		}
		if err := n.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			n.log.Warn("snapshot after a large log volume failed", "err", err)
		}
		// The volume just written, and the compaction that followed the
		// snapshot, left raft.db's pages resident.
		n.releaseStorePages()
	}
}

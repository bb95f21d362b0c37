package cluster

import (
	"context"
	"io"
	"runtime/debug"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// broadcast wakes every goroutine waiting for a change at once: wait hands
// out a channel that the next notify closes. A waiter takes the channel
// before it looks at the state it waits on, so no change slips between the
// look and the wait.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) notify() {
	b.mu.Lock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
	b.mu.Unlock()
}

// appliedFSM is the state machine as Raft drives it: every applied batch
// and every restore is announced, so read-after-write waits for an index
// instead of polling for it. A channel is made only while someone waits.
type appliedFSM struct {
	*fsm.FSM
	applied  broadcast // after every applied batch and restore
	restored broadcast // after every restore
	volume   *logVolume
}

var _ raft.BatchingFSM = (*appliedFSM)(nil)

func (a *appliedFSM) Apply(l *raft.Log) any { return a.ApplyBatch([]*raft.Log{l})[0] }

func (a *appliedFSM) ApplyBatch(logs []*raft.Log) []any {
	results := a.FSM.ApplyBatch(logs)
	a.applied.notify()
	a.volume.applied(logs)
	return results
}

func (a *appliedFSM) Snapshot() (raft.FSMSnapshot, error) {
	a.volume.snapshotted()
	return a.FSM.Snapshot()
}

// Restore replaces the state. The old state and the snapshot's bytes are
// then garbage the size of the whole data set: they are handed back to the
// operating system at once rather than kept until the heap grows into them.
func (a *appliedFSM) Restore(rc io.ReadCloser) error {
	err := a.FSM.Restore(rc)
	a.volume.snapshotted()
	a.applied.notify()
	a.restored.notify()
	debug.FreeOSMemory()
	return err
}

// appliedIndex is the index of the last entry the FSM has applied. Raft's
// own applied index is used only when the FSM has applied nothing since it
// started or was restored; then it is the restored snapshot's index.
func (n *Node) appliedIndex() uint64 {
	if i, ok := n.fsm.Applied(); ok {
		return i
	}
	return n.raft.AppliedIndex()
}

// waitApplied returns once this node's FSM has applied index, or ctx's
// error when it ends first.
func (n *Node) waitApplied(ctx context.Context, index uint64) error {
	for {
		changed := n.machine.applied.wait()
		if n.appliedIndex() >= index {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

package cluster

import (
	"context"
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"

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
// instead of polling for it (a channel is made only while someone
// waits), and it knows how far the leader said it has applied.
type appliedFSM struct {
	*fsm.FSM
	applied  broadcast // after every applied batch and restore
	restored broadcast // after every restore
	volume   *logVolume
	// received is the snapshot a leader sent as its checkpoint's files,
	// which the restore after the install takes (snapfiles.go).
	received *receivedFiles
	// raftApplied is Raft's own applied index (set once Raft runs).
	raftApplied func() uint64
	// resumedAt is the label of the snapshot a state resumed at the start
	// was accepted beside: every entry up to it is in the state, though
	// the FSM reports its last command, which may be lower (the label can
	// be a no-op or a configuration after it: kept.go). Without it, a
	// node whose leader reports the label would wait for the next write
	// to catch up, and ask the leader for every read until then.
	resumedAt atomic.Uint64
	// leaderIndex is the highest index the leader told this node it has
	// applied (see behind).
	leaderIndex atomic.Uint64
	// hold, when set, runs before every applied batch and restore: tests
	// hold a node back there to see what happens while it is behind.
	hold atomic.Pointer[func()]
}

var _ raft.BatchingFSM = (*appliedFSM)(nil)

func (a *appliedFSM) Apply(l *raft.Log) any { return a.ApplyBatch([]*raft.Log{l})[0] }

func (a *appliedFSM) ApplyBatch(logs []*raft.Log) []any {
	a.wait()
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
	a.wait()
	var err error
	if dir := a.received.take(); dir != "" {
		err = a.FSM.RestoreFrom(dir)
	} else {
		err = a.FSM.Restore(rc)
	}
	if err == nil {
		a.resumedAt.Store(0) // the state is the snapshot's now
	}
	a.volume.snapshotted()
	a.applied.notify()
	a.restored.notify()
	debug.FreeOSMemory()
	return err
}

// wait runs hold, if set.
func (a *appliedFSM) wait() {
	if hold := a.hold.Load(); hold != nil {
		(*hold)()
	}
}

// appliedIndex is the index of the last entry the FSM has applied, or the
// label of the snapshot its state was resumed beside when higher. Raft's
// own applied index is used only when the FSM has applied nothing since it
// started or was restored; then it is the restored snapshot's index.
func (a *appliedFSM) appliedIndex() uint64 {
	if i, ok := a.Applied(); ok {
		return max(i, a.resumedAt.Load())
	}
	return a.raftApplied()
}

// waitApplied returns once this node's FSM has applied index, or ctx's
// error when it ends first.
func (a *appliedFSM) waitApplied(ctx context.Context, index uint64) error {
	for {
		changed := a.applied.wait()
		if a.appliedIndex() >= index {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// behind reports whether the leader has confirmed an index this node has
// not applied yet. Cheap enough for the redirect path: two atomic loads.
func (a *appliedFSM) behind() bool { return a.appliedIndex() < a.leaderIndex.Load() }

// noteLeaderIndex records an index the leader has applied.
func (a *appliedFSM) noteLeaderIndex(index uint64) {
	for {
		cur := a.leaderIndex.Load()
		if index <= cur || a.leaderIndex.CompareAndSwap(cur, index) {
			return
		}
	}
}

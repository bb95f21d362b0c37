package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// ErrRestoreNotReady is a restore Raft refused for now: a membership change
// is still being committed. Trying again shortly succeeds.
var ErrRestoreNotReady = errors.New("the cluster cannot take a restore while a membership change is being committed; try again")

// Backup writes a consistent copy of the whole state to w.
func (n *Node) Backup(w io.Writer) error {
	if err := n.fsm.WriteBackup(w); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

// Restore makes the whole cluster take the state in a backup. The backup is
// verified completely before anything changes; a corrupt one returns an
// error wrapping fsm.ErrCorruptSnapshot and leaves the cluster as it was.
//
// A node that has only just started (a fresh node in a disaster recovery)
// is not ready yet: Raft refuses a restore until its first configuration is
// committed. Restore waits, within the write timeout, until this node is an
// established leader, which implies that.
//
// The cluster keeps what it has handed out: codes, counters and link ids
// of the current state are merged into the backup before it is installed
// (fsm.KeepHandedOut), so no code is ever handed out twice.
func (n *Node) Restore(backup []byte) error {
	snap, err := fsm.ReadSnapshot(bytes.NewReader(backup))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.WriteTimeout)
	defer cancel()
	if err := n.leadership.waitReady(ctx, false); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := n.installMerged(snap); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	// The backup may come from another cluster and lack this leader's
	// address; recording it also gives every FSM a known applied index
	// again, which read-after-write waits on.
	if _, _, err := n.apply(fsm.ServerCommand{ID: n.cfg.ID, HTTPAddr: n.cfg.HTTPAddr}); err != nil {
		return fmt.Errorf("restore: record leader address: %w", err)
	}
	return nil
}

// installMerged merges the current state into snap and has Raft install
// the result on every node. No entry is proposed through this node from the
// barrier to the install, and the barrier applies every entry proposed
// before it, so the merge sees every code handed out until the install:
// a create racing with the restore either lands before the merge (and its
// code is kept out of use) or waits and lands on the restored state.
func (n *Node) installMerged(snap *fsm.Snapshot) error {
	n.proposals.Lock()
	defer n.proposals.Unlock()
	if err := n.raft.Barrier(n.cfg.WriteTimeout).Error(); err != nil {
		return fmt.Errorf("barrier: %w", raftError(err))
	}
	n.fsm.KeepHandedOut(snap)
	// Raft wants the size up front; encoding twice (the second time
	// streamed to Raft) costs CPU but never holds a second copy of the
	// snapshot in memory. Equal states encode to equal bytes.
	size, err := snap.WriteTo(io.Discard)
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	encoded := make(chan error, 1)
	go func() {
		_, err := snap.WriteTo(pw)
		pw.CloseWithError(err)
		encoded <- err
	}()
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: size}
	err = n.raft.Restore(meta, pr, n.cfg.WriteTimeout)
	// Raft may stop reading early (not leader, enqueue timeout); closing
	// the reader ends the encoder then.
	pr.Close()
	if encErr := <-encoded; err == nil && encErr != nil {
		return encErr
	}
	if err != nil {
		if strings.Contains(err.Error(), "cannot restore snapshot now") {
			// hashicorp/raft has no error value for this refusal.
			return fmt.Errorf("%w (raft: %v)", ErrRestoreNotReady, err)
		}
		return raftError(err)
	}
	return nil
}

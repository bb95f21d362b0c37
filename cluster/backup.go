package cluster

import (
	"bytes"
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

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
func (n *Node) Restore(backup []byte) error {
	if _, err := fsm.ReadSnapshot(bytes.NewReader(backup)); err != nil {
		return err
	}
	if !n.IsLeader() {
		return ErrNoLeader
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: int64(len(backup))}
	if err := n.raft.Restore(meta, bytes.NewReader(backup), n.cfg.WriteTimeout); err != nil {
		return fmt.Errorf("restore: %w", raftError(err))
	}
	// The backup may come from another cluster and lack this leader's
	// address; recording it also gives every FSM a known applied index
	// again, which read-after-write waits on.
	if _, err := n.apply(fsm.EncodeServer(fsm.ServerCommand{ID: n.cfg.ID, HTTPAddr: n.cfg.HTTPAddr})); err != nil {
		return fmt.Errorf("restore: record leader address: %w", err)
	}
	return nil
}

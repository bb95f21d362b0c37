package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/linkraft/linkraft/cluster/backups"
	"github.com/linkraft/linkraft/fsm"
)

// Backups is the scheduler of backups that leave the machine (package
// backups), nil without Config.BackupStore: the leader loop runs it as a
// duty, and httpd reads how it went.
func (n *Node) Backups() *backups.Scheduler { return n.backups }

// backupSource is the node as package backups, which cannot import this
// one, takes backups of it.
type backupSource struct{ n *Node }

func (s backupSource) ClusterID() string             { return s.n.fsm.ClusterID() }
func (s backupSource) AppliedIndex() uint64          { return s.n.machine.appliedIndex() }
func (s backupSource) WriteBackup(w io.Writer) error { return s.n.BackupCompressed(w) }

// CheckBackup is nil for a backup this cluster's key authenticates, read
// through once a block at a time: the scheduler counts no other.
func (s backupSource) CheckBackup(r io.Reader) error {
	_, authentic, err := readEnvelope(r, s.n.cfg.Key)
	if err != nil {
		return err
	}
	if !authentic {
		return fmt.Errorf("%w: not made by a cluster holding this cluster key, or changed after it was made", ErrBackupUnauthenticated)
	}
	return nil
}

// ErrRestoreSkipped is a --restore-from that does nothing: the node had
// state, or it joins a cluster, which gives it the state.
var ErrRestoreSkipped = errors.New("restore skipped")

// RestoreAtStart installs the newest good backup of source into a new
// cluster: the disaster recovery of a whole cluster, one command per node.
// Only the node that bootstrapped a cluster alone at this start restores
// (the others join it and receive the state as any new member does), so
// exactly one restore happens whichever nodes were given the flag; a node
// that had state, or waits to join, returns ErrRestoreSkipped saying why.
// A backup that fails its checksum or authentication, or holds a record
// no client could write, is passed over for the next older one. Each is
// copied into the data dir and read from there as a stream, never held
// whole (backups.RestoreFile).
func (n *Node) RestoreAtStart(ctx context.Context, source string, opts backups.S3Options) (backups.Candidate, error) {
	defer n.settleRestore() // the backups wait for this (Config.AwaitsRestore)
	if !n.bootstrapped {
		why := "this node had Raft state"
		if !n.hadState {
			why = "this node joins a cluster (--join or --bootstrap-expect > 1), which gives it the state; " +
				"the node started alone (no --join, --bootstrap-expect 1) restores"
		}
		return backups.Candidate{}, fmt.Errorf("%w: %s", ErrRestoreSkipped, why)
	}
	cands, err := backups.Candidates(ctx, source, opts)
	if err != nil {
		return backups.Candidate{}, err
	}
	restore := func(backup *io.SectionReader) error { return n.RestoreFrom(backup, RestoreOptions{By: fsm.RootKeyID}) }
	refused := func(err error) bool {
		return errors.Is(err, ErrBackupUnauthenticated) || errors.Is(err, fsm.ErrCorruptSnapshot) || errors.Is(err, fsm.ErrRefusedRecord)
	}
	return backups.RestoreFile(ctx, cands, n.cfg.DataDir, restore, refused, n.log)
}

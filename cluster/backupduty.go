package cluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/linkraft/linkraft/cluster/backups"
	"github.com/linkraft/linkraft/fsm"
)

// Backups is the scheduler of backups that leave the machine (package
// backups), nil without Config.Backups.Store: the leader loop runs it as a
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

// errRestoreAtStart marks a failed restore at start, which establish
// retries less often than its other steps.
var errRestoreAtStart = errors.New("--restore-from")

// restoreAtStartTimeout bounds one try: fetching and installing a backup.
const restoreAtStartTimeout = 30 * time.Minute

// restoreAtStart is --restore-from, the disaster recovery of a whole
// cluster in one setting that every node may carry: the leader of a
// cluster that has no state yet (no code key: no entry but the
// configuration and nothing written) installs the newest good backup of
// the source before it establishes its term, so before any write. The
// install is one Raft snapshot with the cluster's state in it, so the
// cluster restores exactly once: a leader that dies before it commits
// leaves no state, and the next leader with the setting tries again; once
// it commits, the cluster has state and no leader restores. A backup that
// fails its checksum or authentication, or holds a record no client could
// write, is passed over for the next older one. Each is copied into the
// data dir and read from there as a stream, never held whole
// (backups.RestoreFile). The restored cluster takes a new cluster id, so
// its backups are a new series and retention leaves the lost cluster's
// alone. A leader whose term ends (stop) gives the restore up at once:
// the next leader makes its own.
func restoreAtStart(n *Node, stop <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(n.stopping, restoreAtStartTimeout)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	cands, err := backups.Candidates(ctx, n.cfg.Backups.RestoreFrom, n.cfg.Backups.RestoreS3)
	if err != nil {
		return fmt.Errorf("%w %s: %w", errRestoreAtStart, n.cfg.Backups.RestoreFrom, err)
	}
	var newID [16]byte
	if _, err := rand.Read(newID[:]); err != nil {
		return fmt.Errorf("%w: random cluster id: %w", errRestoreAtStart, err)
	}
	restore := func(backup *io.SectionReader) error {
		snap, vouched, err := readBackup(n.cfg, backup, false)
		if err != nil {
			return err
		}
		defer snap.Close()
		return install(ctx, n, snap, fsm.RestoreRecord{KeyID: fsm.RootKeyID, Backup: vouched, NewClusterID: newID})
	}
	refused := func(err error) bool {
		return errors.Is(err, ErrBackupUnauthenticated) || errors.Is(err, fsm.ErrCorruptSnapshot) || errors.Is(err, fsm.ErrRefusedRecord)
	}
	cand, err := backups.RestoreFile(ctx, cands, n.cfg.DataDir, restore, refused, n.log)
	if err != nil {
		return fmt.Errorf("%w %s: %w", errRestoreAtStart, n.cfg.Backups.RestoreFrom, err)
	}
	n.log.Info("restored the newest good backup", "backup", cand.String(), "links", n.fsm.Len(), "cluster_id", n.fsm.ClusterID())
	return nil
}

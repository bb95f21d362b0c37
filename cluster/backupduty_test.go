package cluster

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster/backups"
)

// backupsAt is the backups in dir that cond accepts.
func backupsAt(t *testing.T, dir string, cond func(backups.Name) bool) []backups.Name {
	t.Helper()
	names, err := backups.Dir{Path: dir}.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []backups.Name
	for _, s := range names {
		if n, ok := backups.ParseName(s); ok && cond(n) {
			out = append(out, n)
		}
	}
	return out
}

// TestNoBackupBeforeTheRestoreAtStart: a node that starts a new cluster
// to restore it from the backups (--restore-from) writes no backup of
// the new, empty state before the restore: at the destination that
// backup would be the newest good one, and the next disaster recovery
// would restore it. Once restored, it backs up as any leader does.
func TestNoBackupBeforeTheRestoreAtStart(t *testing.T) {
	t.Parallel()
	dest := t.TempDir()
	const interval = 100 * time.Millisecond
	backingUp := func(c *Config) { c.BackupStore, c.BackupInterval = backups.Dir{Path: dest}, interval }

	// The backup of a cluster that is gone, as `linkraft backup --to` stores one.
	lost := openNode(t, t.TempDir())
	kept := createURL(t, lost, "https://example.com/kept")
	var backup bytes.Buffer
	if err := lost.BackupCompressed(&backup); err != nil {
		t.Fatal(err)
	}
	if _, err := backups.PutBackup(context.Background(), backups.Dir{Path: dest}, lost.FSM().ClusterID(),
		lost.machine.appliedIndex(), backup.Bytes(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := lost.Close(); err != nil {
		t.Fatal(err)
	}

	fresh := openNode(t, t.TempDir(), backingUp, func(c *Config) { c.AwaitsRestore = true })
	waitFor(t, func() bool { return fresh.IsLeader() && fresh.FSM().ClusterID() != "" })
	empty := fresh.FSM().ClusterID()
	// A leader's backup duty writes as soon as it runs: five intervals
	// are plenty for a node that would.
	time.Sleep(5 * interval)
	if got := backupsAt(t, dest, func(n backups.Name) bool { return n.Cluster == empty }); len(got) > 0 {
		t.Fatalf("the node backed up its empty state before the restore: %v", got)
	}

	restoredAt := time.Now()
	if _, err := fresh.RestoreAtStart(context.Background(), dest, backups.S3Options{}); err != nil {
		t.Fatalf("restore at start: %v", err)
	}
	if _, ok := fresh.FSM().Get(kept.Code); !ok {
		t.Fatalf("%s is not in the restored state", kept.Code)
	}
	// Then its backups run: one is looked at, and written or found there.
	waitFor(t, func() bool {
		st := fresh.Backups().Status()
		return st.Active && st.At.After(restoredAt) && st.Outcome != backups.OutcomeFailed
	})
}

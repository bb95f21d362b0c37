package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"testing/iotest"
	"time"

	"github.com/linkraft/linkraft/cluster/backups"
	"github.com/linkraft/linkraft/fsm"
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

// lostClusterBackup stores at dest the backup of a cluster that is then
// gone, as its leader's backups stored it, and returns a link it held and
// its cluster id.
func lostClusterBackup(t *testing.T, dest string, at time.Time) (fsm.Link, string) {
	t.Helper()
	lost := openNode(t, t.TempDir())
	kept := createURL(t, lost, "https://example.com/kept")
	var backup bytes.Buffer
	if err := lost.BackupCompressed(&backup); err != nil {
		t.Fatal(err)
	}
	id := lost.FSM().ClusterID()
	if _, err := backups.PutBackup(context.Background(), backups.Dir{Path: dest}, id,
		lost.machine.appliedIndex(), backup.Bytes(), at); err != nil {
		t.Fatal(err)
	}
	if err := lost.Close(); err != nil {
		t.Fatal(err)
	}
	return kept, id
}

// TestRestoreAtStartComesBeforeEverything: a new cluster started to
// restore the backups (--restore-from) takes no write, writes no backup
// and is not ready while the source holds no good backup: its empty state,
// backed up, would be the newest backup, and the next disaster recovery
// would restore it. Once a backup is there, the leader restores it under
// a new cluster id, backs up as any leader does, and retention leaves the
// lost cluster's backup alone.
func TestRestoreAtStartComesBeforeEverything(t *testing.T) {
	t.Parallel()
	dest, lostDir := t.TempDir(), t.TempDir()
	const interval = 100 * time.Millisecond
	fresh := openNode(t, t.TempDir(), func(c *Config) {
		c.Backups.Store, c.Backups.Interval, c.Backups.Retain = backups.Dir{Path: dest}, interval, 1
		c.Backups.RestoreFrom = lostDir
	})
	waitFor(t, fresh.IsLeader)
	// A leader's backup duty writes as soon as it runs: five intervals
	// are plenty for a node that would.
	time.Sleep(5 * interval)
	if got := backupsAt(t, dest, func(backups.Name) bool { return true }); len(got) > 0 {
		t.Fatalf("the node backed up before the restore: %v", got)
	}
	if got := fresh.NotReady(); got != NotReadyRestoring {
		t.Fatalf("awaiting its restore: NotReady = %q, want %q", got, NotReadyRestoring)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := fresh.Propose(ctx, fsm.CreateBatch{Items: []fsm.CreateRequest{{URL: "https://example.com/early"}}}, ProposeOptions{}); err == nil {
		t.Fatal("a create was accepted before the restore at start")
	}

	kept, lostID := lostClusterBackup(t, lostDir, time.Now())
	// The lost cluster's backup also sits at the new cluster's destination,
	// where retention must leave it.
	lostName := backupsAt(t, lostDir, func(backups.Name) bool { return true })[0]
	data, err := os.ReadFile(filepath.Join(lostDir, lostName.String()))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dest, lostName.String()), data, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, ok := fresh.FSM().Get(kept.Code); return ok })
	if id := fresh.FSM().ClusterID(); id == lostID || id == "" {
		t.Fatalf("restored cluster id %q; want a new one, not the lost cluster's %s", id, lostID)
	}
	if got := fresh.NotReady(); got != "" {
		t.Fatalf("restored: NotReady = %q, want it serving", got)
	}
	restored := fresh.FSM().ClusterID()
	waitFor(t, func() bool {
		return len(backupsAt(t, dest, func(n backups.Name) bool { return n.Cluster == restored })) > 0
	})
	createURL(t, fresh, "https://example.com/after")
	waitFor(t, func() bool {
		return len(backupsAt(t, dest, func(n backups.Name) bool { return n.Cluster == restored && n.Index > 0 })) >= 1 &&
			fresh.Backups().Status().Outcome == backups.OutcomeWritten
	})
	if _, err := os.Stat(filepath.Join(dest, lostName.String())); err != nil {
		t.Fatalf("retention of the restored cluster touched the lost cluster's backup: %v", err)
	}
}

// plantBackup stores data under a backup's name of cluster dated at, its
// checksum right, as anyone who may write to the destination can.
func plantBackup(t *testing.T, dir, cluster string, at time.Time, data []byte) backups.Name {
	t.Helper()
	sum := sha256.Sum256(data)
	n := backups.Name{Cluster: cluster, Time: at, Index: 1, Hash: hex.EncodeToString(sum[:8])}
	if err := os.WriteFile(filepath.Join(dir, n.String()), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBackupsCountOnlyWhatTheyChecked: objects put at the destination by
// someone without the cluster key (junk and a genuine backup's copy named
// as dated in 2099, junk named a moment ahead) stop no backup of the
// leader's, are not its last good backup, and are not deleted in place
// of its own.
func TestBackupsCountOnlyWhatTheyChecked(t *testing.T) {
	t.Parallel()
	dest := t.TempDir()
	const interval = 200 * time.Millisecond
	n := openNode(t, t.TempDir(), func(c *Config) {
		c.Backups.Store, c.Backups.Interval, c.Backups.Retain = backups.Dir{Path: dest}, interval, 2
	})
	waitFor(t, func() bool { return n.IsLeader() && n.FSM().ClusterID() != "" })
	cluster := n.FSM().ClusterID()
	mine := func(after backups.Name) []backups.Name {
		return backupsAt(t, dest, func(b backups.Name) bool {
			return b.Cluster == cluster && b.Index > after.Index && !b.Time.After(time.Now())
		})
	}
	createURL(t, n, "https://example.com/first")
	waitFor(t, func() bool { return len(mine(backups.Name{})) > 0 })
	genuine := mine(backups.Name{})[0]
	data, err := os.ReadFile(filepath.Join(dest, genuine.String()))
	if err != nil {
		t.Fatal(err)
	}

	year2099 := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	planted := []backups.Name{
		plantBackup(t, dest, cluster, year2099, []byte("junk")),
		plantBackup(t, dest, cluster, year2099.Add(time.Hour), data),
	}
	for i := range 3 {
		plantBackup(t, dest, cluster, time.Now().Add(interval/2+time.Duration(i)*time.Millisecond), []byte(fmt.Sprint("junk", i)))
	}
	latest := genuine
	for i := range 3 {
		createURL(t, n, fmt.Sprint("https://example.com/after-the-junk/", i))
		waitFor(t, func() bool { return len(mine(latest)) > 0 })
		latest = mine(latest)[0]
	}
	// The scheduler writes a backup, then prunes: give the last one's
	// pruning its moment (bounded) before counting.
	for deadline := time.Now().Add(10 * time.Second); len(mine(backups.Name{})) > 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	for _, p := range planted {
		if _, err := os.Lstat(filepath.Join(dest, p.String())); err != nil {
			t.Errorf("%s, dated in the future, was deleted: %v", p, err)
		}
	}
	if got := mine(backups.Name{}); len(got) != 2 {
		t.Errorf("this cluster's backups: %v; want the newest two it wrote", got)
	}
	if st := n.Backups().Status(); st.LastGood.After(time.Now()) || n.Backups().Overdue() {
		t.Fatalf("status %+v, overdue %v; want the last good backup in the past", st, n.Backups().Overdue())
	}
}

// TestCheckBackup: the scheduler counts a backup only when the cluster key
// authenticates it, read as a stream.
func TestCheckBackup(t *testing.T) {
	t.Parallel()
	n := openKeyed(t, newClusterKey(t))
	createURL(t, n, "https://example.com/kept")
	other := openKeyed(t, newClusterKey(t))
	compressed, plain := compressedBackupOf(t, n), backupOf(t, n)
	forged := bytes.Clone(compressed)
	forged[len(forged)-1] ^= 1
	for _, tc := range []struct {
		name   string
		backup []byte
		good   bool
	}{
		{"compressed", compressed, true},
		{"plain", plain, true},
		{"its MAC changed", forged, false},
		{"damaged", flipped(compressed), false},
		{"truncated", compressed[:len(compressed)-1], false},
		{"another cluster key", compressedBackupOf(t, other), false},
		{"a bare snapshot", stateOf(t, n), false},
		{"a header alone", compressed[:backupHeaderSize], false},
		{"nothing", nil, false},
	} {
		err := backupSource{n}.CheckBackup(iotest.HalfReader(bytes.NewReader(tc.backup)))
		if (err == nil) != tc.good {
			t.Errorf("%s: %v; want good %v", tc.name, err, tc.good)
		}
	}
}

// writeLarge writes size bytes that start as a backup of format does but
// are none (its MAC fails), a block at a time, as the test must not hold
// them either, and returns their hash.
func writeLarge(t *testing.T, w io.Writer, format byte, size int) []byte {
	t.Helper()
	sum := sha256.New()
	w = io.MultiWriter(w, sum)
	block := make([]byte, 1<<20)
	copy(block, append(bytes.Clone(backupMagic), format, backupKeyCluster))
	for i := 0; i < size; i += len(block) {
		block[len(block)-1] = byte(i >> 20)
		if _, err := w.Write(block[:min(len(block), size-i)]); err != nil {
			t.Fatal(err)
		}
		block[0] = 0 // only the first block has the header
	}
	return sum.Sum(nil)
}

// TestRestoreAtStartReadsAStream: a 64 MiB object named as the newest
// backup, its checksum right, is passed over without being held: opening
// a node that restores the older good backup allocates a few MiB, not the
// object's size.
func TestRestoreAtStartReadsAStream(t *testing.T) {
	// Not parallel: it measures what the whole process allocates.
	dest := t.TempDir()
	at := time.Now().Add(-time.Hour)
	kept, lostID := lostClusterBackup(t, dest, at)
	f, err := os.CreateTemp(dest, "large-*.tmp")
	if err != nil {
		t.Fatal(err)
	}
	sum := writeLarge(t, f, backupFormatCompressed, 64<<20)
	f.Close()
	large := backups.Name{Cluster: lostID, Time: at.Add(time.Minute), Index: 1 << 40, Hash: hex.EncodeToString(sum)[:16]}
	if err := os.Rename(f.Name(), filepath.Join(dest, large.String())); err != nil {
		t.Fatal(err)
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fresh := openNode(t, t.TempDir(), func(c *Config) { c.Backups.RestoreFrom = dest })
	waitFor(t, func() bool { _, ok := fresh.FSM().Get(kept.Code); return ok })
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("opening the node and its restore allocated %d KiB", alloc>>10)
	if alloc > 16<<20 {
		t.Fatalf("opening the node and its restore allocated %d MiB past a 64 MiB object; want it read as a stream", alloc>>20)
	}
}

package backups

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// plantLarge stores size bytes that are no backup (but start as one
// does) under a backup's name of cluster dated at, with their hash: an
// object that passes its checksum, which only its authentication, read to
// its end, refuses. It is written a block at a time, as the test must not
// hold it either.
func plantLarge(t *testing.T, d Dir, cluster string, at time.Time, size int) Name {
	t.Helper()
	f, err := os.CreateTemp(d.Path, "large-*.tmp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sum := sha256.New()
	w := io.MultiWriter(f, sum)
	block := make([]byte, 1<<20)
	copy(block, "LKRB")
	for i := 0; i < size; i += len(block) {
		block[len(block)-1] = byte(i >> 20)
		if _, err := w.Write(block[:min(len(block), size-i)]); err != nil {
			t.Fatal(err)
		}
	}
	n := Name{Cluster: cluster, Time: at, Index: 99, Hash: hex.EncodeToString(sum.Sum(nil))[:16]}
	if err := os.Rename(f.Name(), filepath.Join(d.Path, n.String())); err != nil {
		t.Fatal(err)
	}
	return n
}

// restoreInto is a restore of the test's state: it sets restored to a
// backup it accepts, and reads a large one (no backup of the state's) to
// its end, as a MAC's check does, before it refuses it.
func restoreInto(restored *string) func(*io.SectionReader) error {
	return func(r *io.SectionReader) error {
		if r.Size() > 1<<10 {
			_, err := io.Copy(io.Discard, r)
			return errors.Join(err, errors.New("not authenticated"))
		}
		var b strings.Builder
		if err := (&state{}).CheckBackup(io.TeeReader(r, &b)); err != nil {
			return err
		}
		*restored = b.String()
		return nil
	}
}

// TestRestoreFile: the newest good backup of a directory is restored;
// newer ones that are damaged, refused or dated in the future are passed
// over; and a large object is read as a stream: restoring past a 64 MiB
// one allocates a few MiB, not its size.
func TestRestoreFile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		plant  func(t *testing.T, d Dir) // objects newer than the genuine backup
		passed []string                  // what the log says of the objects passed over
		// maxAlloc bounds the bytes allocated by the restore (0: not measured).
		maxAlloc uint64
	}{
		{"a large object the restore refuses", func(t *testing.T, d Dir) {
			plantLarge(t, d, clusterA, t0.Add(time.Hour), 64<<20)
		}, []string{"not authenticated"}, 4 << 20},
		{"a damaged object", func(t *testing.T, d Dir) {
			plant(t, d, clusterA, t0.Add(time.Hour), backupBytes("damaged"), true)
		}, []string{"checksum mismatch"}, 0},
		{"the genuine backup copied to a name in 2099", func(t *testing.T, d Dir) {
			plant(t, d, clusterA, t0.AddDate(73, 0, 0), backupBytes("other"), false)
		}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := Dir{Path: t.TempDir()}
			genuine := plant(t, dir, clusterA, t0, backupBytes("genuine"), false)
			tc.plant(t, dir)
			cands, err := Candidates(context.Background(), dir.Path, S3Options{})
			if err != nil {
				t.Fatal(err)
			}
			var restored string
			restore := restoreInto(&restored)
			var logged strings.Builder
			log := slog.New(slog.NewTextHandler(&logged, nil))

			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			got, err := RestoreFile(context.Background(), cands, t.TempDir(), restore, func(error) bool { return true }, log)
			runtime.ReadMemStats(&after)
			if err != nil || got.Name != genuine.String() || restored != backupBytes("genuine") {
				t.Fatalf("restored %s (%q), %v; want %s", got, restored, err, genuine)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("the restore allocated %d KiB", alloc>>10)
			if tc.maxAlloc > 0 && alloc > tc.maxAlloc {
				t.Errorf("the restore allocated %d MiB; want at most %d MiB", alloc>>20, tc.maxAlloc>>20)
			}
			for _, want := range tc.passed {
				if !strings.Contains(logged.String(), want) {
					t.Errorf("the log does not say %q:\n%s", want, logged.String())
				}
			}
			if len(tc.passed) != strings.Count(logged.String(), "backup not installed") {
				t.Errorf("the log says of %d objects passed over, want %d:\n%s",
					strings.Count(logged.String(), "backup not installed"), len(tc.passed), logged.String())
			}
		})
	}
	if _, err := Candidates(context.Background(), t.TempDir(), S3Options{}); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("candidates of an empty directory: %v", err)
	}
}

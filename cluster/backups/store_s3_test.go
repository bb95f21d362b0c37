package backups

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster/backups/s3test"
)

// TestS3Store: the scheduler against a real S3-compatible server (weed):
// backups written, skipped, kept to the newest under a prefix, another
// prefix left alone; the newest found again as a restore's candidate; and
// a server that is down fails the backup, saying so.
func TestS3Store(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket("backups")
	for _, kv := range s3test.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx := context.Background()
	opts := S3Options{Endpoint: srv.Endpoint, Timeout: 10 * time.Second}
	store, err := Open(ctx, "s3://backups/prod/linkraft", opts)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Open(ctx, "s3://backups/prod/linkraft/older", opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Put(ctx, "keep-me", strings.NewReader("x"), 1); err != nil {
		t.Fatalf("put: %v", err)
	}
	c := &clock{t0}
	src := &state{cluster: clusterA, index: 1, content: "first"}
	s := New(Config{Store: store, Source: src, Interval: time.Hour, Retain: 2, SpoolDir: t.TempDir(),
		Logger: slog.New(slog.DiscardHandler), Now: c.now})
	for i, content := range []string{"first", "first", "second", "third"} {
		if content != src.content {
			src.index++
		}
		src.content = content
		s.tick(ctx)
		if st := s.Status(); st.Outcome == OutcomeFailed {
			t.Fatalf("backup %d: %s", i, st.Err)
		}
		c.t = c.t.Add(time.Hour)
	}
	names, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if mine := newestFirst(names, clusterA); len(mine) != 2 || len(names) != 2 {
		t.Fatalf("under the prefix: %v; want the newest two backups alone", names)
	}
	if left, _ := other.List(ctx); len(left) != 1 {
		t.Fatalf("under another prefix: %v; want it left alone", left)
	}

	for _, source := range []string{"s3://backups/prod/linkraft", "s3://backups/prod/linkraft/"} {
		cands, err := Candidates(ctx, source, opts)
		if err != nil || len(cands) != 2 {
			t.Fatalf("candidates of %s: %v, %v", source, cands, err)
		}
		data, err := readAll(cands[0].Store, cands[0].Name)
		if err != nil || data != backupBytes("third") {
			t.Fatalf("newest of %s: %q, %v", source, data, err)
		}
		one, err := Candidates(ctx, "s3://backups/prod/linkraft/"+cands[1].Name, opts)
		if err != nil || len(one) != 1 || one[0].Name != cands[1].Name {
			t.Fatalf("an object as the source: %v, %v", one, err)
		}
	}

	// Objects put there by someone without the cluster key: junk named as
	// dated in 2099 and a moment ahead, and a 32 MiB object named as the
	// newest backup, its checksum right. The next backup is written when
	// due, none of them is counted or pushes the newest good backup out
	// (two are kept), and a restore
	// passes over them, reading the large one as a stream.
	spool := t.TempDir()
	junk := []Name{plant(t, Dir{Path: spool}, clusterA, c.t.AddDate(73, 0, 0), "junk", false),
		plant(t, Dir{Path: spool}, clusterA, c.t.Add(5*time.Second), "junk 1", false),
		plant(t, Dir{Path: spool}, clusterA, c.t.Add(6*time.Second), "junk 2", false),
		plantLarge(t, Dir{Path: spool}, clusterA, c.t.Add(-time.Minute), 32<<20)}
	for _, n := range junk {
		f, err := os.Open(filepath.Join(spool, n.String()))
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		err = store.Put(ctx, n.String(), f, fi.Size())
		f.Close()
		if err != nil {
			t.Fatalf("put %s: %v", n, err)
		}
	}
	newest := newestFirst(names, clusterA)[0] // listed before the junk
	src.index, src.content = src.index+1, "after the junk"
	s.tick(ctx)
	if st := s.Status(); st.Outcome != OutcomeWritten || !st.At.Equal(c.t) {
		t.Fatalf("with junk in the bucket: %+v; want the backup written at %v", st, c.t)
	}
	names, _ = store.List(ctx)
	for _, n := range append(junk, newest) {
		if !slices.Contains(names, n.String()) {
			t.Errorf("%s was deleted; the bucket holds %v", n, names)
		}
	}
	cands, err := Candidates(ctx, "s3://backups/prod/linkraft", opts)
	if err != nil {
		t.Fatal(err)
	}
	var restored string
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = RestoreFile(ctx, cands, t.TempDir(), restoreInto(&restored), func(error) bool { return true }, slog.New(slog.DiscardHandler))
	runtime.ReadMemStats(&after)
	if err != nil || restored != backupBytes("after the junk") {
		t.Fatalf("restore: %q, %v; want the backup written after the junk", restored, err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("the restore allocated %d KiB", alloc>>10)
	if alloc > 8<<20 {
		t.Errorf("the restore allocated %d MiB past a 32 MiB object; want it read as a stream", alloc>>20)
	}

	srv.Stop()
	c.t = c.t.Add(time.Hour)
	src.index, src.content = src.index+1, "fourth"
	s.tick(ctx)
	if st := s.Status(); st.Outcome != OutcomeFailed || st.Err == "" {
		t.Fatalf("with the server down: %+v", st)
	}
	srv.Restart()
	s.tick(ctx)
	if st := s.Status(); st.Outcome != OutcomeWritten {
		t.Fatalf("with the server back: %+v", st)
	}
	if _, err := store.Get(ctx, "no-such-backup"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get of a missing object: %v", err)
	}
}

package backups

import (
	"context"
	"errors"
	"log/slog"
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
		data, err := cands[0].Fetch(ctx)
		if err != nil || string(data) != "LKRBthird" {
			t.Fatalf("newest of %s: %q, %v", source, data, err)
		}
		one, err := Candidates(ctx, "s3://backups/prod/linkraft/"+cands[1].Name, opts)
		if err != nil || len(one) != 1 || one[0].Name != cands[1].Name {
			t.Fatalf("an object as the source: %v, %v", one, err)
		}
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

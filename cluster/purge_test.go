package cluster

import (
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// TestPurger: a link expired for longer than the retention is purged (its
// code answers not found), one expired more recently is kept, and a state
// with nothing to purge proposes nothing.
func TestPurger(t *testing.T) {
	t.Parallel()
	now := time.Now()
	f := fsm.New()
	var index uint64
	applied := 0
	apply := func(cmd fsm.Command) (any, uint64, error) {
		index++
		applied++
		return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: cmd.Encode()}), index, nil
	}
	p := purger{state: f, apply: apply, retention: time.Hour, log: slog.New(slog.DiscardHandler)}
	p.purge(now)
	if applied != 0 {
		t.Fatalf("an empty state proposed %d purges", applied)
	}
	if _, _, err := apply(fsm.InitCommand{Key: [32]byte{1}}); err != nil {
		t.Fatal(err)
	}
	create := func(code string, expiresAt time.Time) {
		t.Helper()
		res, _, _ := apply(fsm.CreateBatch{Now: now.Add(-3 * time.Hour).UnixMilli(), Items: []fsm.CreateRequest{
			{URL: "https://example.com/" + code, Workspace: "default", CustomCode: code, ExpiresAt: expiresAt.UnixMilli()}}})
		if r := res.([]fsm.CreateResult); r[0].Err != nil {
			t.Fatalf("create %s: %v", code, r[0].Err)
		}
	}
	create("long-gone", now.Add(-2*time.Hour))
	create("just-gone", now.Add(-30*time.Minute))
	applied = 0
	p.purge(now)
	if applied != 1 {
		t.Fatalf("%d purges proposed, want 1", applied)
	}
	if _, ok := f.Get("long-gone"); ok {
		t.Error("a link expired two hours ago survived a purge with one hour's retention")
	}
	if _, ok := f.Get("just-gone"); !ok {
		t.Error("a link expired half an hour ago was purged within the retention")
	}
	applied = 0
	p.purge(now)
	if applied != 0 {
		t.Fatalf("a second purge with nothing left proposed %d", applied)
	}
}

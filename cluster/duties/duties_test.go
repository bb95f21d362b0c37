package duties

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// waiting is a duty that runs until its context ends, then counts its
// return in stopped.
func waiting(name string, stopped *atomic.Int32) Duty {
	return Duty{Name: name, Run: func(ctx context.Context) {
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond) // a duty that takes a moment to end
		stopped.Add(1)
	}}
}

// TestStopAllEndsEveryDutyAndWaits: the list starts alike and stops alike;
// StopAll returns only once every duty has returned.
func TestStopAllEndsEveryDutyAndWaits(t *testing.T) {
	t.Parallel()
	var stopped atomic.Int32
	m := New()
	if err := m.StartAll(context.Background(), []Duty{waiting("a", &stopped), waiting("b", &stopped), waiting("c", &stopped)}); err != nil {
		t.Fatal(err)
	}
	if got := m.Running(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("running %q", got)
	}
	m.StopAll()
	if got := stopped.Load(); got != 3 {
		t.Fatalf("%d duties returned when StopAll did, want 3", got)
	}
	if got := m.Running(); len(got) != 0 {
		t.Fatalf("running after StopAll: %q", got)
	}
	// The next term starts the same list again.
	if err := m.StartAll(context.Background(), []Duty{waiting("a", &stopped)}); err != nil {
		t.Fatal(err)
	}
	m.StopAll()
}

// TestStartRefusesADutyThatRuns: one of each name; the running one goes on.
func TestStartRefusesADutyThatRuns(t *testing.T) {
	t.Parallel()
	var stopped atomic.Int32
	m := New()
	if err := m.Start(context.Background(), waiting("a", &stopped)); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background(), waiting("a", &stopped)); err == nil {
		t.Fatal("a second duty a started")
	}
	m.Stop("a")
	m.Stop("a") // nothing to stop
	if got := stopped.Load(); got != 1 {
		t.Fatalf("%d duties returned, want 1", got)
	}
}

// TestDutiesEndWithTheirParent: a node that begins to stop ends its
// duties through the context they were started under.
func TestDutiesEndWithTheirParent(t *testing.T) {
	t.Parallel()
	var stopped atomic.Int32
	m := New()
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Start(ctx, waiting("a", &stopped)); err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for stopped.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the duty did not end with its parent context")
		}
		time.Sleep(time.Millisecond)
	}
	m.StopAll()
}

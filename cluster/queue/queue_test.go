package queue

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a handler that keeps every batch it was given and can hold
// them until released.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
	release chan struct{} // nil: handle at once
	started chan struct{}
}

func (r *recorder) handle(batch []int) {
	r.mu.Lock()
	r.batches = append(r.batches, slices.Clone(batch))
	r.mu.Unlock()
	if r.started != nil {
		r.started <- struct{}{}
	}
	if r.release != nil {
		<-r.release
	}
}

func (r *recorder) got() [][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

func run[T any](t *testing.T, q *Queue[T]) (stop func()) {
	t.Helper()
	ch, done := make(chan struct{}), make(chan struct{})
	go func() { q.Run(ch); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { close(ch); <-done }) }
	t.Cleanup(stop)
	return stop
}

// TestBatchesTakeWhatIsQueued: items queued while the handlers are busy
// are taken together, within MaxBatch, and items put together stay
// together.
func TestBatchesTakeWhatIsQueued(t *testing.T) {
	r := &recorder{release: make(chan struct{}), started: make(chan struct{}, 16)}
	q := New(Config[int]{MaxBatch: 3, InFlight: 1, Capacity: 16, Handle: r.handle})
	stop := run(t, q)
	ctx := context.Background()
	if err := q.Put(ctx, 1); err != nil {
		t.Fatal(err)
	}
	<-r.started // the one slot is taken: what follows queues up
	for _, items := range [][]int{{2}, {3}, {4}, {5, 6, 7, 8}} {
		if err := q.Put(ctx, items...); err != nil {
			t.Fatal(err)
		}
	}
	if !q.Busy() {
		t.Fatal("Busy is false with items queued")
	}
	close(r.release)
	waitFor(t, func() bool { return len(r.got()) == 4 })
	stop()
	want := [][]int{{1}, {2, 3, 4}, {5, 6, 7}, {8}}
	if got := r.got(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}
	if q.Busy() {
		t.Fatal("Busy after everything was handled")
	}
}

// TestInFlightBound: never more than InFlight handlers run at once.
func TestInFlightBound(t *testing.T) {
	const inFlight = 3
	var (
		mu                 sync.Mutex
		now, most, handled int
	)
	handle := func([]int) {
		mu.Lock()
		now++
		handled++
		most = max(most, now)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		now--
		mu.Unlock()
	}
	q := New(Config[int]{MaxBatch: 1, InFlight: inFlight, Capacity: 64, Handle: handle})
	stop := run(t, q)
	for i := range 50 {
		if err := q.Put(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return handled == 50 })
	stop()
	if most == 0 || most > inFlight {
		t.Fatalf("%d handlers ran at once, bound %d", most, inFlight)
	}
}

// TestSplit: each piece Split makes is handled apart.
func TestSplit(t *testing.T) {
	r := &recorder{release: make(chan struct{}), started: make(chan struct{}, 16)}
	odd := func(batch []int) [][]int {
		var odds, evens []int
		for _, v := range batch {
			if v%2 == 1 {
				odds = append(odds, v)
			} else {
				evens = append(evens, v)
			}
		}
		return [][]int{odds, evens}
	}
	q := New(Config[int]{MaxBatch: 10, InFlight: 1, Capacity: 16, Split: odd, Handle: r.handle})
	stop := run(t, q)
	if err := q.Put(context.Background(), 1, 2, 3, 4, 6); err != nil {
		t.Fatal(err)
	}
	<-r.started
	close(r.release)
	waitFor(t, func() bool { return len(r.got()) == 2 })
	stop()
	want := [][]int{{1, 3}, {2, 4, 6}}
	if got := r.got(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}
}

// TestStop: what is queued when the queue stops goes to Drop, handlers
// in flight finish before Run returns, and later puts are refused.
func TestStop(t *testing.T) {
	r := &recorder{release: make(chan struct{}), started: make(chan struct{}, 16)}
	var dropped []int
	q := New(Config[int]{MaxBatch: 1, InFlight: 1, Capacity: 16, Handle: r.handle,
		Drop: func(b []int) { dropped = append(dropped, b...) }})
	stop := run(t, q)
	ctx := context.Background()
	if err := q.Put(ctx, 1); err != nil {
		t.Fatal(err)
	}
	<-r.started
	if err := q.Put(ctx, 2); err != nil { // queued: the one slot is busy
		t.Fatal(err)
	}
	if err := q.Put(ctx, 3, 4); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Run returned with a handler in flight")
	case <-time.After(20 * time.Millisecond):
	}
	close(r.release)
	<-stopped
	if !slices.Equal(dropped, []int{2, 3, 4}) {
		t.Fatalf("dropped %v, want [2 3 4]", dropped)
	}
	if got := r.got(); len(got) != 1 {
		t.Fatalf("handled %v after the stop, want only [1]", got)
	}
	if err := q.Put(ctx, 5); !errors.Is(err, ErrStopped) {
		t.Fatalf("put after stop: %v, want ErrStopped", err)
	}
}

// TestStopDropsPiecesWaiting: a piece Split cut that waits for its slot
// when the queue stops goes to Drop, and counts as busy until then.
func TestStopDropsPiecesWaiting(t *testing.T) {
	r := &recorder{release: make(chan struct{}), started: make(chan struct{}, 16)}
	var dropped []int
	halves := func(batch []int) [][]int { return Pieces(batch, 2) }
	q := New(Config[int]{MaxBatch: 10, InFlight: 1, Capacity: 16, Split: halves, Handle: r.handle,
		Drop: func(b []int) { dropped = append(dropped, b...) }})
	stop := run(t, q)
	if err := q.Put(context.Background(), 1, 2, 3, 4, 5); err != nil {
		t.Fatal(err)
	}
	<-r.started
	waitFor(t, func() bool { return len(q.in) == 0 && q.Busy() })
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	<-q.stopped // Run has let go of the pieces; its handler still runs
	close(r.release)
	<-stopped
	if got := r.got(); len(got) != 1 || !slices.Equal(got[0], []int{1, 2}) {
		t.Fatalf("handled %v, want only [1 2]", got)
	}
	if !slices.Equal(dropped, []int{3, 4, 5}) {
		t.Fatalf("dropped %v, want [3 4 5]", dropped)
	}
}

// TestPutWaitsForRoom: a full queue holds Put until ctx ends.
func TestPutWaitsForRoom(t *testing.T) {
	q := New(Config[int]{MaxBatch: 1, InFlight: 1, Capacity: 1, Handle: func([]int) {}})
	if err := q.Put(context.Background(), 1); err != nil { // not running: stays queued
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := q.Put(ctx, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("put into a full queue: %v", err)
	}
}

func TestPieces(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		size int
		want [][]int
	}{
		{[]int{1, 2, 3, 4, 5}, 2, [][]int{{1, 2}, {3, 4}, {5}}},
		{[]int{1, 2}, 2, [][]int{{1, 2}}},
		{[]int{1, 2}, 0, [][]int{{1, 2}}},
	} {
		if got := Pieces(tc.in, tc.size); !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("Pieces(%v, %d) = %v, want %v", tc.in, tc.size, got, tc.want)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("condition not met within a second")
}

// TestStopAccountsForEveryPut: while puts keep coming, a stop leaves
// each one refused (ErrStopped), handled or dropped: none is accepted and
// then left in the queue, which would leave its caller waiting for an
// answer that never comes (a put that saw the queue running could take
// the room Drop had just made).
func TestStopAccountsForEveryPut(t *testing.T) {
	for round := range 400 {
		var mu sync.Mutex
		handled, dropped := 0, 0
		count := func(n *int) func([]int) {
			return func(b []int) { mu.Lock(); *n += len(b); mu.Unlock() }
		}
		q := New(Config[int]{MaxBatch: 4, InFlight: 2, Capacity: 2, Handle: count(&handled), Drop: count(&dropped)})
		stop := run(t, q)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var putters sync.WaitGroup
		var accepted atomic.Int64
		for range 32 {
			putters.Go(func() {
				for i := range 100_000 {
					err := q.Put(ctx, i)
					if err != nil {
						if !errors.Is(err, ErrStopped) {
							t.Errorf("put: %v", err)
						}
						return
					}
					accepted.Add(1)
				}
			})
		}
		time.Sleep(time.Millisecond)
		stop()
		putters.Wait()
		cancel()
		mu.Lock()
		if got := int64(handled + dropped); got != accepted.Load() {
			t.Fatalf("round %d: %d puts accepted, %d handled and %d dropped", round, accepted.Load(), handled, dropped)
		}
		mu.Unlock()
	}
}

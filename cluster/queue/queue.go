// Package queue hands what its callers put in to a handler in batches. It
// takes whatever is queued, at least one item and at most a batch's
// bound, and runs the handler on it on a goroutine of its own, with a
// bounded number of handlers in flight. Under light load a batch is a
// single item and waits for nothing; under heavy load batches fill while
// earlier ones are being handled: concurrency is what makes Raft fast (it
// commits queued entries with one fsync), and batching multiplies it.
//
// The cluster's create path runs two: the leader's proposer, whose
// batches become log entries, and a follower's relay, whose batches
// become requests to the leader.
package queue

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
)

// ErrStopped refuses a Put once the queue has stopped.
var ErrStopped = errors.New("queue stopped")

// Config is what a Queue does with what it takes.
type Config[T any] struct {
	// MaxBatch bounds the items of one batch. Items put together are
	// taken together, and may take a batch over the bound before Split.
	MaxBatch int
	// InFlight bounds the handlers running at once.
	InFlight int
	// Capacity is how many puts wait in the queue before Put blocks.
	Capacity int
	// Split cuts a batch taken into the batches handled apart, each with
	// an in-flight slot of its own. nil: pieces of at most MaxBatch.
	Split func(batch []T) [][]T
	// Handle handles one batch.
	Handle func(batch []T)
	// Drop is given what was still queued when the queue stopped.
	Drop func(batch []T)
}

// Queue is a batching queue; New makes one, Run takes from it.
type Queue[T any] struct {
	cfg     Config[T]
	in      chan []T
	forming atomic.Int64 // batches taken, waiting for a slot
	putting atomic.Int64 // calls of Put under way
	stopped chan struct{}
}

// New makes a queue that Run then serves.
func New[T any](cfg Config[T]) *Queue[T] {
	if cfg.Split == nil {
		cfg.Split = func(batch []T) [][]T { return Pieces(batch, cfg.MaxBatch) }
	}
	return &Queue[T]{cfg: cfg, in: make(chan []T, cfg.Capacity), stopped: make(chan struct{})}
}

// Put queues items, together: they are taken into one batch. It returns
// ctx's error if the queue stays full until ctx ends, ErrStopped once
// the queue has stopped.
func (q *Queue[T]) Put(ctx context.Context, items ...T) error {
	q.putting.Add(1) // before it looks at stopped: see drop
	defer q.putting.Add(-1)
	select {
	case <-q.stopped: // before the room a stopped queue still has
		return ErrStopped
	default:
	}
	select {
	case q.in <- items:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-q.stopped:
		return ErrStopped
	}
}

// Busy reports whether items are queued or a batch taken waits for its
// slot: a batch is about to be handled.
func (q *Queue[T]) Busy() bool { return len(q.in) > 0 || q.forming.Load() > 0 }

// Run takes batches and handles them until stop is closed. It takes a
// batch once a handler's slot is free, so that what is put while every
// handler is busy goes in one batch. Once stopped, it hands what is still
// queued, and pieces of a batch that wait for a slot, to Drop, waits for
// the handlers in flight and returns. A queue runs once.
func (q *Queue[T]) Run(stop <-chan struct{}) {
	slots := make(chan struct{}, q.cfg.InFlight)
	var running sync.WaitGroup
	defer func() {
		close(q.stopped)
		q.drop()
		running.Wait()
	}()
	for {
		// A slot first, then the batch: what is put while every handler is
		// busy stays queued, and is taken together once one is free.
		select {
		case slots <- struct{}{}:
		case <-stop:
			return
		}
		batch, ok := q.take(stop)
		if !ok {
			return
		}
		held := true // the slot taken above, for the first piece
		pieces := q.cfg.Split(batch)
		for i, b := range pieces {
			if len(b) == 0 {
				continue
			}
			if !held && !q.waitSlot(slots, stop) {
				for _, rest := range pieces[i:] {
					q.dropBatch(rest)
				}
				return
			}
			held = false
			running.Go(func() {
				defer func() { <-slots }()
				q.cfg.Handle(b)
			})
		}
		if held {
			<-slots
		}
	}
}

// waitSlot takes an in-flight slot for a batch taken, counted as forming
// meanwhile; false once stop is closed.
func (q *Queue[T]) waitSlot(slots chan struct{}, stop <-chan struct{}) bool {
	q.forming.Add(1)
	defer q.forming.Add(-1)
	select {
	case slots <- struct{}{}:
		return true
	case <-stop:
		return false
	}
}

// take waits for what is queued and takes it, up to MaxBatch items;
// false once stop is closed, which it looks at first: a stopped queue
// starts nothing.
func (q *Queue[T]) take(stop <-chan struct{}) ([]T, bool) {
	select {
	case <-stop:
		return nil, false
	default:
	}
	var batch []T
	select {
	case items := <-q.in:
		batch = append(batch, items...)
	case <-stop:
		return nil, false
	}
	for len(batch) < q.cfg.MaxBatch {
		select {
		case items := <-q.in:
			batch = append(batch, items...)
		default:
			return batch, true
		}
	}
	return batch, true
}

// drop hands everything still queued to Drop, once stopped is closed.
// A Put that saw the queue running may still send into the room drop
// makes, so drop goes on until no Put is under way: one that starts
// after that sees stopped closed and sends nothing.
func (q *Queue[T]) drop() {
	for {
		select {
		case items := <-q.in:
			q.dropBatch(items)
			continue
		default:
		}
		if q.putting.Load() == 0 && len(q.in) == 0 {
			return
		}
		runtime.Gosched()
	}
}

func (q *Queue[T]) dropBatch(items []T) {
	if q.cfg.Drop != nil && len(items) > 0 {
		q.cfg.Drop(items)
	}
}

// Pieces cuts batch into consecutive pieces of at most size items.
func Pieces[T any](batch []T, size int) [][]T {
	if size <= 0 {
		return [][]T{batch}
	}
	var pieces [][]T
	for len(batch) > size {
		pieces = append(pieces, batch[:size])
		batch = batch[size:]
	}
	return append(pieces, batch)
}

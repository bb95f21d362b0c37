package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRoundBatcherNeverReusesAnEarlierRound checks the property read-after-
// write depends on: a caller's answer comes from a call of fn that started
// after the caller arrived, while concurrent callers still share calls.
func TestRoundBatcherNeverReusesAnEarlierRound(t *testing.T) {
	t.Parallel()
	var calls, clock atomic.Uint64
	b := &roundBatcher{fn: func() (uint64, error) {
		calls.Add(1)
		started := clock.Add(1) // a logical time at which this round began
		time.Sleep(2 * time.Millisecond)
		return started, nil
	}}
	const callers = 200
	var wg sync.WaitGroup
	errs := make(chan string, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			arrived := clock.Load()
			got, err := b.do(context.Background())
			if err != nil {
				errs <- err.Error()
				return
			}
			if got <= arrived {
				errs <- "answer from a round that started before the caller arrived"
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if n := calls.Load(); n == 0 || n >= callers {
		t.Fatalf("%d callers made %d calls; concurrent callers should share rounds", callers, n)
	}
}

func TestRoundBatcherHonoursContext(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	defer close(block)
	b := &roundBatcher{fn: func() (uint64, error) { <-block; return 1, nil }}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.do(ctx); err == nil {
		t.Fatal("do returned without error while fn was blocked")
	}
}

package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Cleanup limits: how many deletes are in flight (few, and never more than
// -c: the seeds were created for the run, removing them should not load
// the cluster like a run), and how long removing them may take in all.
// Each delete is also bounded by the per-request timeout; 429s and 503s
// are retried as seeding retries them.
const (
	maxCleanupWorkers = 16
	cleanupTimeout    = 2 * time.Minute
)

// SeedCleanup is what became of the links the bench created before the
// run.
type SeedCleanup struct {
	Workspace string `json:"workspace"`
	Created   int    `json:"created"`
	// Kept: --keep-seeds left them in place.
	Kept    bool `json:"kept"`
	Removed int  `json:"removed"`
	Failed  int  `json:"failed"`
	// FirstError describes one failed delete, to act on.
	FirstError string `json:"first_error,omitempty"`
}

// removeSeeds deletes the seeded links through the targets round-robin and
// returns the outcome and the deletes sent per target, retries included.
// It runs even when ctx was cancelled (an interrupted run still cleans
// up), bounded by cleanupTimeout instead.
func removeSeeds(ctx context.Context, cfg *Config, targets []*target, s *seeded) (SeedCleanup, []int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var codes []string
	for _, c := range s.codes {
		if c != "" { // a create that failed or never ran
			codes = append(codes, c)
		}
	}
	res := SeedCleanup{Workspace: cfg.Workspace, Created: len(codes)}
	sent := make([]int64, len(targets))
	if len(codes) == 0 {
		return res, sent
	}
	var mu sync.Mutex // guards res and sent
	var wg sync.WaitGroup
	// No more than -c: each target's pool holds that many connections.
	workers := min(maxCleanupWorkers, cfg.Connections, len(codes))
	for w := range workers {
		wg.Go(func() {
			c := newConn(cfg.Timeout, cfg.Key, cfg.Workspace)
			mine := make([]int64, len(targets))
			var removed, failed int
			var firstErr error
			for i := w; i < len(codes); i += workers {
				tgt := i % len(targets)
				err := deleteOne(ctx, c, targets[tgt], codes[i], &mine[tgt])
				if err == nil {
					removed++
					continue
				}
				failed++
				if firstErr == nil {
					firstErr = fmt.Errorf("delete %s via %s: %w", codes[i], targets[tgt].addr, err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.Removed += removed
			res.Failed += failed
			if firstErr != nil && res.FirstError == "" {
				res.FirstError = firstErr.Error()
			}
			for t, n := range mine {
				sent[t] += n
			}
		})
	}
	wg.Wait()
	return res, sent
}

// deleteOne deletes one link, counting every request sent in *sent. Once
// ctx has ended it sends nothing and fails.
func deleteOne(ctx context.Context, c *conn, t *target, code string, sent *int64) error {
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		*sent++
		status, err := c.send(t, opDelete, code, nil)
		switch {
		case err != nil:
			return err
		case opDelete.ok(status):
			return nil
		case (status == 429 || status == 503) && attempt < maxSeedAttempts:
			if err := pause(ctx, time.Duration(attempt)*50*time.Millisecond); err != nil {
				return err
			}
		default:
			return fmt.Errorf("answered %d: %.200s", status, c.resp.Body())
		}
	}
}

package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Seeding limits: how many creates are in flight, how often one create is
// retried after a 429 or 503, and how long seeding may take in all.
const (
	maxSeedWorkers  = 32
	maxSeedAttempts = 20
	seedTimeout     = 2 * time.Minute
)

// seeded is the links a run reads.
type seeded struct {
	runID string
	codes []string
	urls  []string
	sent  []int64 // creates sent per target, retries included
}

// seedLinks creates cfg.seedCount() links in cfg.Workspace through the
// targets round-robin, with up to maxSeedWorkers creates in flight. A 429
// or 503 is retried after a pause (bounded); any other failure ends
// seeding with an error. seeded is returned even then: the links created
// before the failure are to be removed too.
func seedLinks(ctx context.Context, cfg *Config, targets []*target, runID string) (*seeded, error) {
	ctx, cancel := context.WithTimeout(ctx, seedTimeout)
	defer cancel()
	n := cfg.seedCount()
	s := &seeded{runID: runID, codes: make([]string, n), urls: make([]string, n), sent: make([]int64, len(targets))}
	workers := min(cfg.Connections, maxSeedWorkers, n)
	sent := make([][]int64, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		sent[w] = make([]int64, len(targets))
		wg.Go(func() {
			c := newConn(cfg.Timeout, cfg.Key, cfg.Workspace)
			for i := w; i < n && ctx.Err() == nil; i += workers {
				s.urls[i] = seedURL(runID, i)
				tgt := i % len(targets)
				code, err := seedOne(ctx, c, targets[tgt], s.urls[i], &sent[w][tgt])
				if errors.Is(err, errWorkspaceDenied) {
					errs[w] = fmt.Errorf("%w: the key needs links:write on workspace %q (an admin key, or one with workspaces [\"*\"], works)",
						err, cfg.Workspace)
					cancel()
					return
				}
				if err != nil {
					errs[w] = fmt.Errorf("link %d via %s: %w", i, targets[tgt].addr, err)
					cancel()
					return
				}
				s.codes[i] = code
			}
		})
	}
	wg.Wait()
	for _, counts := range sent {
		for t, k := range counts {
			s.sent[t] += k
		}
	}
	// The first failure cancelled the others: report it, not their
	// cancellations.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return s, err
		}
	}
	return s, ctx.Err()
}

// errWorkspaceDenied: a create answered 403, so the key may not create
// links in the bench's workspace.
var errWorkspaceDenied = errors.New("create answered 403 Forbidden")

// seedOne creates one link in c's workspace and returns its code, counting
// every request sent in *sent.
func seedOne(ctx context.Context, c *conn, t *target, url string, sent *int64) (string, error) {
	body := fmt.Appendf(nil, `{"url":%s,"workspace":%s}`, strconv.Quote(url), strconv.Quote(c.workspace))
	for attempt := 1; ; attempt++ {
		*sent++
		status, err := c.send(t, opCreate, "", body)
		switch {
		case err != nil:
			return "", err
		case opCreate.ok(status):
			return shortCode(c.resp.Body())
		case status == 401 && c.auth == "":
			return "", errors.New("create answered 401: the bench gave no API key; give one with links:write on the workspace " +
				"in --key or LINKRAFT_KEY (a new cluster writes an admin key to <data-dir>/admin.key)")
		case status == 401:
			return "", errors.New("create answered 401: the key in --key (or LINKRAFT_KEY) was refused: is it revoked, expired, or another cluster's?")
		case status == 403:
			return "", errWorkspaceDenied
		case (status == 429 || status == 503) && attempt < maxSeedAttempts:
			if err := pause(ctx, time.Duration(attempt)*50*time.Millisecond); err != nil {
				return "", err
			}
		case status == 429:
			return "", fmt.Errorf("still 429 Too Many Requests after %d attempts: start the nodes with --create-rate 0", attempt)
		default:
			return "", fmt.Errorf("create answered %d: %.200s", status, c.resp.Body())
		}
	}
}

func shortCode(body []byte) (string, error) {
	var l struct {
		ShortCode string `json:"short_code"`
	}
	if err := json.Unmarshal(body, &l); err != nil || l.ShortCode == "" {
		return "", fmt.Errorf("create answer has no short_code: %.200s", body)
	}
	return l.ShortCode, nil
}

// pause sleeps for d unless ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

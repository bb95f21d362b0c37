// Package clicks owns this node's clicks between the redirect and the log:
// their aggregation, their exactly-once flushes by sequence, and the file
// a stop without a leader leaves.
//
// A redirect must not wait for Raft: Counter.Record adds a click to a
// tally under a short lock, allocating nothing once the tally has grown
// to the node's working set. Every flush interval (Counter.Run) the tally
// becomes one fsm.ClickBatch, which a Sender (the node: applied there
// when it leads, posted to the leader otherwise) puts in the log. Exactly
// once rests on the batch's sequence:
//
//   - the state machine applies a batch only if its sequence is above the
//     last one it applied for the batch's node;
//   - a batch whose outcome is unknown (a failed Send) stays pending, and
//     the next flush sends it again with the same sequence; the clicks
//     counted meanwhile wait for the batch after it;
//   - a sequence is the largest of the previous one plus one, the wall
//     clock in nanoseconds, and the state machine's last for this node
//     plus one, so it keeps growing across restarts and even a wiped data
//     dir.
//
// A batch the leader refuses for good (ErrRefused) is dropped, loudly:
// sent again it would be refused again and hold back every later click.
//
// A stop whose last flush fails saves the pending batch and the counts in
// the data dir (Counter.Save, store.go), and the next start (New) sends
// them first, the batch with its own sequence. Only a kill -9 loses
// clicks: those counted since the last flush.
package clicks

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// Sender puts a click batch in the log. It returns nil once the batch is
// applied (or found applied before: the sequence makes a resend
// harmless), an error wrapping ErrRefused when the leader refuses it for
// good, and any other error when the outcome is unknown. It must not
// change b's counts.
type Sender interface {
	Send(ctx context.Context, b fsm.ClickBatch) error
}

// Applied is what the state machine has applied: the sequence of the last
// click batch of node. *fsm.FSM is one.
type Applied interface {
	ClickSeq(node string) uint64
}

// ErrRefused is a leader's permanent refusal of a click batch: sending it
// again would be refused again.
var ErrRefused = errors.New("click batch refused")

// maxBatchCounts bounds one batch's counts (about 5 MiB with 64-character
// custom codes and long referrer hosts); more wait for the next batch.
const maxBatchCounts = 16384

// Config is what a Counter needs.
type Config struct {
	Node    string  // this node's id, which every batch carries
	Dir     string  // the data dir, where a stop leaves what it could not send
	Applied Applied // the local state machine
	Sender  Sender
	// FlushTimeout bounds each flush Run starts (0: only Run's ctx does).
	FlushTimeout time.Duration
	Logger       *slog.Logger // default: slog.Default()
}

// Counter aggregates this node's clicks and flushes them into the log. The
// hot path only increments a tally entry under a short lock; two tallies
// alternate so a flush never allocates a new one.
type Counter struct {
	node         string
	dir          string
	applied      Applied
	sender       Sender
	flushTimeout time.Duration
	log          *slog.Logger

	mu     sync.Mutex
	counts *tally
	spare  *tally

	flushMu      sync.Mutex      // one flush at a time
	pending      *fsm.ClickBatch // sent but not known to be applied
	pendingCount atomic.Uint64   // clicks in pending, readable without flushMu
	lastSeq      uint64
	// saved: clicks the last stop wrote to dir are not all in the log yet.
	saved bool
}

// codeVisitor is what clicks are aggregated by: the code and the visitor.
type codeVisitor struct {
	code    string
	visitor fsm.Visitor
}

// New returns a Counter holding the clicks the last stop saved in
// cfg.Dir, which its first flush sends. A damaged file is set aside (as
// its name with ".damaged") and logged, not fatal: losing those clicks is
// better than not starting.
func New(cfg Config) *Counter {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Counter{
		node: cfg.Node, dir: cfg.Dir, applied: cfg.Applied, sender: cfg.Sender,
		flushTimeout: cfg.FlushTimeout, log: log,
		counts: newTally(), spare: newTally(),
	}
	c.restore()
	return c
}

// Record counts one redirect of code by visitor. code should be the
// string the FSM returned (fsm.Target.Code), and the visitor's referrer
// one kept for reuse, so that counting allocates nothing.
func (c *Counter) Record(code string, visitor fsm.Visitor) {
	c.mu.Lock()
	c.counts.add(code, visitor, 1)
	c.mu.Unlock()
}

// Pending is the number of clicks counted here and not yet flushed. It
// never waits for a flush in progress.
func (c *Counter) Pending() uint64 {
	total := c.pendingCount.Load()
	c.mu.Lock()
	total += c.counts.total()
	c.mu.Unlock()
	return total
}

// Flush sends the aggregated clicks. A batch whose outcome is unknown
// stays pending and is sent again, with the same sequence, by the next
// flush: the FSM applies it at most once, and we keep retrying until it
// has been applied at least once.
func (c *Counter) Flush(ctx context.Context) error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	// Two rounds: a retried batch first, then the clicks counted since.
	for range 2 {
		if c.pending == nil {
			c.setPending(c.take(time.Now()))
			if c.pending == nil {
				break
			}
		}
		err := c.sender.Send(ctx, *c.pending)
		if errors.Is(err, ErrRefused) {
			// Retrying what the leader refuses would hold back every later
			// click of this node; drop it loudly instead.
			c.log.Error("leader refused a click batch; dropping it", "clicks", c.pendingCount.Load(), "err", err)
			c.setPending(nil)
			return err
		}
		if err != nil {
			return err
		}
		c.setPending(nil)
	}
	if c.saved {
		if err := forgetSavedClicks(c.dir); err != nil {
			return err
		}
		c.saved = false
	}
	return nil
}

// Run flushes every interval until ctx ends; each flush ends with ctx or
// after the flush timeout, and what it could not send waits for the next.
func (c *Counter) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.flushOnTick(ctx)
		}
	}
}

func (c *Counter) flushOnTick(ctx context.Context) {
	if c.flushTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.flushTimeout)
		defer cancel()
	}
	if err := c.Flush(ctx); err != nil {
		c.log.Warn("click flush failed; will retry", "err", err)
	}
}

// Save writes what a flush could not send (the pending batch and the
// counts) to the data dir, for the next New to send: a stop calls it when
// its last flush failed.
func (c *Counter) Save() error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	counts := c.counts.counts()
	c.mu.Unlock()
	if c.pending == nil && len(counts) == 0 {
		return nil
	}
	return saveClicks(c.dir, c.pending, counts)
}

// restore takes back the clicks the last stop saved: the batch with an
// unknown outcome is sent first, with its own sequence, and the rest
// joins the next batch.
func (c *Counter) restore() {
	pending, counts, err := loadClicks(c.dir)
	if err != nil {
		c.log.Error("the clicks saved by the last stop are lost", "err", err)
		path := filepath.Join(c.dir, pendingClicksFile)
		if rerr := os.Rename(path, path+".damaged"); rerr != nil {
			c.log.Error("set the damaged clicks file aside", "err", rerr)
		}
		return
	}
	if pending == nil && len(counts) == 0 {
		return
	}
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	if pending != nil {
		c.setPending(pending)
		c.lastSeq = pending.Seq
	}
	c.mu.Lock()
	for key, n := range counts {
		c.counts.add(key.code, key.visitor, n)
	}
	c.mu.Unlock()
	c.saved = true
	c.log.Info("clicks saved by the last stop will be sent", "clicks", c.Pending())
}

func (c *Counter) setPending(b *fsm.ClickBatch) {
	c.pending = b
	var total uint64
	if b != nil {
		for _, cc := range b.Counts {
			total += cc.Count
		}
	}
	c.pendingCount.Store(total)
}

// take moves the aggregated counts into a new batch, or returns nil when
// there is nothing to flush. Called with flushMu held.
//
// The batch sequence must exceed every sequence this node id ever had
// applied, across restarts and even a wiped data dir: it is the largest of
// the previous one plus one, the wall clock in nanoseconds, and what the
// local FSM has applied for this node plus one.
func (c *Counter) take(now time.Time) *fsm.ClickBatch {
	c.mu.Lock()
	counts := c.counts
	c.counts, c.spare = c.spare, counts
	c.mu.Unlock()
	size := counts.len()
	if size == 0 {
		return nil
	}
	b := &fsm.ClickBatch{Node: c.node, Now: now.UnixMilli(), Visitors: true,
		Counts: make([]fsm.ClickCount, 0, min(size, maxBatchCounts))}
	counts.each(func(key codeVisitor, n uint64) {
		if len(b.Counts) == maxBatchCounts {
			c.mu.Lock()
			c.counts.add(key.code, key.visitor, n) // over the batch limit: next batch
			c.mu.Unlock()
			return
		}
		b.Counts = append(b.Counts, fsm.ClickCount{Code: key.code, Count: n, Visitor: key.visitor})
	})
	counts.reset()
	// By code, so that WithoutVisitors merges a code's counts into one.
	slices.SortStableFunc(b.Counts, func(x, y fsm.ClickCount) int { return cmp.Compare(x.Code, y.Code) })
	b.Seq = max(c.lastSeq+1, uint64(now.UnixNano()), c.applied.ClickSeq(c.node)+1)
	c.lastSeq = b.Seq
	return b
}

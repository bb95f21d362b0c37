package cluster

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"

	"github.com/linkraft/linkraft/cluster/wire"
)

// clickCounter aggregates this node's redirects between flushes. The hot
// path only increments a tally entry under a short lock; two tallies
// alternate so a flush never allocates a new one.
type clickCounter struct {
	node string
	fsm  *fsm.FSM

	mu     sync.Mutex
	counts *clickTally
	spare  *clickTally

	flushMu      sync.Mutex      // one flush at a time
	pending      *fsm.ClickBatch // proposed but not known to be applied
	pendingCount atomic.Uint64   // clicks in pending, readable without flushMu
	lastSeq      uint64
	// saved: clicks the last stop wrote to the data dir are not all in the
	// log yet (clickstore.go).
	saved bool
}

// clickKey is what clicks are aggregated by: the code and the visitor.
type clickKey struct {
	code    string
	visitor fsm.Visitor
}

// maxClickBatchCodes bounds one batch's counts (about 5 MiB with
// 64-character custom codes and long referrer hosts); more wait for the
// next flush.
const maxClickBatchCodes = 16384

func newClickCounter(node string, f *fsm.FSM) *clickCounter {
	return &clickCounter{node: node, fsm: f, counts: newClickTally(), spare: newClickTally()}
}

// RecordClick counts one redirect of code by visitor. code should be the
// string the FSM returned (fsm.Target.Code), and the visitor's referrer
// one kept for reuse, so that counting allocates nothing.
func (n *Node) RecordClick(code string, visitor fsm.Visitor) {
	c := n.clicks
	c.mu.Lock()
	c.counts.add(code, visitor, 1)
	c.mu.Unlock()
}

// PendingClicks is the number of clicks counted here and not yet flushed.
// It never waits for a flush in progress.
func (n *Node) PendingClicks() uint64 {
	c := n.clicks
	total := c.pendingCount.Load()
	c.mu.Lock()
	total += c.counts.total()
	c.mu.Unlock()
	return total
}

func (c *clickCounter) setPending(b *fsm.ClickBatch) {
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
func (c *clickCounter) take(now time.Time) *fsm.ClickBatch {
	c.mu.Lock()
	counts := c.counts
	c.counts, c.spare = c.spare, counts
	c.mu.Unlock()
	size := counts.len()
	if size == 0 {
		return nil
	}
	b := &fsm.ClickBatch{Node: c.node, Now: now.UnixMilli(), Visitors: true,
		Counts: make([]fsm.ClickCount, 0, min(size, maxClickBatchCodes))}
	counts.each(func(key clickKey, n uint64) {
		if len(b.Counts) == maxClickBatchCodes {
			c.mu.Lock()
			c.counts.add(key.code, key.visitor, n) // over the batch limit: next flush
			c.mu.Unlock()
			return
		}
		b.Counts = append(b.Counts, fsm.ClickCount{Code: key.code, Count: n, Visitor: key.visitor})
	})
	counts.reset()
	// By code, so that WithoutVisitors merges a code's counts into one.
	slices.SortStableFunc(b.Counts, func(x, y fsm.ClickCount) int { return cmp.Compare(x.Code, y.Code) })
	b.Seq = max(c.lastSeq+1, uint64(now.UnixNano()), c.fsm.ClickSeq(c.node)+1)
	c.lastSeq = b.Seq
	return b
}

// FlushClicks proposes the aggregated clicks. A batch whose outcome is
// unknown stays pending and is proposed again, with the same sequence, by
// the next flush: the FSM applies it at most once, and we keep retrying
// until it has been applied at least once.
func (n *Node) FlushClicks(ctx context.Context) error {
	c := n.clicks
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
		err := n.proposeClicks(ctx, n.encodeClicks(ctx, *c.pending))
		if errors.Is(err, ErrRefused) {
			// Retrying what the leader refuses would hold back every later
			// click of this node; drop it loudly instead.
			n.log.Error("leader refused a click batch; dropping it", "clicks", c.pendingCount.Load(), "err", err)
			c.setPending(nil)
			return err
		}
		if err != nil {
			return err
		}
		c.setPending(nil)
	}
	if c.saved {
		if err := forgetSavedClicks(n.cfg.DataDir); err != nil {
			return err
		}
		c.saved = false
	}
	return nil
}

// restoreSavedClicks takes back the clicks the last stop saved: the batch
// with an unknown outcome is proposed first, with its own sequence, and
// the rest joins the next batch. A damaged file is set aside, not fatal:
// losing those clicks is better than not starting.
func (n *Node) restoreSavedClicks() {
	c := n.clicks
	pending, counts, err := loadClicks(n.cfg.DataDir)
	if err != nil {
		n.log.Error("the clicks saved by the last stop are lost", "err", err)
		path := filepath.Join(n.cfg.DataDir, pendingClicksFile)
		if rerr := os.Rename(path, path+".damaged"); rerr != nil {
			n.log.Error("set the damaged clicks file aside", "err", rerr)
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
	for key, v := range counts {
		c.counts.add(key.code, key.visitor, v)
	}
	c.mu.Unlock()
	c.saved = true
	n.log.Info("clicks saved by the last stop will be sent", "clicks", n.PendingClicks())
}

// saveUnflushedClicks writes what a final flush could not send to the
// data dir (see clickstore.go).
func (n *Node) saveUnflushedClicks() error {
	c := n.clicks
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	counts := c.counts.counts()
	c.mu.Unlock()
	if c.pending == nil && len(counts) == 0 {
		return nil
	}
	return saveClicks(n.cfg.DataDir, c.pending, counts)
}

// encodeClicks writes a batch with its visitors once every server of the
// cluster applies them (see levels.go), and without them before: a
// cluster being upgraded counts clicks, and leaves bots out, as the
// previous release does.
func (n *Node) encodeClicks(ctx context.Context, b fsm.ClickBatch) []byte {
	if b.Visitors && n.requireLevel(ctx, fsm.LevelVisits) != nil {
		b = b.WithoutVisitors()
	}
	return b.Encode()
}

// proposeClicks applies a batch here when this node leads and hands it to
// the leader otherwise, waiting up to ctx for a leader to exist. Only a
// failure to reach a leader is retried here; an unknown outcome is left to
// the next flush, which proposes the same batch again.
func (n *Node) proposeClicks(ctx context.Context, batch []byte) error {
	return n.withLeader(ctx, 50*time.Millisecond, func(to leaderTarget) (bool, error) {
		var err error
		if to.self {
			_, _, err = n.applyEntry(batch)
		} else {
			var answer wire.ClicksAnswer
			err = n.call(ctx, to.addr, fasthttp.MethodPost, wire.PathClicks, batch, &answer)
		}
		return !errors.Is(err, ErrNoLeader), err
	})
}

func (n *Node) runClickFlusher() {
	t := time.NewTicker(n.cfg.ClickFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-n.closing:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(n.stopping, n.cfg.WriteTimeout)
			if err := n.FlushClicks(ctx); err != nil {
				n.log.Warn("click flush failed; will retry", "err", err)
			}
			cancel()
		}
	}
}

// errNotClickBatch refuses a clicks request whose body is something else.
var errNotClickBatch = errors.New("not a click batch")

// applyClicks applies a click batch another node sent. Leader only. data
// is copied: Raft keeps the entry (its log cache serves followers later),
// while callers' buffers, such as fasthttp's request body, are reused.
func (n *Node) applyClicks(data []byte) (bool, error) {
	data = bytes.Clone(data)
	cmd, err := fsm.DecodeCommand(data)
	if _, ok := cmd.(fsm.ClickBatch); err != nil || !ok {
		return false, fmt.Errorf("%w: %v", errNotClickBatch, err)
	}
	if !n.IsLeader() {
		return false, ErrNoLeader
	}
	resp, _, err := n.applyEntry(data)
	if err != nil {
		return false, err
	}
	applied, _ := resp.(bool)
	return applied, nil
}

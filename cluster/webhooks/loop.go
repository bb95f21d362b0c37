package webhooks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// position is where one webhook's delivery loop stands.
type position struct {
	delivered uint64    // the last Seq this loop delivered
	unacked   int       // deliveries since the last acknowledgement
	firstAt   time.Time // of the first of them
	failures  int       // consecutive failed attempts
}

// ackDue reports whether what p delivered beyond acked is to be
// acknowledged now, with more events left to send or not.
func (d *Delivery) ackDue(p *position, acked uint64, more bool) bool {
	return p.delivered > acked && (!more || p.failures > 0 || p.unacked >= ackEvents || time.Since(p.firstAt) >= d.ackDelay)
}

// deliver is one webhook's delivery loop. It POSTs the pending events one
// at a time, in order, and proposes an acknowledgement of what it
// delivered. It starts from the replicated position, so a new leader
// sends again at most what the last one delivered without acknowledging.
// It ends with ctx or the webhook.
func (d *Delivery) deliver(ctx context.Context, id string) {
	var p position
	for {
		changed := d.applied()
		info, events, ok := d.state.WebhookPending(id, p.delivered, readBatch)
		if !ok {
			return
		}
		d.pending.WithLabelValues(id).Set(float64(info.Pending))
		if p.delivered >= info.Next {
			// A restore put an older outbox in place: its numbering is
			// the backup's, and what this loop delivered is not in it.
			p.delivered, p.unacked = 0, 0
		}
		p.delivered = max(p.delivered, info.Acked)
		if d.ackDue(&p, info.Acked, len(events) > 0) {
			if !d.acknowledge(ctx, id, p.delivered) {
				return
			}
			p.unacked = 0
			continue
		}
		if p.failures > 0 && !sleepCtx(ctx, d.retryWait(p.failures)) {
			return
		}
		if len(events) == 0 {
			if !d.idle(ctx, changed, &p) {
				return
			}
			continue
		}
		if !d.send(ctx, &info.Webhook, events, &p) {
			return
		}
	}
}

// acknowledge proposes the acknowledgement of the webhook's events up to
// seq; after a failure it waits before the loop tries again. It reports
// whether the loop goes on.
func (d *Delivery) acknowledge(ctx context.Context, id string, seq uint64) bool {
	err := d.acks.Propose(ctx, fsm.WebhookAckCommand{ID: id, Seq: seq})
	if err == nil {
		return true
	}
	if ctx.Err() != nil || errors.Is(err, fsm.ErrWebhookNotFound) {
		return false
	}
	err = fmt.Errorf("acknowledge webhook %s up to %d: %w", id, seq, err)
	d.log.Warn("webhook acknowledgement failed; will retry", "webhook", id, "err", err)
	return sleepCtx(ctx, d.retryMin)
}

// idle waits, with nothing to send, for the state to change or an
// acknowledgement to fall due. It reports whether the loop goes on.
func (d *Delivery) idle(ctx context.Context, changed <-chan struct{}, p *position) bool {
	var due <-chan time.Time
	if p.unacked > 0 {
		due = time.After(time.Until(p.firstAt.Add(d.ackDelay)))
	}
	select {
	case <-ctx.Done():
		return false
	case <-changed:
	case <-due:
	}
	return true
}

// send POSTs events in order until one fails, moving p along. It reports
// whether the loop goes on.
func (d *Delivery) send(ctx context.Context, w *fsm.Webhook, events []fsm.WebhookEvent, p *position) bool {
	for _, ev := range events {
		err := d.post(ctx, w, &ev)
		if ctx.Err() != nil {
			return false
		}
		d.record(w.ID, time.Now(), err)
		if err != nil {
			p.failures++
			d.deliveries.WithLabelValues(w.ID, "error").Inc()
			d.log.Debug("webhook delivery failed", "webhook", w.ID, "seq", ev.Seq, "attempt", p.failures, "err", err)
			return true
		}
		p.failures = 0
		d.deliveries.WithLabelValues(w.ID, "ok").Inc()
		p.delivered = ev.Seq
		if p.unacked == 0 {
			p.firstAt = time.Now()
		}
		p.unacked++
	}
	return true
}

// retryWait is the wait before the next attempt after failures
// consecutive failures: retryMin doubling to retryMax, with jitter.
func (d *Delivery) retryWait(failures int) time.Duration {
	w := d.retryMax
	if failures <= 20 {
		w = min(d.retryMin<<(failures-1), d.retryMax)
	}
	return w/2 + rand.N(w/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

package cluster

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// Webhook delivery (see DESIGN.md, "Webhooks"): the FSM keeps each
// webhook's outbox and delivery position; the leader runs one delivery
// loop per webhook that POSTs the pending events in order and proposes an
// acknowledgement for what was delivered.
const (
	// webhookTimeout bounds one delivery attempt, connection included.
	webhookTimeout = 10 * time.Second
	// A failed attempt is retried after webhookRetryMin, doubling up to
	// webhookRetryMax, each wait drawn between half and all of it so that
	// receivers that come back are not hit by every webhook at once.
	webhookRetryMin = time.Second
	webhookRetryMax = 5 * time.Minute
	// An acknowledgement is proposed once nothing delivered is left to
	// send, after webhookAckEvents deliveries, or webhookAckDelay after
	// the first unacknowledged one: one log entry per event would cost a
	// busy cluster more than the events, and what a new leader sends
	// again is bounded by these.
	webhookAckEvents = 64
	webhookAckDelay  = 200 * time.Millisecond
	// webhookReadBatch is how many events a loop reads from the FSM at a
	// time.
	webhookReadBatch = 64
	// webhookRescan is how often the leader looks for webhooks added or
	// removed while no entry was applied, and the most a burst of applies
	// makes it look.
	webhookRescan  = time.Second
	webhookRecheck = 100 * time.Millisecond
	// webhookAnswerBytes is how much of a receiver's answer is read, so
	// that the connection can be reused; the rest is not waited for.
	webhookAnswerBytes = 64 << 10
)

// Webhook delivery headers.
const (
	HeaderWebhookEvent     = "X-Linkraft-Event"
	HeaderWebhookDelivery  = "X-Linkraft-Delivery"
	HeaderWebhookSignature = "X-Linkraft-Signature"
)

// WebhookStatus is a webhook as GET /admin/webhooks shows it: the
// replicated part and the delivery statistics of this node's time as
// leader. Secret is the webhook's: callers must not show it.
type WebhookStatus struct {
	fsm.WebhookInfo
	FailedAttempts uint64
	LastDelivery   time.Time // zero: none since this node started
	LastError      string
	LastErrorAt    time.Time
}

// hookStats are the delivery statistics that change with every attempt:
// kept in memory by the leader, not replicated (an attempt is not a
// change of state).
type hookStats struct {
	mu    sync.Mutex
	byID  map[string]*WebhookStatus
	httpc *http.Client
}

func newHookStats() *hookStats {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 2
	transport.ResponseHeaderTimeout = webhookTimeout
	return &hookStats{
		byID: map[string]*WebhookStatus{},
		httpc: &http.Client{
			Transport: transport,
			Timeout:   webhookTimeout,
			// A redirect is not a delivery: the receiver must answer 2xx
			// at the registered URL, and a body signed for one receiver
			// must not be sent on to another.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

func (h *hookStats) record(id string, at time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st, ok := h.byID[id]
	if !ok {
		st = &WebhookStatus{}
		h.byID[id] = st
	}
	if err == nil {
		st.LastDelivery = at
		return
	}
	st.FailedAttempts++
	st.LastError, st.LastErrorAt = err.Error(), at
}

// forget drops the statistics of webhooks that no longer exist.
func (h *hookStats) forget(keep map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.byID {
		if !keep[id] {
			delete(h.byID, id)
		}
	}
}

// Webhooks lists the webhooks with their delivery state. Only the
// leader's statistics mean anything: httpd forwards the request to it.
func (n *Node) Webhooks() []WebhookStatus {
	infos := n.fsm.Webhooks()
	out := make([]WebhookStatus, len(infos))
	n.hooks.mu.Lock()
	defer n.hooks.mu.Unlock()
	for i, info := range infos {
		if st, ok := n.hooks.byID[info.ID]; ok {
			out[i] = *st
		}
		out[i].WebhookInfo = info
	}
	return out
}

// runWebhooks is a leader duty: it runs one delivery loop per registered
// webhook, starting loops for new ones and ending those of removed ones,
// until stop (leadership ends) or the node stops.
func (n *Node) runWebhooks(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(n.stopping)
	defer cancel()
	type loop struct {
		stop context.CancelFunc
		done chan struct{}
	}
	loops := map[string]loop{}
	defer func() {
		cancel()
		for _, l := range loops {
			<-l.done
		}
		// Pending counts come from the leader only.
		n.metrics.hookPending.Reset()
	}()
	rescan := time.NewTicker(webhookRescan)
	defer rescan.Stop()
	for {
		changed := n.machine.applied.wait()
		keep := map[string]bool{}
		for _, info := range n.fsm.Webhooks() {
			keep[info.ID] = true
			if _, ok := loops[info.ID]; ok {
				continue
			}
			loopCtx, stopLoop := context.WithCancel(ctx)
			l := loop{stop: stopLoop, done: make(chan struct{})}
			loops[info.ID] = l
			id := info.ID
			go func() {
				defer close(l.done)
				n.deliverWebhook(loopCtx, id)
			}()
		}
		for id, l := range loops {
			if !keep[id] {
				// Its series go once the loop can no longer add to them.
				l.stop()
				<-l.done
				delete(loops, id)
				n.metrics.hookPending.DeleteLabelValues(id)
				n.metrics.hookDeliveries.DeletePartialMatch(map[string]string{"webhook": id})
			}
		}
		n.hooks.forget(keep)
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-rescan.C:
		case <-changed:
			// Every applied batch wakes this loop; look again only after
			// a short pause, so a busy cluster costs one look per pause.
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(webhookRecheck):
			}
		}
	}
}

// deliverWebhook is one webhook's delivery loop on the leader. It POSTs
// the pending events one at a time, in order, and proposes an
// acknowledgement of what it delivered. It starts from the replicated
// position, so a new leader sends again at most what the last one
// delivered without acknowledging. It ends with ctx or the webhook.
func (n *Node) deliverWebhook(ctx context.Context, id string) {
	var (
		delivered uint64    // the last Seq this loop delivered
		unacked   int       // deliveries since the last acknowledgement
		firstAt   time.Time // of the first of them
		failures  int       // consecutive failed attempts
	)
	for {
		changed := n.machine.applied.wait()
		info, events, ok := n.fsm.WebhookPending(id, delivered, webhookReadBatch)
		if !ok {
			return
		}
		n.metrics.hookPending.WithLabelValues(id).Set(float64(info.Pending))
		if delivered >= info.Next {
			// A restore put an older outbox in place: its numbering is
			// the backup's, and what this loop delivered is not in it.
			delivered, unacked = 0, 0
		}
		delivered = max(delivered, info.Acked)
		if delivered > info.Acked && (len(events) == 0 || failures > 0 || unacked >= webhookAckEvents || time.Since(firstAt) >= webhookAckDelay) {
			if err := n.ackWebhook(ctx, id, delivered); err != nil {
				if ctx.Err() != nil || errors.Is(err, fsm.ErrWebhookNotFound) {
					return
				}
				n.log.Warn("webhook acknowledgement failed; will retry", "webhook", id, "err", err)
				if !sleepCtx(ctx, webhookRetryMin) {
					return
				}
			}
			unacked = 0
			continue
		}
		if failures > 0 {
			if !sleepCtx(ctx, retryWait(failures)) {
				return
			}
		}
		if len(events) == 0 {
			var ackDue <-chan time.Time
			if unacked > 0 {
				ackDue = time.After(time.Until(firstAt.Add(webhookAckDelay)))
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-ackDue:
			}
			continue
		}
		for _, ev := range events {
			err := n.postEvent(ctx, &info.Webhook, &ev)
			if ctx.Err() != nil {
				return
			}
			n.hooks.record(id, time.Now(), err)
			if err != nil {
				failures++
				n.metrics.hookDeliveries.WithLabelValues(id, "error").Inc()
				n.log.Debug("webhook delivery failed", "webhook", id, "seq", ev.Seq, "attempt", failures, "err", err)
				break
			}
			failures = 0
			n.metrics.hookDeliveries.WithLabelValues(id, "ok").Inc()
			delivered = ev.Seq
			if unacked == 0 {
				firstAt = time.Now()
			}
			unacked++
		}
	}
}

// retryWait is the wait before the next attempt after failures
// consecutive failures: 1 s doubling to 5 min, with jitter.
func retryWait(failures int) time.Duration {
	d := webhookRetryMax
	if failures <= 20 {
		d = min(webhookRetryMin<<(failures-1), webhookRetryMax)
	}
	return d/2 + rand.N(d/2+1)
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

// ackWebhook proposes that the webhook's events up to seq were delivered.
func (n *Node) ackWebhook(ctx context.Context, id string, seq uint64) error {
	if _, err := n.Propose(ctx, fsm.WebhookAckCommand{ID: id, Seq: seq}, ProposeOptions{}); err != nil {
		return fmt.Errorf("acknowledge webhook %s up to %d: %w", id, seq, err)
	}
	return nil
}

// postEvent makes one delivery attempt of ev to the webhook.
func (n *Node) postEvent(ctx context.Context, w *fsm.Webhook, ev *fsm.WebhookEvent) error {
	body, err := EventBody(w.ID, ev)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, webhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "linkraft-webhooks")
	req.Header.Set(HeaderWebhookEvent, ev.Type.String())
	req.Header.Set(HeaderWebhookDelivery, DeliveryID(w.ID, ev.Seq))
	req.Header.Set(HeaderWebhookSignature, Signature(w.Secret, body))
	resp, err := n.hooks.httpc.Do(req)
	if err != nil {
		// The URL may hold credentials: say what failed without it.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("POST: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, webhookAnswerBytes))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return nil
}

// DeliveryID is an event's X-Linkraft-Delivery and body id: the webhook's
// id and the event's Seq, the same for every attempt.
func DeliveryID(webhook string, seq uint64) string {
	return webhook + "-" + strconv.FormatUint(seq, 10)
}

// Signature is X-Linkraft-Signature for body: "sha256=" and the hex
// HMAC-SHA256 of the exact body with the webhook's secret.
func Signature(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// eventJSON is the body of a delivery.
type eventJSON struct {
	ID        string `json:"id"`
	Event     string `json:"event"`
	Webhook   string `json:"webhook"`
	CreatedAt string `json:"created_at"`
	Data      any    `json:"data"`
}

type eventLinkJSON struct {
	ShortCode   string   `json:"short_code"`
	Domain      string   `json:"domain"`
	OriginalURL string   `json:"original_url"`
	Workspace   string   `json:"workspace"`
	Title       string   `json:"title"`
	Tags        []string `json:"tags"`
	ExpiresAt   *string  `json:"expires_at"`
}

type eventHitJSON struct {
	ShortCode string `json:"short_code"`
	Domain    string `json:"domain"`
	Clicks    uint64 `json:"clicks"`
}

// EventBody is the JSON body delivered for ev.
func EventBody(webhook string, ev *fsm.WebhookEvent) ([]byte, error) {
	b := eventJSON{ID: DeliveryID(webhook, ev.Seq), Event: ev.Type.String(), Webhook: webhook, CreatedAt: rfc3339(ev.At)}
	if ev.Type == fsm.EventLinkClicked {
		hits := make([]eventHitJSON, len(ev.Hits))
		for i, h := range ev.Hits {
			hits[i] = eventHitJSON{ShortCode: h.Code, Domain: h.Domain, Clicks: h.Clicks}
		}
		b.Data = map[string]any{"clicks": hits}
	} else {
		l := ev.Link
		d := eventLinkJSON{ShortCode: l.Code, Domain: l.Domain, OriginalURL: l.URL, Workspace: l.Workspace, Title: l.Title, Tags: l.Tags}
		if d.Tags == nil {
			d.Tags = []string{}
		}
		if l.ExpiresAt != 0 {
			at := rfc3339(l.ExpiresAt)
			d.ExpiresAt = &at
		}
		b.Data = d
	}
	body, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("webhook event body: %w", err)
	}
	return body, nil
}

// rfc3339 formats unix milliseconds as the API does everywhere.
func rfc3339(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

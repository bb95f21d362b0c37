// Package webhooks delivers each webhook's replicated outbox from the
// leader: one loop per webhook POSTs its pending events in order, at least
// once, signed with the webhook's secret, and acknowledges what it
// delivered through the log, so that a new leader resumes where the last
// acknowledgement left off.
//
// The outboxes and the acknowledged positions are the state's
// (fsm/webhooks.go). This package owns the attempts: HTTP, signing,
// retries with backoff, the batching of acknowledgements, and the
// statistics and metrics of the attempts, which are the leader's own and
// not replicated. It knows nothing of Raft: it reads the state, waits for
// the next applied entry and proposes acknowledgements through small
// interfaces, which cluster implements.
package webhooks

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/input"
)

const (
	// attemptTimeout bounds one delivery attempt, connection included.
	attemptTimeout = 10 * time.Second
	// A failed attempt is retried after retryMin, doubling up to
	// retryMax, each wait drawn between half and all of it so that
	// receivers that come back are not hit by every webhook at once.
	retryMin = time.Second
	retryMax = 5 * time.Minute
	// An acknowledgement is proposed once nothing delivered is left to
	// send, after ackEvents deliveries, or ackDelay after the first
	// unacknowledged one: one log entry per event would cost a busy
	// cluster more than the events, and what a new leader sends again is
	// bounded by these.
	ackEvents = 64
	ackDelay  = 200 * time.Millisecond
	// readBatch is how many events a loop reads from the state at a time.
	readBatch = 64
	// rescan is how often Run looks for webhooks added or removed while
	// no entry was applied, and recheck the most a burst of applies makes
	// it look.
	rescan  = time.Second
	recheck = 100 * time.Millisecond
	// answerBytes is how much of a receiver's answer is read, so that the
	// connection can be reused; the rest is not waited for.
	answerBytes = 64 << 10
)

// State is the replicated state delivery reads: *fsm.FSM.
type State interface {
	Webhooks() []fsm.WebhookInfo
	WebhookPending(id string, after uint64, limit int) (fsm.WebhookInfo, []fsm.WebhookEvent, bool)
}

// Proposer writes an acknowledgement (fsm.WebhookAckCommand) through the
// log. It returns once the entry is applied on this node; the state's
// refusal (fsm.ErrWebhookNotFound, ...) is its error.
type Proposer interface {
	Propose(ctx context.Context, cmd fsm.Command) error
}

// WaitApplied returns a channel closed once the state changes: after the
// next applied entry or restore. A loop takes the channel before it reads
// State, so no change slips between the read and the wait.
type WaitApplied func() <-chan struct{}

// Status is a webhook as GET /admin/webhooks shows it: the replicated
// part and the delivery statistics of this node's time as leader. Secret
// is the webhook's: callers must not show it.
type Status struct {
	fsm.WebhookInfo
	FailedAttempts uint64
	LastDelivery   time.Time // zero: none since this node started
	LastError      string
	LastErrorAt    time.Time
}

// Delivery delivers the webhooks' outboxes while Run runs, which the
// leader does, and keeps the statistics of its attempts.
type Delivery struct {
	state   State
	applied WaitApplied
	acks    Proposer
	log     *slog.Logger
	client  *http.Client

	// The waits: New sets the package's constants, which tests shorten.
	retryMin, retryMax time.Duration
	ackDelay           time.Duration
	rescan, recheck    time.Duration

	deliveries *prometheus.CounterVec
	pending    *prometheus.GaugeVec

	// stats are the statistics that change with every attempt: kept in
	// memory, not replicated (an attempt is not a change of state). Only
	// the attempt fields of each Status are set.
	mu    sync.Mutex
	stats map[string]*Status
}

// New returns a Delivery of state's webhooks that proposes its
// acknowledgements through acks and waits for changes with applied. It
// connects to an address inside the network only with allowPrivate
// (--allow-private-targets).
func New(state State, applied WaitApplied, acks Proposer, log *slog.Logger, allowPrivate bool) *Delivery {
	return &Delivery{
		state:    state,
		applied:  applied,
		acks:     acks,
		log:      log,
		client:   newClient(allowPrivate),
		retryMin: retryMin,
		retryMax: retryMax,
		ackDelay: ackDelay,
		rescan:   rescan,
		recheck:  recheck,
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "linkraft_webhook_deliveries_total",
			Help: "On the leader: webhook delivery attempts, by webhook id and result (ok: the receiver answered 2xx; error).",
		}, []string{"webhook", "result"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "linkraft_webhook_pending_events",
			Help: "On the leader: events in a webhook's outbox, not yet acknowledged as delivered, by webhook id.",
		}, []string{"webhook"}),
		stats: map[string]*Status{},
	}
}

func newClient(allowPrivate bool) *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 2
	transport.ResponseHeaderTimeout = attemptTimeout
	if !allowPrivate {
		// A URL is checked by its spelling when it is registered; the
		// address a connection is about to be made to is checked here,
		// every time: a name can resolve inside the network
		// (localhost.localdomain, *.nip.io) or be made to later.
		dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: refuseInternal}
		transport.DialContext = dialer.DialContext
	}
	return &http.Client{
		Transport: transport,
		Timeout:   attemptTimeout,
		// A redirect is not a delivery: the receiver must answer 2xx at
		// the registered URL, and a body signed for one receiver must not
		// be sent on to another.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// refuseInternal refuses a connection to an address inside the network
// (a net.Dialer's Control, called with the address resolved).
func refuseInternal(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("webhook connection to %s: %w", address, err)
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("webhook connection to %s: %w", address, err)
	}
	if err := input.Reachable(addr); err != nil {
		return fmt.Errorf("webhook connection refused (without --allow-private-targets): %w", err)
	}
	return nil
}

// Collectors are the delivery metrics, for the caller to register.
func (d *Delivery) Collectors() []prometheus.Collector {
	return []prometheus.Collector{d.deliveries, d.pending}
}

// Statuses lists the webhooks with their delivery state. Only the
// leader's statistics mean anything: httpd forwards the request to it.
func (d *Delivery) Statuses() []Status {
	infos := d.state.Webhooks()
	out := make([]Status, len(infos))
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, info := range infos {
		if st, ok := d.stats[info.ID]; ok {
			out[i] = *st
		}
		out[i].WebhookInfo = info
	}
	return out
}

func (d *Delivery) record(id string, at time.Time, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st, ok := d.stats[id]
	if !ok {
		st = &Status{}
		d.stats[id] = st
	}
	if err == nil {
		st.LastDelivery = at
		return
	}
	st.FailedAttempts++
	st.LastError, st.LastErrorAt = err.Error(), at
}

// forget drops the statistics of webhooks that no longer exist.
func (d *Delivery) forget(keep map[string]bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id := range d.stats {
		if !keep[id] {
			delete(d.stats, id)
		}
	}
}

// loop is one webhook's running delivery loop.
type loop struct {
	stop context.CancelFunc
	done chan struct{}
}

// Run is the leader's duty: it runs one delivery loop per registered
// webhook, starting loops for new ones and ending those of removed ones,
// until ctx ends (leadership ends or the node stops). It returns once
// every loop has ended. One Run at a time.
func (d *Delivery) Run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	loops := map[string]loop{}
	defer func() {
		cancel()
		for _, l := range loops {
			<-l.done
		}
		// Pending counts come from the leader only.
		d.pending.Reset()
	}()
	rescan := time.NewTicker(d.rescan)
	defer rescan.Stop()
	for {
		changed := d.applied()
		d.follow(ctx, loops)
		select {
		case <-ctx.Done():
			return
		case <-rescan.C:
		case <-changed:
			// Every applied batch wakes this loop; look again only after
			// a short pause, so a busy cluster costs one look per pause.
			if !sleepCtx(ctx, d.recheck) {
				return
			}
		}
	}
}

// follow makes loops match the registered webhooks: a loop starts for each
// new one, and the loop, series and statistics of each removed one go.
func (d *Delivery) follow(ctx context.Context, loops map[string]loop) {
	keep := map[string]bool{}
	for _, info := range d.state.Webhooks() {
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
			d.deliver(loopCtx, id)
		}()
	}
	for id, l := range loops {
		if !keep[id] {
			// Its series go once the loop can no longer add to them.
			l.stop()
			<-l.done
			delete(loops, id)
			d.pending.DeleteLabelValues(id)
			d.deliveries.DeletePartialMatch(map[string]string{"webhook": id})
		}
	}
	d.forget(keep)
}

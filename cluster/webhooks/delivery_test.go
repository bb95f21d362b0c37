package webhooks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/codes"
)

const (
	testSecret = "a-secret-of-sixteen-bytes-or-more"
	hookA      = "aaaaaaaaaaaaaaaa"
	hookB      = "bbbbbbbbbbbbbbbb"
	// createdAt is the time of the test's entries: 2023-11-14T22:13:20Z.
	createdAt = 1_700_000_000_000
)

// replica is the state as Raft would drive it on the leader, without Raft:
// commands are applied to a real *fsm.FSM in log order, and every apply
// is announced to those waiting. It is the Delivery's proposer too: an
// acknowledgement is applied at once and recorded.
type replica struct {
	t     *testing.T
	mu    sync.Mutex // serialises applies, as Raft's apply loop does
	fsm   *fsm.FSM
	index uint64
	acks  []fsm.WebhookAckCommand

	waitMu  sync.Mutex
	changed chan struct{}
}

func newReplica(t *testing.T) *replica {
	r := &replica{t: t, fsm: fsm.New(), changed: make(chan struct{})}
	r.apply(fsm.InitCommand{Key: codes.Key{1, 2, 3}})
	return r
}

// apply applies cmd as the next entry and returns the state's answer.
func (r *replica) apply(cmd fsm.Command) any {
	r.mu.Lock()
	r.index++
	res := r.fsm.Apply(&raft.Log{Index: r.index, Type: raft.LogCommand, Data: cmd.Encode()})
	r.mu.Unlock()
	r.waitMu.Lock()
	close(r.changed)
	r.changed = make(chan struct{})
	r.waitMu.Unlock()
	return res
}

// mustApply is apply for commands the state must accept.
func (r *replica) mustApply(cmd fsm.Command) {
	r.t.Helper()
	if err, ok := r.apply(cmd).(error); ok {
		r.t.Fatalf("apply %T: %v", cmd, err)
	}
}

// wait is the Delivery's WaitApplied.
func (r *replica) wait() <-chan struct{} {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	return r.changed
}

func (r *replica) Propose(_ context.Context, cmd fsm.Command) error {
	ack, ok := cmd.(fsm.WebhookAckCommand)
	if !ok {
		return fmt.Errorf("proposed %T, not an acknowledgement", cmd)
	}
	if err, ok := r.apply(cmd).(error); ok {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acks = append(r.acks, ack)
	return nil
}

func (r *replica) proposedAcks() []fsm.WebhookAckCommand {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]fsm.WebhookAckCommand(nil), r.acks...)
}

// register adds a webhook for events of the given types, POSTed to url.
func (r *replica) register(id, url string, types ...fsm.EventType) {
	r.t.Helper()
	var events fsm.EventTypes
	for _, t := range types {
		events = events.With(t)
	}
	r.mustApply(fsm.WebhookSetCommand{
		Webhook: fsm.Webhook{ID: id, URL: url, Events: events, Secret: testSecret}, By: fsm.RootKeyID, Now: createdAt,
	})
}

// create makes a link with the custom code, which makes a link.created event.
func (r *replica) create(code string) {
	r.t.Helper()
	r.mustApply(fsm.CreateBatch{Now: createdAt, Items: []fsm.CreateRequest{{
		URL: "https://example.com/" + code, CustomCode: code, Workspace: "default", CodeLength: 7,
	}}})
}

func (r *replica) info(id string) fsm.WebhookInfo {
	info, _, _ := r.fsm.WebhookPending(id, 0, 0)
	return info
}

// start runs a Delivery of r with short waits until the test ends.
func start(t *testing.T, r *replica) *Delivery {
	t.Helper()
	return run(t, newDelivery(r))
}

// run runs d until the test ends.
func run(t *testing.T, d *Delivery) *Delivery {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return d
}

func newDelivery(r *replica) *Delivery {
	return newDeliveryAllowing(r, true) // the receivers are on loopback
}

func newDeliveryAllowing(r *replica, allowPrivate bool) *Delivery {
	d := New(r.fsm, r.wait, r, slog.New(slog.DiscardHandler), allowPrivate)
	d.retryMin, d.retryMax = 2*time.Millisecond, 16*time.Millisecond
	d.ackDelay = 20 * time.Millisecond
	d.rescan, d.recheck = 50*time.Millisecond, time.Millisecond
	return d
}

// attempt is one request a receiver got.
type attempt struct {
	header http.Header
	body   []byte
	at     time.Time
	failed bool
}

// receiver records every attempt; while down it answers 500.
type receiver struct {
	mu       sync.Mutex
	attempts []attempt
	down     atomic.Bool
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	down := rc.down.Load()
	rc.mu.Lock()
	rc.attempts = append(rc.attempts, attempt{header: req.Header.Clone(), body: body, at: time.Now(), failed: down})
	rc.mu.Unlock()
	if down {
		http.Error(w, "down", http.StatusInternalServerError)
	}
}

func (rc *receiver) all() []attempt {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]attempt(nil), rc.attempts...)
}

// delivered are the attempts the receiver answered 2xx.
func (rc *receiver) delivered() []attempt {
	var out []attempt
	for _, a := range rc.all() {
		if !a.failed {
			out = append(out, a)
		}
	}
	return out
}

func serve(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/in"
}

// waitFor polls cond in short steps; a bound only against a hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s", what)
}

// valueOf is the value of one counter or gauge series.
func valueOf(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if c := out.GetCounter(); c != nil {
		return c.GetValue()
	}
	return out.GetGauge().GetValue()
}

// seriesOf is how many series c has.
func seriesOf(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	n := 0
	for range ch {
		n++
	}
	return n
}

func hmacOf(body []byte) string {
	mac := hmac.New(sha256.New, []byte(testSecret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// TestDeliversInOrderSigned: every event is POSTed once, in order, with
// the headers, the HMAC signature and the body receivers rely on, then
// acknowledged; the statistics and metrics say so.
func TestDeliversInOrderSigned(t *testing.T) {
	r := newReplica(t)
	rc := &receiver{}
	r.register(hookA, serve(t, rc), fsm.EventLinkCreated, fsm.EventLinkUpdated, fsm.EventLinkDeleted)
	r.create("first")
	r.mustApply(fsm.EditCommand{Code: "first", Now: createdAt + 1, Fields: fsm.EditTitle, Title: "First"})
	r.create("second")
	r.mustApply(fsm.DeleteCommand{Code: "first", Now: createdAt + 2})
	d := start(t, r)
	waitFor(t, "four deliveries acknowledged", func() bool { return r.info(hookA).Delivered == 4 })

	got := rc.all()
	wantEvents := []string{"link.created", "link.updated", "link.created", "link.deleted"}
	if len(got) != len(wantEvents) {
		t.Fatalf("%d attempts, want %d", len(got), len(wantEvents))
	}
	for i, a := range got {
		id := fmt.Sprintf("%s-%d", hookA, i+1)
		h := a.header
		if h.Get("Content-Type") != "application/json" || h.Get("User-Agent") != "linkraft-webhooks" ||
			h.Get("X-Linkraft-Event") != wantEvents[i] || h.Get("X-Linkraft-Delivery") != id ||
			h.Get("X-Linkraft-Signature") != hmacOf(a.body) {
			t.Errorf("attempt %d's headers: %v", i, h)
		}
		var body struct{ ID, Event, Webhook string }
		if err := json.Unmarshal(a.body, &body); err != nil || body.ID != id || body.Event != wantEvents[i] || body.Webhook != hookA {
			t.Errorf("attempt %d's body: %s (%v)", i, a.body, err)
		}
	}
	want := `{"id":"aaaaaaaaaaaaaaaa-1","event":"link.created","webhook":"aaaaaaaaaaaaaaaa","created_at":"2023-11-14T22:13:20.000Z",` +
		`"data":{"short_code":"first","domain":"","original_url":"https://example.com/first","workspace":"default","title":"","tags":[],"expires_at":null}}`
	if string(got[0].body) != want {
		t.Errorf("first body:\n%s\nwant\n%s", got[0].body, want)
	}

	st := d.Statuses()
	if len(st) != 1 || st[0].ID != hookA || st[0].Pending != 0 || st[0].LastDelivery.IsZero() || st[0].FailedAttempts != 0 {
		t.Fatalf("statuses: %+v", st)
	}
	if ok := valueOf(t, d.deliveries.WithLabelValues(hookA, "ok")); ok != 4 {
		t.Errorf("ok deliveries counted: %v", ok)
	}
	waitFor(t, "the pending gauge at 0", func() bool { return valueOf(t, d.pending.WithLabelValues(hookA)) == 0 })
}

// TestClickedBody: a link.clicked event lists each code's clicks.
func TestClickedBody(t *testing.T) {
	ev := fsm.WebhookEvent{Seq: 7, Type: fsm.EventLinkClicked, At: createdAt, Hits: []fsm.EventHit{{Code: "abc", Domain: "go.example", Clicks: 3}}}
	body, err := EventBody(hookA, &ev)
	want := `{"id":"aaaaaaaaaaaaaaaa-7","event":"link.clicked","webhook":"aaaaaaaaaaaaaaaa","created_at":"2023-11-14T22:13:20.000Z",` +
		`"data":{"clicks":[{"short_code":"abc","domain":"go.example","clicks":3}]}}`
	if err != nil || string(body) != want {
		t.Fatalf("body: %s (%v)\nwant %s", body, err, want)
	}
}

// TestRetriesUntilReceiverBack: a receiver that fails is retried with
// growing waits, the failure is reported and nothing is acknowledged;
// once it answers, the events are delivered in order and acknowledged.
func TestRetriesUntilReceiverBack(t *testing.T) {
	r := newReplica(t)
	rc := &receiver{}
	rc.down.Store(true)
	r.register(hookA, serve(t, rc), fsm.EventLinkCreated)
	r.create("one")
	r.create("two")
	d := start(t, r)
	waitFor(t, "five failed attempts", func() bool { return len(rc.all()) >= 5 })
	rc.down.Store(false)
	waitFor(t, "the acknowledgement", func() bool { return r.info(hookA).Delivered == 2 })

	attempts := rc.all()
	failed := 0
	for i, a := range attempts {
		if !a.failed {
			break
		}
		failed++
		if i == 0 {
			continue
		}
		// The wait after k failures is at least half of retryMin<<(k-1).
		if gap, least := a.at.Sub(attempts[i-1].at), min(d.retryMin<<(i-1), d.retryMax)/2; gap < least {
			t.Errorf("attempt %d came %v after the last, want at least %v", i+1, gap, least)
		}
		if id := a.header.Get("X-Linkraft-Delivery"); id != hookA+"-1" {
			t.Errorf("failed attempt %d was of %s, want the first event", i+1, id)
		}
	}
	delivered := rc.delivered()
	if len(delivered) != 2 || delivered[0].header.Get("X-Linkraft-Delivery") != hookA+"-1" || delivered[1].header.Get("X-Linkraft-Delivery") != hookA+"-2" {
		t.Fatalf("delivered after the receiver came back: %d attempts", len(delivered))
	}
	if acks := r.proposedAcks(); len(acks) != 1 || acks[0] != (fsm.WebhookAckCommand{ID: hookA, Seq: 2}) {
		t.Fatalf("acknowledgements: %+v", acks)
	}
	st := d.Statuses()[0]
	if st.FailedAttempts != uint64(failed) || !strings.Contains(st.LastError, "500") || st.LastErrorAt.IsZero() || st.LastDelivery.Before(st.LastErrorAt) {
		t.Fatalf("status after %d failures: %+v", failed, st)
	}
	if errs := valueOf(t, d.deliveries.WithLabelValues(hookA, "error")); errs != float64(failed) {
		t.Errorf("failed deliveries counted: %v, want %d", errs, failed)
	}
}

// TestAcksBatched: events read together are acknowledged together, at
// most ackEvents of them at a time.
func TestAcksBatched(t *testing.T) {
	r := newReplica(t)
	rc := &receiver{}
	r.register(hookA, serve(t, rc), fsm.EventLinkCreated)
	const events = ackEvents + 36
	for i := range events {
		r.create(fmt.Sprintf("code%d", i))
	}
	start(t, r)
	waitFor(t, "every delivery acknowledged", func() bool { return r.info(hookA).Delivered == events })
	want := []fsm.WebhookAckCommand{{ID: hookA, Seq: ackEvents}, {ID: hookA, Seq: events}}
	if acks := r.proposedAcks(); fmt.Sprint(acks) != fmt.Sprint(want) {
		t.Fatalf("acknowledgements: %+v, want %+v", acks, want)
	}
	if n := len(rc.all()); n != events {
		t.Fatalf("%d attempts for %d events", n, events)
	}
}

// TestRemovedWebhookStops: a removed webhook's loop ends, its series and
// statistics go, and the other webhooks go on.
func TestRemovedWebhookStops(t *testing.T) {
	r := newReplica(t)
	a, b := &receiver{}, &receiver{}
	r.register(hookA, serve(t, a), fsm.EventLinkCreated)
	r.register(hookB, serve(t, b), fsm.EventLinkCreated)
	r.create("before")
	d := start(t, r)
	waitFor(t, "both delivered", func() bool { return r.info(hookA).Delivered == 1 && r.info(hookB).Delivered == 1 })
	if n := seriesOf(d.deliveries); n != 2 {
		t.Fatalf("%d delivery series before the removal, want 2", n)
	}

	r.mustApply(fsm.WebhookDeleteCommand{ID: hookA, By: fsm.RootKeyID, Now: createdAt})
	waitFor(t, "the removed webhook's series to go", func() bool {
		return seriesOf(d.deliveries) == 1 && seriesOf(d.pending) == 1
	})
	r.create("after")
	waitFor(t, "the other webhook's delivery", func() bool { return r.info(hookB).Delivered == 2 })
	if n := len(a.all()); n != 1 {
		t.Fatalf("the removed webhook got %d attempts, want 1", n)
	}
	if st := d.Statuses(); len(st) != 1 || st[0].ID != hookB {
		t.Fatalf("statuses: %+v", st)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.stats[hookA]; ok {
		t.Fatal("the removed webhook's statistics are kept")
	}
}

// TestRunEndsWithContext: Run returns when its context ends, even with an
// attempt in flight at a receiver that never answers, and drops the
// pending gauge, which only a leader reports.
func TestRunEndsWithContext(t *testing.T) {
	r := newReplica(t)
	hang := make(chan struct{})
	defer close(hang)
	asked := make(chan struct{}, 1)
	r.register(hookA, serve(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case asked <- struct{}{}:
		default:
		}
		select {
		case <-hang:
		case <-req.Context().Done():
		}
	})), fsm.EventLinkCreated)
	r.create("stuck")
	d := newDelivery(r)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	<-asked
	if n := seriesOf(d.pending); n != 1 {
		t.Fatalf("%d pending series while running, want 1", n)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if n := seriesOf(d.pending); n != 0 {
		t.Fatalf("%d pending series after Run, want 0", n)
	}
}

// TestDeadReceiverBlocksNoOne: a receiver that never answers holds back
// only its own webhook.
func TestDeadReceiverBlocksNoOne(t *testing.T) {
	r := newReplica(t)
	hang := make(chan struct{})
	defer close(hang)
	dead := serve(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-hang:
		case <-req.Context().Done():
		}
	}))
	live := &receiver{}
	r.register(hookA, dead, fsm.EventLinkCreated)
	r.register(hookB, serve(t, live), fsm.EventLinkCreated)
	for i := range 3 {
		r.create(fmt.Sprintf("x%d", i))
	}
	start(t, r)
	waitFor(t, "the live receiver's events", func() bool { return r.info(hookB).Delivered == 3 })
	if got := len(live.all()); got != 3 {
		t.Fatalf("the live receiver got %d attempts, want 3", got)
	}
}

// TestRedirectIsNoDelivery: a receiver's redirect is a failed attempt,
// not followed.
func TestRedirectIsNoDelivery(t *testing.T) {
	r := newReplica(t)
	elsewhere := &receiver{}
	to := serve(t, elsewhere)
	r.register(hookA, serve(t, http.RedirectHandler(to, http.StatusTemporaryRedirect)), fsm.EventLinkCreated)
	r.create("moved")
	d := start(t, r)
	waitFor(t, "a failed attempt", func() bool { st := d.Statuses(); return len(st) == 1 && st[0].FailedAttempts > 0 })
	if st := d.Statuses()[0]; !strings.Contains(st.LastError, "307") || st.Pending != 1 {
		t.Fatalf("status: %+v", st)
	}
	if n := len(elsewhere.all()); n != 0 {
		t.Fatalf("the redirect was followed: %d attempts", n)
	}
}

func TestRetryWait(t *testing.T) {
	d := New(fsm.New(), nil, nil, nil, false)
	for failures, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 9: 256 * time.Second, 10: 5 * time.Minute, 1000: 5 * time.Minute} {
		for range 20 {
			if got := d.retryWait(failures); got < want/2 || got > want {
				t.Fatalf("retryWait(%d) = %v, want within [%v, %v]", failures, got, want/2, want)
			}
		}
	}
}

// TestInternalReceiverRefused: without --allow-private-targets, a webhook
// whose URL passed registration by its spelling but leads inside the
// network (a name such as localhost.localdomain or *.nip.io resolving to
// loopback, here the loopback address itself) is never connected to: the
// attempt fails, saying why, and nothing reaches the receiver.
func TestInternalReceiverRefused(t *testing.T) {
	r := newReplica(t)
	rc := &receiver{}
	r.register(hookA, serve(t, rc), fsm.EventLinkCreated)
	d := run(t, newDeliveryAllowing(r, false))
	r.create("inside")
	waitFor(t, "a refused attempt", func() bool {
		st := d.Statuses()
		return len(st) == 1 && st[0].FailedAttempts > 0
	})
	if st := d.Statuses()[0]; !strings.Contains(st.LastError, "loopback") || !strings.Contains(st.LastError, "--allow-private-targets") {
		t.Fatalf("last error %q, want it to name the loopback address and the flag", st.LastError)
	}
	if got := rc.all(); len(got) != 0 {
		t.Fatalf("the internal receiver got %d attempts", len(got))
	}
}

// TestRenamedBody: a rename's link.updated names the code it retired;
// other link events have no previous_short_code.
func TestRenamedBody(t *testing.T) {
	ev := fsm.WebhookEvent{Seq: 8, Type: fsm.EventLinkUpdated, At: createdAt,
		Link: fsm.EventLink{Code: "new", URL: "https://example.com/", Workspace: "default", PreviousCode: "old"}}
	body, err := EventBody(hookA, &ev)
	want := `{"id":"aaaaaaaaaaaaaaaa-8","event":"link.updated","webhook":"aaaaaaaaaaaaaaaa","created_at":"2023-11-14T22:13:20.000Z",` +
		`"data":{"short_code":"new","domain":"","original_url":"https://example.com/","workspace":"default","title":"","tags":[],"expires_at":null,"previous_short_code":"old"}}`
	if err != nil || string(body) != want {
		t.Fatalf("body: %s (%v)\nwant %s", body, err, want)
	}
}

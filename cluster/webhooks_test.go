package cluster

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/linkraft/linkraft/fsm"
)

const testHookSecret = "a-secret-of-sixteen-bytes-or-more"

// hookReceiver records what a webhook receiver got; fail makes it answer
// 500 while set.
type hookReceiver struct {
	mu     sync.Mutex
	bodies []map[string]any
	bad    []string
	fail   atomic.Bool
}

func (r *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if Signature(testHookSecret, body) != req.Header.Get(HeaderWebhookSignature) || req.Header.Get("Content-Type") != "application/json" {
		r.bad = append(r.bad, string(body))
	}
	if r.fail.Load() {
		http.Error(w, "down", http.StatusInternalServerError)
		return
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil || m["id"] != req.Header.Get(HeaderWebhookDelivery) || m["event"] != req.Header.Get(HeaderWebhookEvent) {
		r.bad = append(r.bad, string(body))
	}
	r.bodies = append(r.bodies, m)
}

func (r *hookReceiver) got() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.bodies...)
}

func waitHook(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWebhookDelivery: the leader delivers each event once, signed, in
// order, acknowledges it (the outbox empties), retries a failing receiver
// and reports the failure, and stops with the webhook.
func TestWebhookDelivery(t *testing.T) {
	n := openNode(t, t.TempDir())
	recv := &hookReceiver{}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	const id = "hook0000hook0000"
	events := fsm.EventTypes(0).With(fsm.EventLinkCreated).With(fsm.EventLinkDeleted)
	if _, err := n.Propose(context.Background(), fsm.WebhookSetCommand{
		Webhook: fsm.Webhook{ID: id, URL: srv.URL + "/in", Events: events, Secret: testHookSecret}, By: fsm.RootKeyID,
	}, ProposeOptions{}); err != nil {
		t.Fatal(err)
	}
	l := createURL(t, n, "https://example.com/hooked")
	if _, err := n.Propose(context.Background(), fsm.DeleteCommand{Code: l.Code, KeyID: fsm.RootKeyID, Now: time.Now().UnixMilli()}, ProposeOptions{Visible: true}); err != nil {
		t.Fatal(err)
	}
	waitHook(t, "two deliveries and their acknowledgement", func() bool {
		ws := n.Webhooks()
		return len(recv.got()) == 2 && len(ws) == 1 && ws[0].Pending == 0 && ws[0].Delivered == 2
	})
	got := recv.got()
	if got[0]["id"] != id+"-1" || got[0]["event"] != "link.created" || got[1]["id"] != id+"-2" || got[1]["event"] != "link.deleted" {
		t.Fatalf("deliveries: %v", got)
	}
	if data, _ := got[0]["data"].(map[string]any); data["short_code"] != l.Code || data["original_url"] != "https://example.com/hooked" {
		t.Fatalf("created event's data: %v", got[0]["data"])
	}
	if st := n.Webhooks()[0]; st.LastDelivery.IsZero() || st.FailedAttempts != 0 {
		t.Fatalf("status after deliveries: %+v", st)
	}
	var m dto.Metric
	if err := n.metrics.hookDeliveries.WithLabelValues(id, "ok").Write(&m); err != nil || m.GetCounter().GetValue() != 2 {
		t.Fatalf("ok deliveries counted: %v %v", m.GetCounter().GetValue(), err)
	}

	recv.fail.Store(true)
	createURL(t, n, "https://example.com/while-down")
	waitHook(t, "a failed attempt", func() bool { return n.Webhooks()[0].FailedAttempts > 0 })
	st := n.Webhooks()[0]
	if st.Pending != 1 || !strings.Contains(st.LastError, "500") || st.LastErrorAt.IsZero() {
		t.Fatalf("status while the receiver fails: %+v", st)
	}
	recv.fail.Store(false)
	waitHook(t, "the retry", func() bool { return n.Webhooks()[0].Pending == 0 })
	if got := recv.got(); len(got) != 3 || got[2]["id"] != id+"-3" {
		t.Fatalf("after the retry: %v", got)
	}

	if _, err := n.Propose(context.Background(), fsm.WebhookDeleteCommand{ID: id, By: fsm.RootKeyID}, ProposeOptions{}); err != nil {
		t.Fatal(err)
	}
	createURL(t, n, "https://example.com/after-delete")
	time.Sleep(300 * time.Millisecond)
	if got := recv.got(); len(got) != 3 {
		t.Fatalf("a deleted webhook still delivers: %v", got)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(recv.bad) > 0 {
		t.Fatalf("badly signed or shaped deliveries: %v", recv.bad)
	}
}

// TestWebhookDeadReceiverBlocksNoOne: a receiver that never answers holds
// back only its own webhook.
func TestWebhookDeadReceiverBlocksNoOne(t *testing.T) {
	n := openNode(t, t.TempDir())
	hang := make(chan struct{})
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer dead.Close()
	defer close(hang)
	recv := &hookReceiver{}
	live := httptest.NewServer(recv)
	defer live.Close()
	created := fsm.EventTypes(0).With(fsm.EventLinkCreated)
	for id, url := range map[string]string{"dead000000000000": dead.URL, "live000000000000": live.URL} {
		if _, err := n.Propose(context.Background(), fsm.WebhookSetCommand{
			Webhook: fsm.Webhook{ID: id, URL: url, Events: created, Secret: testHookSecret}, By: fsm.RootKeyID,
		}, ProposeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		createURL(t, n, "https://example.com/x")
	}
	waitHook(t, "the live receiver's events", func() bool { return len(recv.got()) == 3 })
}

func TestRetryWait(t *testing.T) {
	for failures, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 9: 256 * time.Second, 10: 5 * time.Minute, 1000: 5 * time.Minute} {
		for range 20 {
			if got := retryWait(failures); got < want/2 || got > want {
				t.Fatalf("retryWait(%d) = %v, want within [%v, %v]", failures, got, want/2, want)
			}
		}
	}
}

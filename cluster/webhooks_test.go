package cluster

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkraft/linkraft/cluster/webhooks"
	"github.com/linkraft/linkraft/fsm"
)

// TestWebhookWiring: on a real node, the leader loop runs the delivery
// (package webhooks tests delivery itself): a create and a delete are
// POSTed and acknowledged through Raft, the statuses come from
// Node.Webhooks, and the metrics are among Node.Collectors.
func TestWebhookWiring(t *testing.T) {
	t.Parallel()
	// The receiver listens on loopback.
	n := openNode(t, t.TempDir(), func(c *Config) { c.Writes.AllowPrivateTargets = true })
	const secret = "a-secret-of-sixteen-bytes-or-more"
	var (
		mu     sync.Mutex
		events []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var ev struct{ Event string }
		if json.Unmarshal(body, &ev) != nil || req.Header.Get(webhooks.HeaderWebhookSignature) != webhooks.Signature(secret, body) {
			http.Error(w, "bad delivery", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev.Event)
	}))
	defer srv.Close()
	const id = "hook0000hook0000"
	types := fsm.EventTypes(0).With(fsm.EventLinkCreated).With(fsm.EventLinkDeleted)
	if _, err := n.Propose(context.Background(), fsm.WebhookSetCommand{
		Webhook: fsm.Webhook{ID: id, URL: srv.URL + "/in", Events: types, Secret: secret}, By: fsm.RootKeyID,
	}, ProposeOptions{}); err != nil {
		t.Fatal(err)
	}
	l := createURL(t, n, "https://example.com/hooked")
	if _, err := n.Propose(context.Background(), fsm.DeleteCommand{Code: l.Code, KeyID: fsm.RootKeyID, Now: time.Now().UnixMilli()}, ProposeOptions{Visible: true}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		ws := n.Webhooks().Statuses()
		if len(ws) == 1 && ws[0].Delivered == 2 && ws[0].Pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for two acknowledged deliveries: %+v", ws)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	if len(events) != 2 || events[0] != "link.created" || events[1] != "link.deleted" {
		t.Fatalf("delivered: %v", events)
	}
	mu.Unlock()

	reg := prometheus.NewRegistry()
	reg.MustRegister(n.Collectors()...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range families {
		found[f.GetName()] = true
	}
	for _, name := range []string{"linkraft_webhook_deliveries_total", "linkraft_webhook_pending_events"} {
		if !found[name] {
			t.Errorf("%s is not among the node's collectors", name)
		}
	}
}

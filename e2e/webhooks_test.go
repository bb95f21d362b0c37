package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const e2eHookSecret = "e2e-webhook-secret-0f3a9"

// hookEvent is a delivered event's body.
type hookEvent struct {
	ID        string `json:"id"`
	Event     string `json:"event"`
	Webhook   string `json:"webhook"`
	CreatedAt string `json:"created_at"`
	Data      struct {
		ShortCode   string `json:"short_code"`
		OriginalURL string `json:"original_url"`
		Title       string `json:"title"`
		Clicks      []struct {
			ShortCode string `json:"short_code"`
			Clicks    int    `json:"clicks"`
		} `json:"clicks"`
	} `json:"data"`
}

// hookReceiver is a webhook receiver that checks every delivery: its
// signature, its headers against its body, the shape of its id. It keeps
// every event and how often each id came.
type hookReceiver struct {
	mu       sync.Mutex
	events   []hookEvent
	times    map[string]int
	problems []string
	// refuse makes it answer 503 without keeping anything, as a receiver
	// that is down.
	refuse atomic.Bool
}

var deliveryID = regexp.MustCompile(`^[a-z0-9]{16}-[1-9][0-9]*$`)

func (r *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if r.refuse.Load() {
		http.Error(w, "down for now", http.StatusServiceUnavailable)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	problem := func(format string) { r.problems = append(r.problems, format+": "+string(body)) }
	if err != nil {
		problem("body not read: " + err.Error())
		return
	}
	mac := hmac.New(sha256.New, []byte(e2eHookSecret))
	mac.Write(body)
	if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); req.Header.Get("X-Linkraft-Signature") != want {
		problem("bad signature " + req.Header.Get("X-Linkraft-Signature"))
	}
	var ev hookEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		problem("not JSON")
	}
	switch {
	case req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json":
		problem("method or content type " + req.Method + " " + req.Header.Get("Content-Type"))
	case !deliveryID.MatchString(ev.ID) || req.Header.Get("X-Linkraft-Delivery") != ev.ID:
		problem("delivery id " + req.Header.Get("X-Linkraft-Delivery"))
	case req.Header.Get("X-Linkraft-Event") != ev.Event:
		problem("event header " + req.Header.Get("X-Linkraft-Event"))
	}
	if _, err := time.Parse(time.RFC3339, ev.CreatedAt); err != nil {
		problem("created_at")
	}
	r.times[ev.ID]++
	if r.times[ev.ID] == 1 {
		r.events = append(r.events, ev)
	}
	w.WriteHeader(http.StatusNoContent)
}

// has reports whether an event of kind about code (clicks: with clicks of
// code) has arrived.
func (r *hookReceiver) has(kind, code string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		if ev.Event != kind {
			continue
		}
		if ev.Data.ShortCode == code {
			return true
		}
		for _, c := range ev.Data.Clicks {
			if c.ShortCode == code && c.Clicks > 0 {
				return true
			}
		}
	}
	return false
}

func (r *hookReceiver) waitFor(t *testing.T, kind, code string) {
	t.Helper()
	if !eventually(30*time.Second, func() bool { return r.has(kind, code) }) {
		r.mu.Lock()
		defer r.mu.Unlock()
		t.Fatalf("no %s event for %s within 30 s; received %+v", kind, code, r.events)
	}
}

// TestWebhooksDeliverAcrossLeaderChanges: a webhook registered through a
// follower gets the events of creates, edits, clicks and deletes made
// through any node, each signed; creates acknowledged just before the
// leader is killed are still delivered, by the next leader, and nothing
// is sent again beyond the unacknowledged tail.
func TestWebhooksDeliverAcrossLeaderChanges(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	recv := &hookReceiver{times: map[string]int{}}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	nodes := startCluster(t, 3, map[string]string{"allow-private-targets": "true"})
	leader, followers := waitOneLeader(t, formationBound, nodes...)

	r := followers[0].postJSON(t, "/admin/webhooks", map[string]any{
		"url": srv.URL + "/hooks", "secret": e2eHookSecret,
		"events": []string{"link.created", "link.updated", "link.deleted", "link.clicked"},
	})
	if r.status != http.StatusCreated || strings.Contains(string(r.body), e2eHookSecret) {
		t.Fatalf("POST /admin/webhooks through a follower: want 201 without the secret, got %v", r)
	}
	var hook struct{ ID string }
	if err := json.Unmarshal(r.body, &hook); err != nil {
		t.Fatal(err)
	}

	kept := followers[0].createURL(t, "https://example.com/hooked/kept")
	gone := followers[1].createURL(t, "https://example.com/hooked/gone")
	if r := leader.patch(t, kept.ShortCode, `{"title":"Kept"}`); r.status != http.StatusOK {
		t.Fatalf("PATCH: %v", r)
	}
	if r := followers[1].request(t, http.MethodGet, "/"+kept.ShortCode, nil, nil); r.status != http.StatusFound {
		t.Fatalf("redirect: %v", r)
	}
	if r := followers[0].request(t, http.MethodDelete, "/api/v1/urls/"+gone.ShortCode, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %v", r)
	}
	recv.waitFor(t, "link.created", kept.ShortCode)
	recv.waitFor(t, "link.created", gone.ShortCode)
	recv.waitFor(t, "link.updated", kept.ShortCode)
	recv.waitFor(t, "link.clicked", kept.ShortCode)
	recv.waitFor(t, "link.deleted", gone.ShortCode)

	// The list, read through a follower, is the leader's: with deliveries.
	var list struct {
		Webhooks []struct {
			ID             string  `json:"id"`
			Pending        int     `json:"pending_events"`
			Delivered      int     `json:"delivered"`
			LastDeliveryAt *string `json:"last_delivery_at"`
		} `json:"webhooks"`
	}
	if !eventually(10*time.Second, func() bool {
		r := followers[1].get(t, "/admin/webhooks")
		if r.status != http.StatusOK || strings.Contains(string(r.body), e2eHookSecret) || json.Unmarshal(r.body, &list) != nil {
			t.Fatalf("GET /admin/webhooks: %v", r)
		}
		return len(list.Webhooks) == 1 && list.Webhooks[0].Pending == 0 && list.Webhooks[0].Delivered >= 5 && list.Webhooks[0].LastDeliveryAt != nil
	}) {
		t.Fatalf("webhook list never showed every event delivered: %+v", list)
	}
	if !eventually(5*time.Second, func() bool {
		m := string(leader.get(t, "/metrics").body)
		return strings.Contains(m, `linkraft_webhook_deliveries_total{result="ok",webhook="`+hook.ID+`"}`) &&
			strings.Contains(m, `linkraft_webhook_pending_events{webhook="`+hook.ID+`"} 0`)
	}) {
		t.Fatalf("the leader's metrics have no deliveries of %s, or events pending", hook.ID)
	}
	if m := string(followers[0].get(t, "/metrics").body); strings.Contains(m, `linkraft_webhook_pending_events{`) {
		t.Fatalf("a follower reports pending webhook events")
	}

	// Creates acknowledged to their clients, then the leader dies before
	// it could deliver their events: the receiver refuses them until then.
	// The next leader must deliver them from the replicated outbox.
	recv.refuse.Store(true)
	var created []link
	for i := range 5 {
		created = append(created, followers[0].createURL(t, "https://example.com/hooked/crash/"+itoa(i)))
	}
	leader.kill9()
	recv.refuse.Store(false)
	waitOneLeader(t, formationBound, followers...)
	for _, l := range created {
		recv.waitFor(t, "link.created", l.ShortCode)
	}

	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(recv.problems) > 0 {
		t.Fatalf("%d bad deliveries:\n%s", len(recv.problems), strings.Join(recv.problems, "\n"))
	}
	again := 0
	for id, n := range recv.times {
		if !strings.HasPrefix(id, hook.ID+"-") {
			t.Errorf("delivery %s is not of webhook %s", id, hook.ID)
		}
		if n > 3 {
			t.Errorf("delivery %s came %d times", id, n)
		}
		again += n - 1
	}
	// Nothing the dead leader had acknowledged is sent again, and it
	// delivered none of the events of the last creates: no repeats beyond
	// a retried acknowledgement's worth.
	if again > 1 {
		t.Errorf("%d deliveries were repeats; only the unacknowledged tail may be", again)
	}
}

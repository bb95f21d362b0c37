package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

const (
	hookA      = "aaaaaaaaaaaaaaaa"
	hookB      = "bbbbbbbbbbbbbbbb"
	hookSecret = "0123456789abcdef0123"
)

func setHook(id, url string, events EventTypes) []byte {
	return WebhookSetCommand{Webhook: Webhook{ID: id, URL: url, Events: events, Secret: hookSecret}, By: RootKeyID, Now: 5}.Encode()
}

func allEvents() EventTypes {
	var s EventTypes
	for t := EventLinkCreated; t <= EventLinkClicked; t++ {
		s = s.With(t)
	}
	return s
}

// webhookWorkload registers two webhooks, then makes every kind of event
// and acknowledges some of them.
func webhookWorkload() [][]byte {
	cmds := [][]byte{
		InitCommand{Key: testKey}.Encode(),
		setHook(hookA, "https://hooks.example/a", allEvents()),
		setHook(hookB, "http://hooks.example/b", EventTypes(0).With(EventLinkDeleted).With(EventLinkClicked)),
		create(100, CreateRequest{URL: "https://example.com/1", CustomCode: "one", Options: &Options{Title: "One", Tags: []string{"x", "y"}}}),
		create(101, CreateRequest{URL: "https://example.com/2", CustomCode: "two", Options: &Options{MaxVisits: 5}}),
		EditCommand{Code: "one", Now: 200, Fields: EditURL, URL: "https://example.com/1b"}.Encode(),
		ClickBatch{Node: "n1", Seq: 1, Now: 300, Counts: []ClickCount{{Code: "one", Count: 3}, {Code: "gone", Count: 2}, {Code: "two", Count: 0}}}.Encode(),
		VisitCommand{Code: "two", Now: 310}.Encode(),
		DeleteCommand{Code: "one", Now: 400}.Encode(),
		WebhookAckCommand{ID: hookA, Seq: 2}.Encode(),
	}
	return cmds
}

func TestWebhookEventsFollowWrites(t *testing.T) {
	f := New()
	for i, r := range applyAll(t, f, webhookWorkload()...) {
		if err, ok := r.(error); ok {
			t.Fatalf("command %d: %v", i, err)
		}
	}
	infos := f.Webhooks()
	if len(infos) != 2 || infos[0].ID != hookA || infos[1].ID != hookB {
		t.Fatalf("webhooks: %+v", infos)
	}
	a := infos[0]
	// a: created one, created two, updated one, clicked, clicked (visit), deleted one; 1-2 acknowledged.
	if a.Pending != 4 || a.Acked != 2 || a.Delivered != 2 || a.Dropped != 0 || a.CreatedAt != 5 || a.CreatedBy != RootKeyID {
		t.Fatalf("webhook a: %+v", a)
	}
	_, events, ok := f.WebhookPending(hookA, 0, 100)
	if !ok || len(events) != 4 {
		t.Fatalf("pending of a: %v %+v", ok, events)
	}
	want := []struct {
		seq uint64
		typ EventType
		at  int64
	}{{3, EventLinkUpdated, 200}, {4, EventLinkClicked, 300}, {5, EventLinkClicked, 310}, {6, EventLinkDeleted, 400}}
	for i, w := range want {
		if e := events[i]; e.Seq != w.seq || e.Type != w.typ || e.At != w.at {
			t.Errorf("event %d: %+v, want %+v", i, e, w)
		}
	}
	if l := events[0].Link; l.Code != "one" || l.URL != "https://example.com/1b" || l.Title != "One" || strings.Join(l.Tags, ",") != "x,y" || l.Workspace != "default" {
		t.Errorf("updated event's link: %+v", l)
	}
	if h := events[1].Hits; len(h) != 1 || h[0] != (EventHit{Code: "one", Clicks: 3}) {
		t.Errorf("clicked event counts only found codes with clicks: %+v", h)
	}
	if h := events[2].Hits; len(h) != 1 || h[0] != (EventHit{Code: "two", Clicks: 1}) {
		t.Errorf("a limited link's visit: %+v", h)
	}
	if l := events[3].Link; l.Code != "one" || l.URL != "https://example.com/1b" {
		t.Errorf("deleted event's link: %+v", l)
	}
	_, later, _ := f.WebhookPending(hookA, 4, 1)
	if len(later) != 1 || later[0].Seq != 5 {
		t.Errorf("pending after 4, one: %+v", later)
	}
	_, bEvents, _ := f.WebhookPending(hookB, 0, 100)
	if len(bEvents) != 3 || bEvents[0].Seq != 1 || bEvents[0].Type != EventLinkClicked || bEvents[2].Type != EventLinkDeleted {
		t.Errorf("b sees only its subscriptions, numbered its own way: %+v", bEvents)
	}
	if f.Level() != LevelVisits {
		t.Errorf("a state with webhooks has level %d", f.Level())
	}
}

func TestWebhookCommandRefusals(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), setHook(hookA, "https://hooks.example/a", allEvents()))
	ok := Webhook{ID: hookB, URL: "https://hooks.example/b", Events: allEvents(), Secret: hookSecret}
	with := func(change func(*Webhook)) Webhook { w := ok; change(&w); return w }
	tests := []struct {
		name string
		cmd  []byte
		want error
	}{
		{"short id", WebhookSetCommand{Webhook: with(func(w *Webhook) { w.ID = "abc" }), By: RootKeyID}.Encode(), ErrInvalidRequest},
		{"upper-case id", WebhookSetCommand{Webhook: with(func(w *Webhook) { w.ID = strings.ToUpper(hookB) }), By: RootKeyID}.Encode(), ErrInvalidRequest},
		{"ftp url", WebhookSetCommand{Webhook: with(func(w *Webhook) { w.URL = "ftp://x" }), By: RootKeyID}.Encode(), ErrInvalidRequest},
		{"no events", WebhookSetCommand{Webhook: with(func(w *Webhook) { w.Events = 0 }), By: RootKeyID}.Encode(), ErrInvalidRequest},
		{"unknown event", WebhookSetCommand{Webhook: with(func(w *Webhook) { w.Events = 1 }), By: RootKeyID}.Encode(), ErrInvalidRequest},
		{"short secret", WebhookSetCommand{Webhook: with(func(w *Webhook) { w.Secret = "short" }), By: RootKeyID}.Encode(), ErrInvalidRequest},
		{"long secret", WebhookSetCommand{Webhook: with(func(w *Webhook) { w.Secret = strings.Repeat("s", 257) }), By: RootKeyID}.Encode(), ErrInvalidRequest},
		{"no one", WebhookSetCommand{Webhook: ok}.Encode(), ErrUnauthorized},
		{"unknown key", WebhookSetCommand{Webhook: ok, By: "zzzzzzzzzzzz"}.Encode(), ErrUnauthorized},
		{"taken id", WebhookSetCommand{Webhook: with(func(w *Webhook) { w.ID = hookA }), By: RootKeyID}.Encode(), ErrWebhookExists},
		{"delete unknown", WebhookDeleteCommand{ID: hookB, By: RootKeyID}.Encode(), ErrWebhookNotFound},
		{"delete by no one", WebhookDeleteCommand{ID: hookA}.Encode(), ErrUnauthorized},
		{"ack unknown", WebhookAckCommand{ID: hookB, Seq: 1}.Encode(), ErrWebhookNotFound},
		{"ack beyond the last event", WebhookAckCommand{ID: hookA, Seq: 1}.Encode(), ErrInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err, _ := applyAll(t, f, tc.cmd)[0].(error)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if infos := f.Webhooks(); len(infos) != 1 || infos[0].Pending != 0 {
		t.Fatalf("refused commands changed the webhooks: %+v", infos)
	}
	// A repeated acknowledgement, or one of removed events, is harmless.
	applyAll(t, f, create(10, CreateRequest{URL: "https://example.com/x", CustomCode: "x"}))
	for range 2 {
		if err, _ := applyAll(t, f, WebhookAckCommand{ID: hookA, Seq: 1}.Encode())[0].(error); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	if infos := f.Webhooks(); infos[0].Pending != 0 || infos[0].Delivered != 1 {
		t.Fatalf("after acks: %+v", infos[0])
	}
	if err, _ := applyAll(t, f, WebhookDeleteCommand{ID: hookA, By: RootKeyID}.Encode())[0].(error); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if len(f.Webhooks()) != 0 {
		t.Fatal("deleted webhook still listed")
	}
}

// TestWebhookOutboxIsBounded: past MaxWebhookOutbox the oldest events go
// and are counted; an acknowledgement of dropped events is harmless.
func TestWebhookOutboxIsBounded(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), setHook(hookA, "https://hooks.example/a", EventTypes(0).With(EventLinkCreated)))
	const extra = 25
	total := MaxWebhookOutbox + extra
	for start := 0; start < total; start += 500 {
		var items []CreateRequest
		for i := start; i < min(start+500, total); i++ {
			items = append(items, CreateRequest{URL: fmt.Sprintf("https://example.com/%d", i), CustomCode: fmt.Sprintf("c%d", i)})
		}
		applyAll(t, f, create(int64(start), items...))
	}
	info := f.Webhooks()[0]
	if info.Pending != MaxWebhookOutbox || info.Dropped != extra {
		t.Fatalf("pending %d dropped %d, want %d and %d", info.Pending, info.Dropped, MaxWebhookOutbox, extra)
	}
	_, events, _ := f.WebhookPending(hookA, 0, 1)
	if events[0].Seq != extra+1 || events[0].Link.Code != fmt.Sprintf("c%d", extra) {
		t.Fatalf("oldest kept: %+v", events[0])
	}
	roundTrip(t, f)
	if err, _ := applyAll(t, f, WebhookAckCommand{ID: hookA, Seq: extra + 10}.Encode())[0].(error); err != nil {
		t.Fatal(err)
	}
	if info := f.Webhooks()[0]; info.Pending != MaxWebhookOutbox-10 || info.Delivered != 10 {
		t.Fatalf("after ack: %+v", info)
	}
}

// roundTrip checks that f's snapshot restores to a state whose snapshot
// is the same bytes, with the same webhooks and pending events.
func roundTrip(t *testing.T, f *FSM) *FSM {
	t.Helper()
	data := snapshotBytes(t, f)
	if v := data[len(snapshotMagic)]; len(f.Webhooks()) > 0 && v < snapshotV6 {
		t.Fatalf("a state with webhooks writes snapshot version %d", v)
	}
	g := New()
	if err := g.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if again := snapshotBytes(t, g); !bytes.Equal(data, again) {
		t.Fatal("the restored state's snapshot differs")
	}
	if a, b := fmt.Sprint(f.Webhooks()), fmt.Sprint(g.Webhooks()); a != b {
		t.Fatalf("webhooks after restore:\n%s\nwant\n%s", b, a)
	}
	for _, w := range f.Webhooks() {
		_, want, _ := f.WebhookPending(w.ID, 0, MaxWebhookOutbox)
		_, got, _ := g.WebhookPending(w.ID, 0, MaxWebhookOutbox)
		if fmt.Sprint(want) != fmt.Sprint(got) {
			t.Fatalf("webhook %s pending after restore:\n%v\nwant\n%v", w.ID, got, want)
		}
	}
	return g
}

func TestWebhooksSurviveSnapshots(t *testing.T) {
	f := New()
	applyAll(t, f, webhookWorkload()...)
	g := roundTrip(t, f)
	// Numbering goes on where it was, and both states agree on the next event.
	more := create(500, CreateRequest{URL: "https://example.com/3", CustomCode: "three"})
	applyAll(t, f, more)
	applyAll(t, g, more)
	if !bytes.Equal(snapshotBytes(t, f), snapshotBytes(t, g)) {
		t.Fatal("after one more create the states differ")
	}
	_, events, _ := g.WebhookPending(hookA, 6, 10)
	if len(events) != 1 || events[0].Seq != 7 {
		t.Fatalf("next event after restore: %+v", events)
	}
}

// TestWebhookSnapshotIsDeterministic: the same commands give the same
// bytes, whether applied together or one at a time, and a snapshot taken
// before more applies is not changed by them.
func TestWebhookSnapshotIsDeterministic(t *testing.T) {
	a, b := New(), New()
	cmds := webhookWorkload()
	applyAll(t, a, cmds...)
	for _, c := range cmds {
		applyAll(t, b, c)
	}
	if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
		t.Fatal("equal states wrote different snapshots")
	}
	a.mu.Lock()
	snap, err := a.s.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Unlock()
	applyAll(t, a,
		create(600, CreateRequest{URL: "https://example.com/4", CustomCode: "four"}),
		WebhookAckCommand{ID: hookA, Seq: 7}.Encode(),
		WebhookDeleteCommand{ID: hookB, By: RootKeyID, Now: 601}.Encode(),
	)
	var buf bytes.Buffer
	if err := snap.writeTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if !bytes.Equal(buf.Bytes(), snapshotBytes(t, b)) {
		t.Fatal("a snapshot changed with applies made after it was taken")
	}
}

func TestWebhookCommandsRoundTrip(t *testing.T) {
	for _, c := range []any{
		WebhookSetCommand{Webhook: Webhook{ID: hookA, URL: "https://h.example/", Events: allEvents(), Secret: hookSecret}, By: "k", Now: -3},
		WebhookDeleteCommand{ID: hookA, By: RootKeyID, Now: 9},
		WebhookAckCommand{ID: hookA, Seq: 1 << 40},
	} {
		var data []byte
		switch c := c.(type) {
		case WebhookSetCommand:
			data = c.Encode()
		case WebhookDeleteCommand:
			data = c.Encode()
		case WebhookAckCommand:
			data = c.Encode()
		}
		got, err := DecodeCommand(data)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c) {
			t.Errorf("%T: got %+v, %v", c, got, err)
		}
		if RequiredLevel(data) != LevelVisits {
			t.Errorf("%T needs level %d", c, RequiredLevel(data))
		}
	}
}

func TestEventTypeNames(t *testing.T) {
	for _, name := range []string{"link.created", "link.updated", "link.deleted", "link.clicked"} {
		typ, ok := ParseEventType(name)
		if !ok || typ.String() != name {
			t.Errorf("%s: %v %v", name, typ, ok)
		}
	}
	if _, ok := ParseEventType(""); ok {
		t.Error("empty name parsed")
	}
	if got := strings.Join(allEvents().Names(), ","); got != "link.created,link.updated,link.deleted,link.clicked" {
		t.Errorf("names: %s", got)
	}
}

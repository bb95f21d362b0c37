package fsm

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Webhooks: registrations, the events each one has not had delivered yet
// (its outbox), and the position the leader has delivered up to. All of it
// is replicated, so a new leader resumes where the last acknowledgement
// left off: nothing is lost, and at most the unacknowledged tail is sent
// again.
//
// The state's part is deterministic like everything else here:
//
//   - While applying a create, an edit, a delete, a click batch or a visit
//     to a limited link, the state appends one event to the outbox of
//     every webhook subscribed to its type. Each webhook numbers its
//     events 1, 2, 3, ... (Seq), and an event's time is its entry's time
//     (the leader's clock carried in the entry), never a clock read here.
//     A click batch is one link.clicked event listing every code it
//     counted, so events follow the flushes, not single redirects. Purging
//     expired links makes no event: nothing was asked of the cluster then,
//     and an expiry is known in advance from the link itself.
//   - An outbox keeps at most MaxWebhookOutbox events and, once the
//     cluster is raised to LevelBounds, MaxWebhookOutboxBytes of them
//     (WebhookEvent.size): beyond that the oldest are dropped and the
//     webhook's Dropped counter says how many, so a receiver that is down
//     for days costs bounded memory, whatever the events hold.
//   - The leader delivers (cluster/webhooks) and proposes a
//     WebhookAckCommand naming the last Seq it delivered; applying it
//     removes the events up to there and adds them to Delivered.
//
// A webhook's secret is kept here in clear: the leader signs every body
// with it (HMAC-SHA256), so a hash of it would not do. It is therefore in
// every snapshot and backup, like the rest of the state; no API answer and
// no log line ever carries it.

// EventType is what happened to make a webhook event.
type EventType byte

// The events a webhook can subscribe to: a link created, edited,
// deleted or clicked.
const (
	EventLinkCreated EventType = iota + 1
	EventLinkUpdated
	EventLinkDeleted
	EventLinkClicked
)

var eventTypeNames = [...]string{"", "link.created", "link.updated", "link.deleted", "link.clicked"}

// String is the event's name in the API and in deliveries
// ("link.created"); event(n) for one this build does not know.
func (t EventType) String() string {
	if t.valid() {
		return eventTypeNames[t]
	}
	return fmt.Sprintf("event(%d)", t)
}

func (t EventType) valid() bool { return t >= EventLinkCreated && t <= EventLinkClicked }

// ParseEventType reads an event type's API name.
func ParseEventType(name string) (EventType, bool) {
	for i, n := range eventTypeNames {
		if i > 0 && n == name {
			return EventType(i), true
		}
	}
	return 0, false
}

// EventTypes is a set of event types, one bit per type.
type EventTypes byte

const allEventTypes = EventTypes(1)<<EventLinkCreated | EventTypes(1)<<EventLinkUpdated |
	EventTypes(1)<<EventLinkDeleted | EventTypes(1)<<EventLinkClicked

// With is the set with t added.
func (s EventTypes) With(t EventType) EventTypes { return s | EventTypes(1)<<t }

// Has reports whether t is in the set.
func (s EventTypes) Has(t EventType) bool { return s&(EventTypes(1)<<t) != 0 }

// Names lists the set's types by their API names, in a fixed order.
func (s EventTypes) Names() []string {
	names := []string{}
	for t := EventLinkCreated; t <= EventLinkClicked; t++ {
		if s.Has(t) {
			names = append(names, t.String())
		}
	}
	return names
}

// Limits of a webhook, checked by the HTTP layer with a message and by
// Apply again.
const (
	WebhookIDLength  = 16
	MinWebhookSecret = 16
	MaxWebhookSecret = 256
	MaxWebhookURL    = 2048
	MaxWebhooks      = 100
	MaxWebhookOutbox = 10_000
	// MaxWebhookOutboxBytes bounds an outbox by what its events hold: a
	// click event lists every code of a flush, up to 16,384 of them.
	MaxWebhookOutboxBytes = 4 << 20
	maxWebhookCreateBy    = 64
)

// Errors of the webhook commands.
var (
	ErrWebhookExists   = errors.New("a webhook with that id already exists")
	ErrWebhookNotFound = errors.New("no webhook with that id")
	ErrTooManyWebhooks = fmt.Errorf("%w: at most %d webhooks", ErrInvalidRequest, MaxWebhooks)
)

// Webhook is a registration: where to POST which events, and the secret
// that signs them. A Webhook value is never changed once stored.
type Webhook struct {
	ID        string // WebhookIDLength lower-case letters and digits
	URL       string
	Events    EventTypes
	Secret    string // never shown, never logged
	CreatedAt int64  // unix ms
	CreatedBy string // the key that registered it
}

// ValidWebhookID reports whether id has the shape of a webhook id.
func ValidWebhookID(id string) bool {
	if len(id) != WebhookIDLength {
		return false
	}
	for i := range len(id) {
		if c := id[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// check is Apply's floor for a webhook.
func (w *Webhook) check() error {
	switch {
	case !ValidWebhookID(w.ID):
		return fmt.Errorf("%w: webhook id %q", ErrInvalidRequest, w.ID)
	case len(w.URL) > MaxWebhookURL:
		return fmt.Errorf("%w: webhook url of %d bytes", ErrInvalidRequest, len(w.URL))
	case w.Events == 0 || w.Events&^allEventTypes != 0:
		return fmt.Errorf("%w: webhook events %#x", ErrInvalidRequest, byte(w.Events))
	case len(w.Secret) < MinWebhookSecret || len(w.Secret) > MaxWebhookSecret:
		return fmt.Errorf("%w: webhook secret of %d bytes", ErrInvalidRequest, len(w.Secret))
	case len(w.CreatedBy) > maxWebhookCreateBy:
		return fmt.Errorf("%w: webhook creator id", ErrInvalidRequest)
	}
	return checkWebURL(w.URL)
}

// WebhookEvent is one event in a webhook's outbox. Its values are never
// changed once appended, so readers and snapshots share them.
type WebhookEvent struct {
	Seq  uint64
	Type EventType
	At   int64      // unix ms: the time of the entry that made it
	Link EventLink  // link.created, link.updated, link.deleted
	Hits []EventHit // link.clicked
}

// EventLink is a link as an event shows it.
type EventLink struct {
	Code      string
	Domain    string
	URL       string
	Workspace string
	Title     string
	Tags      []string
	ExpiresAt int64
	// PreviousCode is the code a rename retired (link.updated only);
	// "" for any other write.
	PreviousCode string
}

// EventHit is one link's clicks in a link.clicked event.
type EventHit struct {
	Code   string
	Domain string
	Clicks uint64
}

// WebhookSetCommand registers a webhook.
type WebhookSetCommand struct {
	Webhook Webhook // CreatedAt and CreatedBy come from Now and By
	By      string
	Now     int64
}

// WebhookDeleteCommand removes a webhook and its outbox.
type WebhookDeleteCommand struct {
	ID  string
	By  string
	Now int64
}

// WebhookAckCommand records that the leader delivered a webhook's events
// up to Seq.
type WebhookAckCommand struct {
	ID  string
	Seq uint64
}

// hookState is one webhook's part of the state. Apply replaces the
// pointer's fields in place; a snapshot copies the struct.
type hookState struct {
	hook Webhook
	// events are the undelivered ones, Seq ascending and consecutive,
	// the last being next-1. Only ever resliced from the front and
	// appended to, never written in place, so a copy of the slice header
	// stays a valid view.
	events    []WebhookEvent
	next      uint64 // Seq of the next event; the first is 1
	acked     uint64 // highest Seq acknowledged
	delivered uint64 // events removed by acknowledgements
	dropped   uint64 // events removed because the outbox was full
	bytes     int    // the size of events (WebhookEvent.size)
}

// webhooks is the webhook part of the state.
type webhooks struct {
	byID map[string]*hookState
	// wanted is the union of every webhook's events, so a state without
	// subscribers skips event building at once.
	wanted EventTypes
}

func newWebhooks() webhooks { return webhooks{byID: map[string]*hookState{}} }

// active reports whether the state holds anything only LevelVisits builds
// read.
func (w *webhooks) active() bool { return len(w.byID) > 0 }

func (w *webhooks) recompute() {
	w.wanted = 0
	for _, h := range w.byID {
		w.wanted |= h.hook.Events
	}
}

// setWebhook answers the stored Webhook, or an error.
func (s *state) setWebhook(c WebhookSetCommand) any {
	if !s.keys.mayAdminister(c.By, c.Now) || c.By == "" {
		return ErrUnauthorized
	}
	w := c.Webhook
	w.CreatedAt, w.CreatedBy = c.Now, c.By
	if err := w.check(); err != nil {
		return err
	}
	if _, ok := s.hooks.byID[w.ID]; ok {
		return ErrWebhookExists
	}
	if len(s.hooks.byID) >= MaxWebhooks {
		return ErrTooManyWebhooks
	}
	s.hooks.byID[w.ID] = &hookState{hook: w, next: 1}
	s.hooks.recompute()
	if s.bounded() {
		s.audit.add(AuditEntry{At: c.Now, KeyID: c.By, Action: AuditWebhookSet, Subject: w.ID})
	}
	return w
}

func (s *state) deleteWebhook(c WebhookDeleteCommand) error {
	if !s.keys.mayAdminister(c.By, c.Now) || c.By == "" {
		return ErrUnauthorized
	}
	if _, ok := s.hooks.byID[c.ID]; !ok {
		return ErrWebhookNotFound
	}
	delete(s.hooks.byID, c.ID)
	s.hooks.recompute()
	if s.bounded() {
		s.audit.add(AuditEntry{At: c.Now, KeyID: c.By, Action: AuditWebhookDelete, Subject: c.ID})
	}
	return nil
}

// ackWebhook removes the events up to c.Seq. An acknowledgement of events
// already removed (a retried ack, or events dropped meanwhile) changes
// only what it still finds; one beyond the last event is refused.
func (s *state) ackWebhook(c WebhookAckCommand) error {
	h, ok := s.hooks.byID[c.ID]
	if !ok {
		return ErrWebhookNotFound
	}
	if c.Seq >= h.next {
		return fmt.Errorf("%w: acknowledgement of event %d, the last is %d", ErrInvalidRequest, c.Seq, h.next-1)
	}
	if c.Seq <= h.acked {
		return nil
	}
	h.acked = c.Seq
	n := 0
	for n < len(h.events) && h.events[n].Seq <= c.Seq {
		n++
	}
	h.delivered += uint64(n)
	for i := range n {
		h.bytes -= h.events[i].size()
	}
	h.events = h.events[n:]
	if len(h.events) == 0 {
		h.events = nil // let the backing array go
	}
	return nil
}

// emit appends an event of type t at time at to every subscribed
// outbox; build makes its payload, only when someone wants it. A bounded
// state (raise.go) also holds each outbox to MaxWebhookOutboxBytes.
func (w *webhooks) emit(t EventType, at int64, bounded bool, build func(*WebhookEvent)) {
	if !w.wanted.Has(t) {
		return
	}
	ev := WebhookEvent{Type: t, At: at}
	build(&ev)
	size := ev.size()
	for _, h := range w.byID {
		if !h.hook.Events.Has(t) {
			continue
		}
		for len(h.events) > 0 && (len(h.events) >= MaxWebhookOutbox || bounded && h.bytes+size > MaxWebhookOutboxBytes) {
			h.bytes -= h.events[0].size()
			h.events = h.events[1:]
			h.dropped++
		}
		ev.Seq = h.next
		h.next++
		h.events = append(h.events, ev)
		h.bytes += size
	}
}

// size is what an event counts against its outbox's byte bound: the
// bytes of its texts and numbers, about what it takes in a snapshot. A
// function of the event alone, so every node counts the same.
func (ev *WebhookEvent) size() int {
	const fixed, perText = 24, 8
	n := fixed
	for _, h := range ev.Hits {
		n += len(h.Code) + len(h.Domain) + 2*perText
	}
	l := &ev.Link
	n += len(l.Code) + len(l.Domain) + len(l.URL) + len(l.Workspace) + len(l.Title) + len(l.PreviousCode)
	for _, tag := range l.Tags {
		n += len(tag) + perText
	}
	return n
}

// link records a link event: l is the link as the write left it
// (as it was, for a delete).
func (w *webhooks) link(t EventType, at int64, bounded bool, l Link) {
	w.linkEvent(t, at, bounded, l, "")
}

// linkEvent is link with the code a rename retired ("" for other writes).
func (w *webhooks) linkEvent(t EventType, at int64, bounded bool, l Link, previous string) {
	if !w.wanted.Has(t) { // the usual case: checked before building anything
		return
	}
	w.emit(t, at, bounded, func(ev *WebhookEvent) {
		ev.Link = EventLink{Code: l.Code, Domain: l.Domain, URL: l.URL, Workspace: l.Workspace, ExpiresAt: l.ExpiresAt,
			PreviousCode: previous}
		if l.Options != nil { // never changed once stored: shared
			ev.Link.Title, ev.Link.Tags = l.Options.Title, l.Options.Tags
		}
	})
}

// renamed records a rename as a link.updated event: l is the link
// under its new code, previous the qualified code it retired.
func (w *webhooks) renamed(at int64, bounded bool, l Link, previous string) {
	_, code := SplitCode(previous)
	w.linkEvent(EventLinkUpdated, at, bounded, l, code)
}

// clicks records an applied click batch as one link.clicked event:
// the clicks of each code that still names a link (the others counted
// nothing). Called once the batch is counted.
func (w *webhooks) clicks(c ClickBatch, links *linkTable, bounded bool) {
	if !w.wanted.Has(EventLinkClicked) {
		return
	}
	var hits []EventHit
	// Only clicks that add to a link's clicks are reported: bots are
	// counted apart. A batch lists a code once per visitor, in order of
	// code, so its counts are summed into one hit.
	for _, cc := range c.Counts {
		if cc.Count == 0 || cc.Visitor.Bot != NotBot {
			continue
		}
		p, ok := links.lookup(cc.Code)
		if !ok {
			continue
		}
		domain, code := SplitCode(links.recs.at(p).code)
		if n := len(hits); n > 0 && hits[n-1].Code == code && hits[n-1].Domain == domain {
			hits[n-1].Clicks += cc.Count
			continue
		}
		hits = append(hits, EventHit{Code: code, Domain: domain, Clicks: cc.Count})
	}
	if len(hits) == 0 {
		return
	}
	w.emit(EventLinkClicked, c.Now, bounded, func(ev *WebhookEvent) { ev.Hits = hits })
}

// WebhookInfo is a webhook with its replicated delivery position.
type WebhookInfo struct {
	Webhook
	Pending   int    // events in the outbox
	Next      uint64 // Seq of the next event
	Acked     uint64 // highest Seq acknowledged
	Delivered uint64
	Dropped   uint64
}

// Webhooks returns the registered webhooks, by id.
func (f *FSM) Webhooks() []WebhookInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]WebhookInfo, 0, len(f.s.hooks.byID))
	for _, h := range f.s.hooks.byID {
		out = append(out, h.info())
	}
	slices.SortFunc(out, func(a, b WebhookInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (h *hookState) info() WebhookInfo {
	return WebhookInfo{Webhook: h.hook, Pending: len(h.events), Next: h.next, Acked: h.acked, Delivered: h.delivered, Dropped: h.dropped}
}

// WebhookPending returns the webhook and up to limit of its events with a
// Seq above after, oldest first; false when there is no such webhook. The
// events are shared, never changed: callers must not change them either.
func (f *FSM) WebhookPending(id string, after uint64, limit int) (WebhookInfo, []WebhookEvent, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	h, ok := f.s.hooks.byID[id]
	if !ok {
		return WebhookInfo{}, nil, false
	}
	events := h.events
	if i, _ := slices.BinarySearchFunc(events, after+1, func(e WebhookEvent, seq uint64) int { return cmp.Compare(e.Seq, seq) }); i > 0 {
		events = events[i:]
	}
	if len(events) > limit {
		events = events[:limit]
	}
	return h.info(), slices.Clip(events), true
}

// Encode is the webhook's registration as a log entry (Command), its
// secret included.
func (c WebhookSetCommand) Encode() []byte {
	e := encoder{buf: make([]byte, 0, 64+len(c.Webhook.URL)+len(c.Webhook.Secret))}
	e.byte(byte(cmdWebhookSet))
	e.string(c.Webhook.ID)
	e.string(c.Webhook.URL)
	e.byte(byte(c.Webhook.Events))
	e.string(c.Webhook.Secret)
	e.string(c.By)
	e.varint(c.Now)
	return seal(e.buf)
}

// Encode is the webhook's removal as a log entry (Command).
func (c WebhookDeleteCommand) Encode() []byte {
	var e encoder
	e.byte(byte(cmdWebhookDelete))
	e.string(c.ID)
	e.string(c.By)
	e.varint(c.Now)
	return seal(e.buf)
}

// Encode is the acknowledgement's log entry (Command).
func (c WebhookAckCommand) Encode() []byte {
	var e encoder
	e.byte(byte(cmdWebhookAck))
	e.string(c.ID)
	e.uvarint(c.Seq)
	return seal(e.buf)
}

func decodeWebhookSet(d *decoder) WebhookSetCommand {
	c := WebhookSetCommand{Webhook: Webhook{ID: d.string(), URL: d.string(), Events: EventTypes(d.byte()), Secret: d.string()}}
	c.By, c.Now = d.string(), d.varint()
	return c
}

func decodeWebhookDelete(d *decoder) WebhookDeleteCommand {
	return WebhookDeleteCommand{ID: d.string(), By: d.string(), Now: d.varint()}
}

func decodeWebhookAck(d *decoder) WebhookAckCommand {
	return WebhookAckCommand{ID: d.string(), Seq: d.uvarint()}
}

// snapshotHooks is the snapshot's copy of the webhooks: each hookState by
// value. Its events slice is a view Apply never writes into (see
// hookState.events), and the events themselves are never changed.
func (w *webhooks) snapshot() []hookState {
	out := make([]hookState, 0, len(w.byID))
	for _, h := range w.byID {
		c := *h
		c.events = slices.Clip(c.events)
		out = append(out, c)
	}
	return out
}

// encodeWebhooks writes the webhook section of a version 6 snapshot: the
// webhooks by id, each with its counters and its outbox.
func (snap *snapshot) encodeWebhooks(e *encoder, flush func(bool)) {
	slices.SortFunc(snap.hooks, func(a, b hookState) int { return strings.Compare(a.hook.ID, b.hook.ID) })
	e.uvarint(uint64(len(snap.hooks)))
	for i := range snap.hooks {
		h := &snap.hooks[i]
		e.string(h.hook.ID)
		e.string(h.hook.URL)
		e.byte(byte(h.hook.Events))
		e.string(h.hook.Secret)
		e.varint(h.hook.CreatedAt)
		e.string(h.hook.CreatedBy)
		e.uvarint(h.next)
		e.uvarint(h.acked)
		e.uvarint(h.delivered)
		e.uvarint(h.dropped)
		e.uvarint(uint64(len(h.events)))
		for j := range h.events {
			encodeEvent(e, &h.events[j])
			flush(false)
		}
	}
}

// encodeEvent writes an event but its Seq, which its place in the outbox
// gives.
func encodeEvent(e *encoder, ev *WebhookEvent) {
	typ := byte(ev.Type)
	if ev.Link.PreviousCode != "" {
		typ |= eventRenamed
	}
	e.byte(typ)
	e.varint(ev.At)
	if ev.Type == EventLinkClicked {
		e.uvarint(uint64(len(ev.Hits)))
		for _, h := range ev.Hits {
			e.string(h.Code)
			e.string(h.Domain)
			e.uvarint(h.Clicks)
		}
		return
	}
	l := &ev.Link
	e.string(l.Code)
	e.string(l.Domain)
	e.string(l.URL)
	e.string(l.Workspace)
	e.string(l.Title)
	encodeStrings(e, l.Tags)
	e.varint(l.ExpiresAt)
	if l.PreviousCode != "" {
		e.string(l.PreviousCode)
	}
}

// eventRenamed in an event's type byte marks a rename's link.updated,
// whose previous code follows the link. Events written before renames
// never have it, so they read as they always did.
const eventRenamed = 0x80

func decodeEvent(d *decoder) (WebhookEvent, error) {
	typ := d.byte()
	ev := WebhookEvent{Type: EventType(typ &^ eventRenamed), At: d.varint()}
	if d.err != nil {
		return ev, d.err
	}
	renamed := typ&eventRenamed != 0
	if !ev.Type.valid() || renamed && ev.Type != EventLinkUpdated {
		return ev, fmt.Errorf("webhook event type %d", typ)
	}
	if ev.Type == EventLinkClicked {
		n := d.count(3)
		if d.err == nil && n == 0 {
			return ev, errors.New("link.clicked event without clicks")
		}
		for ; n > 0 && d.err == nil; n-- {
			h := EventHit{Code: d.string(), Domain: d.string(), Clicks: d.uvarint()}
			if d.err == nil && (h.Code == "" || h.Clicks == 0) {
				return ev, fmt.Errorf("link.clicked event with %d clicks of %q", h.Clicks, h.Code)
			}
			ev.Hits = append(ev.Hits, h)
		}
		return ev, d.err
	}
	ev.Link = EventLink{Code: d.string(), Domain: d.string(), URL: d.string(), Workspace: d.string(), Title: d.string(),
		Tags: decodeStrings(d), ExpiresAt: d.varint()}
	if renamed {
		if ev.Link.PreviousCode = d.string(); d.err == nil && ev.Link.PreviousCode == "" {
			return ev, errors.New("renamed link event without its previous code")
		}
	}
	if d.err == nil && (ev.Link.Code == "" || ev.Link.URL == "") {
		return ev, errors.New("link event without its link")
	}
	return ev, d.err
}

// readWebhooks reads what encodeWebhooks wrote: webhooks Apply would
// accept, by increasing id, each outbox within its bound and consistent
// with the counters.
func readWebhooks(st *state, d *decoder) error {
	prev := ""
	for n := d.count(1); n > 0 && d.err == nil; n-- {
		w := Webhook{ID: d.string(), URL: d.string(), Events: EventTypes(d.byte()), Secret: d.string(),
			CreatedAt: d.varint(), CreatedBy: d.string()}
		h := &hookState{hook: w, next: d.uvarint(), acked: d.uvarint(), delivered: d.uvarint(), dropped: d.uvarint()}
		events := d.count(2)
		if d.err != nil {
			return d.err
		}
		if err := w.check(); err != nil || w.ID <= prev {
			return fmt.Errorf("webhook %q invalid or out of order: %v", w.ID, err)
		}
		prev = w.ID
		if len(st.hooks.byID) >= MaxWebhooks {
			return fmt.Errorf("more than %d webhooks", MaxWebhooks)
		}
		// The outbox holds the events after acked, the last being next-1.
		if h.next == 0 || events > MaxWebhookOutbox || h.acked >= h.next || uint64(events) > h.next-1-h.acked {
			return fmt.Errorf("webhook %q: %d events, next %d, acknowledged %d", w.ID, events, h.next, h.acked)
		}
		first := h.next - uint64(events)
		for i := range events {
			ev, err := decodeEvent(d)
			if err != nil {
				return fmt.Errorf("webhook %q: %w", w.ID, err)
			}
			if !w.Events.Has(ev.Type) {
				return fmt.Errorf("webhook %q: a %s event it is not subscribed to", w.ID, ev.Type)
			}
			ev.Seq = first + uint64(i)
			h.events = append(h.events, ev)
			h.bytes += ev.size()
		}
		if st.bounded() && h.bytes > MaxWebhookOutboxBytes {
			return fmt.Errorf("webhook %q: %d bytes of events, more than the %d kept", w.ID, h.bytes, MaxWebhookOutboxBytes)
		}
		st.hooks.byID[w.ID] = h
	}
	st.hooks.recompute()
	return d.err
}

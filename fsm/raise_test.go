package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

var raise = RaiseCommand{To: LevelBounds}.Encode()

// edits returns n edits that each give code a new target.
func edits(code string, from, n int) [][]byte {
	var out [][]byte
	for i := from; i < from+n; i++ {
		out = append(out, EditCommand{Code: code, Now: int64(1000 + i), Fields: EditURL, URL: fmt.Sprintf("https://example.com/v%d", i)}.Encode())
	}
	return out
}

// TestRaiseBoundsHistory: before the raise a link's history grows with
// every new target, as older builds keep it; the first edit after it
// keeps the newest MaxHistory versions, and so does every one after.
func TestRaiseBoundsHistory(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), create(1, CreateRequest{URL: "https://example.com/0", CustomCode: "h"}))
	applyAll(t, f, edits("h", 1, MaxHistory+10)...)
	if l, _ := f.Get("h"); len(l.Options.History) != MaxHistory+11 {
		t.Fatalf("before the raise: %d versions, want every one (%d)", len(l.Options.History), MaxHistory+11)
	}
	for i, r := range applyAll(t, f, append([][]byte{raise}, edits("h", 100, 200)...)...) {
		if err, ok := r.(error); ok {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	l, _ := f.Get("h")
	h := l.Options.History
	if len(h) != MaxHistory || h[len(h)-1].URL != "https://example.com/v299" || h[0].URL != fmt.Sprintf("https://example.com/v%d", 300-MaxHistory) {
		t.Fatalf("after the raise: %d versions from %s to %s; want the newest %d", len(h), h[0].URL, h[len(h)-1].URL, MaxHistory)
	}
	if l.URL != "https://example.com/v299" {
		t.Fatalf("target %s", l.URL)
	}
	roundTrip(t, f)
}

// TestRaiseKeepsSecurityAudit: once raised, a flood of link writes no
// longer evicts key, domain or webhook changes; kind selects either ring;
// anonymous creates are not recorded; webhooks are.
func TestRaiseKeepsSecurityAudit(t *testing.T) {
	key := testAPIKey("aaaaaaaaaaaa", ScopeLinksWrite, AllWorkspaces)
	flood := func(f *FSM, from, n int, keyID string) {
		for start := from; start < from+n; start += 1000 {
			var items []CreateRequest
			for i := start; i < min(start+1000, from+n); i++ {
				items = append(items, CreateRequest{URL: "https://example.com/", CustomCode: fmt.Sprintf("c%d", i), KeyID: keyID})
			}
			applyAll(t, f, create(int64(10+start), items...))
		}
	}
	for _, raised := range []bool{false, true} {
		t.Run(fmt.Sprintf("raised=%v", raised), func(t *testing.T) {
			f := New()
			cmds := [][]byte{InitCommand{Key: testKey}.Encode()}
			if raised {
				cmds = append(cmds, raise)
			}
			cmds = append(cmds, KeyCreateCommand{Key: key, By: RootKeyID, Now: 2}.Encode(),
				setHook(hookA, "https://hooks.example/a", allEvents()),
				WebhookDeleteCommand{ID: hookA, By: RootKeyID, Now: 6}.Encode())
			for i, r := range applyAll(t, f, cmds...) {
				if err, ok := r.(error); ok {
					t.Fatalf("entry %d: %v", i, err)
				}
			}
			flood(f, 0, AuditRetention, key.ID)
			flood(f, AuditRetention, 50, "")
			security := f.Audit(AuditQuery{Kind: AuditSecurity, Limit: 10})
			all := f.Audit(AuditQuery{Limit: 2 * AuditRetention})
			if !raised {
				if len(security) != 0 || len(all) != AuditRetention {
					t.Fatalf("one ring: %d security entries left, %d in all; want the flood to evict them (as older builds do)", len(security), len(all))
				}
				return
			}
			var actions []string
			for _, e := range security {
				actions = append(actions, e.Action.String())
			}
			if got := strings.Join(actions, " "); got != "webhook.delete webhook.set key.create" {
				t.Fatalf("security actions after a flood of link writes: %q", got)
			}
			links := f.Audit(AuditQuery{Kind: AuditLinks, Limit: 2 * AuditRetention})
			if len(links) != AuditRetention || links[0].KeyID != key.ID || len(all) != AuditRetention+3 {
				t.Fatalf("%d link entries (newest by %q), %d in all; want the keyed creates only", len(links), links[0].KeyID, len(all))
			}
			if all[0].Action != AuditLinkCreate || all[len(all)-1].Action != AuditKeyCreate {
				t.Fatalf("merged newest first: %v ... %v", all[0], all[len(all)-1])
			}
			again := roundTrip(t, f)
			if got := again.Audit(AuditQuery{Kind: AuditSecurity, Limit: 10}); len(got) != 3 {
				t.Fatalf("security ring after a snapshot: %v", got)
			}
		})
	}
}

// TestRaiseBoundsOutboxBytes: once raised, an outbox holds at most
// MaxWebhookOutboxBytes of events, dropping the oldest, however few
// events that is; before, only their count is bounded.
func TestRaiseBoundsOutboxBytes(t *testing.T) {
	big := func(seq uint64) []byte {
		counts := make([]ClickCount, 4000)
		for i := range counts {
			counts[i] = ClickCount{Code: fmt.Sprintf("%s%04d", strings.Repeat("x", 40), i), Count: 1}
		}
		return ClickBatch{Node: "n1", Seq: seq, Now: int64(seq), Counts: counts}.Encode()
	}
	for _, raised := range []bool{false, true} {
		t.Run(fmt.Sprintf("raised=%v", raised), func(t *testing.T) {
			f := New()
			cmds := [][]byte{InitCommand{Key: testKey}.Encode(), setHook(hookA, "https://hooks.example/a", allEvents())}
			if raised {
				cmds = append(cmds, raise)
			}
			var items []CreateRequest
			for i := range 4000 {
				items = append(items, CreateRequest{URL: "https://example.com/", CustomCode: fmt.Sprintf("%s%04d", strings.Repeat("x", 40), i)})
			}
			cmds = append(cmds, create(1, items...))
			applyAll(t, f, cmds...)
			applyAll(t, f, WebhookAckCommand{ID: hookA, Seq: 4000}.Encode())
			const batches = 40
			for seq := uint64(1); seq <= batches; seq++ {
				applyAll(t, f, big(seq))
			}
			info := f.Webhooks()[0]
			h := f.s.hooks.byID[hookA]
			if !raised {
				if info.Pending != batches || info.Dropped != 0 {
					t.Fatalf("not raised: %d pending, %d dropped; want all %d kept", info.Pending, info.Dropped, batches)
				}
				return
			}
			if h.bytes > MaxWebhookOutboxBytes || info.Pending == 0 || info.Dropped == 0 || info.Pending+int(info.Dropped) != batches {
				t.Fatalf("raised: %d bytes in %d events, %d dropped; want at most %d bytes, the oldest dropped", h.bytes, info.Pending, info.Dropped, MaxWebhookOutboxBytes)
			}
			_, events, _ := f.WebhookPending(hookA, 0, 1)
			if events[0].Seq != 4000+info.Dropped+1 {
				t.Fatalf("oldest kept event %d, want %d", events[0].Seq, 4000+info.Dropped+1)
			}
			want := h.bytes - events[0].size()
			applyAll(t, f, WebhookAckCommand{ID: hookA, Seq: events[0].Seq}.Encode())
			if got := f.s.hooks.byID[hookA].bytes; got != want {
				t.Fatalf("after an ack: %d bytes counted, want %d", got, want)
			}
			roundTrip(t, f)
		})
	}
}

// TestRaiseRules: a raise only ever goes up, to a level this build knows;
// membership notes need it and take nothing but membership actions; a
// raised state needs LevelBounds and writes snapshot version 8.
func TestRaiseRules(t *testing.T) {
	note := func(a AuditAction) []byte {
		return AuditNoteCommand{Entry: AuditEntry{At: 9, KeyID: RootKeyID, Action: a, Subject: "n4"}}.Encode()
	}
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	steps := []struct {
		name    string
		entry   []byte
		refused bool
	}{
		{"note before the raise", note(AuditMemberJoin), true},
		{"raise past this build", RaiseCommand{To: EntryLevel + 1}.Encode(), true},
		{"raise below bounds", RaiseCommand{To: LevelRestoreAudit}.Encode(), true},
		{"raise", raise, false},
		{"raise again", raise, false},
		{"membership note", note(AuditMemberJoin), false},
		{"note of a key write", note(AuditKeyCreate), true},
		{"note of a link write", note(AuditLinkCreate), true},
		{"note without a server", AuditNoteCommand{Entry: AuditEntry{Action: AuditMemberLeave}}.Encode(), true},
	}
	for _, s := range steps {
		before := snapshotBytes(t, f)
		err, _ := applyAll(t, f, s.entry)[0].(error)
		if s.refused != (err != nil) || s.refused && !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("%s: %v, want refused %v", s.name, err, s.refused)
		}
		if s.refused && !bytes.Equal(before, snapshotBytes(t, f)) {
			t.Fatalf("%s: refused, but the state changed", s.name)
		}
	}
	if f.Raised() != LevelBounds || f.Level() != LevelBounds {
		t.Fatalf("raised %d, level %d; want %d", f.Raised(), f.Level(), LevelBounds)
	}
	if e := f.Audit(AuditQuery{Kind: AuditSecurity, Limit: 5}); len(e) != 1 || e[0].Action != AuditMemberJoin || e[0].Subject != "n4" {
		t.Fatalf("security audit: %+v", e)
	}
	if v := snapshotBytes(t, f)[len(snapshotMagic)]; v != snapshotV8 {
		t.Fatalf("a state raised to LevelBounds writes snapshot version %d, want %d", v, snapshotV8)
	}
	roundTrip(t, f)
}

// TestRaiseBoundsKeysAndDomains: once raised, the keys and domains an
// administrator adds are bounded in count; before, as older builds do,
// they are not.
func TestRaiseBoundsKeysAndDomains(t *testing.T) {
	keyID := func(i int) string { return fmt.Sprintf("k%011d", i) }
	for _, raised := range []bool{false, true} {
		t.Run(fmt.Sprintf("raised=%v", raised), func(t *testing.T) {
			f := New()
			cmds := [][]byte{InitCommand{Key: testKey}.Encode()}
			if raised {
				cmds = append(cmds, raise)
			}
			for i := range MaxKeys {
				cmds = append(cmds, KeyCreateCommand{Key: testAPIKey(keyID(i), ScopeLinksRead, AllWorkspaces), By: RootKeyID, Now: 1}.Encode())
			}
			for i := range MaxDomains {
				cmds = append(cmds, DomainCommand{Domain: Domain{Name: fmt.Sprintf("d%d.example", i)}, By: RootKeyID, Now: 1}.Encode())
			}
			applyAll(t, f, cmds...)
			extraKey := KeyCreateCommand{Key: testAPIKey(keyID(MaxKeys), ScopeLinksRead, AllWorkspaces), By: RootKeyID, Now: 2}.Encode()
			extraDomain := DomainCommand{Domain: Domain{Name: "extra.example"}, By: RootKeyID, Now: 2}.Encode()
			changed := DomainCommand{Domain: Domain{Name: "d0.example", RootRedirect: "https://example.com/"}, By: RootKeyID, Now: 2}.Encode()
			got := applyAll(t, f, extraKey, extraDomain, changed)
			keyErr, _ := got[0].(error)
			domainErr, _ := got[1].(error)
			if changeErr, _ := got[2].(error); changeErr != nil {
				t.Fatalf("changing a registered domain's redirects: %v", changeErr)
			}
			if !raised {
				if keyErr != nil || domainErr != nil {
					t.Fatalf("not raised: key %v, domain %v; want both added", keyErr, domainErr)
				}
				return
			}
			if !errors.Is(keyErr, ErrTooManyKeys) || !errors.Is(domainErr, ErrTooManyDomains) {
				t.Fatalf("raised: key %v, domain %v; want both refused", keyErr, domainErr)
			}
			applyAll(t, f, KeyRevokeCommand{ID: keyID(0), By: RootKeyID, Now: 3}.Encode())
			if err, _ := applyAll(t, f, extraKey)[0].(error); err != nil {
				t.Fatalf("a key after one was revoked: %v", err)
			}
		})
	}
}

// TestSnapshotKeepsTheRingsApart: a version 8 snapshot whose security ring
// holds a link write, or whose link ring holds a security action, is
// refused: a backup cannot slip an entry past the ring that keeps it.
func TestSnapshotKeepsTheRingsApart(t *testing.T) {
	for name, misplace := range map[string]func(*auditLog){
		"a link write among security actions": func(a *auditLog) { a.security.add(AuditEntry{Action: AuditLinkCreate, Subject: "x"}) },
		"a key change among link writes":      func(a *auditLog) { a.writes.add(AuditEntry{Action: AuditKeyCreate, Subject: "k"}) },
	} {
		t.Run(name, func(t *testing.T) {
			f := New()
			applyAll(t, f, InitCommand{Key: testKey}.Encode(), raise)
			misplace(&f.s.audit)
			if err := New().Restore(nopCloser{bytes.NewReader(snapshotBytes(t, f))}); err == nil || !strings.Contains(err.Error(), "wrong place") {
				t.Fatalf("restore: %v; want the misplaced entry refused", err)
			}
		})
	}
}

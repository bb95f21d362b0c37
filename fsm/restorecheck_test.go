package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
)

// stubRules stand in for fsm/input's rules (which import this package):
// Apply's floor, no loopback address unless allowPrivate, and workspace
// names without spaces. cluster's tests hold the real rules.
type stubRules struct{ allowPrivate bool }

func (r stubRules) Target(url string) error {
	if err := checkTarget(url, EntryLevel); err != nil {
		return err
	}
	if !r.allowPrivate && strings.Contains(url, "//127.0.0.1") {
		return errors.New("url: target 127.0.0.1 is a loopback address; internal targets are not allowed")
	}
	return nil
}

func (stubRules) Workspace(name string) error {
	if strings.ContainsAny(name, " /") {
		return errors.New("workspace: character ' ' is not allowed")
	}
	return nil
}

// restorableState is a state a client's writes made: links with options
// and rules, a domain with redirects, keys, a webhook.
func restorableState(t *testing.T) *FSM {
	t.Helper()
	f := New()
	cmds := append(keyWorkload(),
		DomainCommand{Domain: Domain{Name: "s.example", RootRedirect: "https://example.com/", NotFoundRedirect: "https://example.com/404"}, By: RootKeyID, Now: 500}.Encode(),
		create(501, CreateRequest{URL: "https://example.com/r", CustomCode: "ruled", Options: &Options{Rules: []Rule{{URL: "https://m.example.com/", Device: DeviceMobile}}}}),
		create(502, CreateRequest{URL: "https://example.com/d", CustomCode: "indomain", Domain: "s.example"}),
		EditCommand{Code: "ruled", Now: 503, Fields: EditURL, URL: "https://example.com/r2"}.Encode(),
		setHook(hookA, "https://hooks.example/a", allEvents()),
	)
	for i, r := range applyAll(t, f, cmds...) {
		if err, ok := r.(error); ok {
			t.Fatalf("command %d: %v", i, err)
		}
	}
	return f
}

// forge is what someone who can write a backup makes: f's state changed by
// tamper, encoded as a snapshot, checksum and all. ReadSnapshot must take
// it (the format is sound); CheckRecords is what must refuse it.
func forge(t *testing.T, f *FSM, tamper func(s *state)) *Snapshot {
	t.Helper()
	tamper(f.s)
	snap, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, f)))
	if err != nil {
		t.Fatalf("the forged snapshot does not decode: %v", err)
	}
	return snap
}

// addLink adds a link as a forger would, past Apply's checks.
func addLink(s *state, code, url string) uint64 {
	s.lastID++
	return s.links.insert(record{id: s.lastID, createdAt: 600}, code, url, "default", "", false)
}

// TestCheckRecordsTakesAppTargetsOnceRaised: a backup of a state raised
// to LevelTargets may hold mailto: and app targets, as its clients wrote.
func TestCheckRecordsTakesAppTargetsOnceRaised(t *testing.T) {
	f := restorableState(t)
	for i, r := range applyAll(t, f, RaiseCommand{To: LevelTargets}.Encode(),
		create(600, CreateRequest{URL: "mailto:a@example.com", CustomCode: "mail"}),
		create(601, CreateRequest{URL: "https://example.com/", CustomCode: "app", Options: &Options{Rules: []Rule{{URL: "myapp://open", Device: DeviceIOS}}}})) {
		if err, ok := r.(error); ok {
			t.Fatalf("command %d: %v", i, err)
		}
	}
	snap, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, f)))
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.CheckRecords(stubRules{}); err != nil {
		t.Fatalf("a raised state with app targets: %v", err)
	}
}

// TestSnapshotRefusesAppRulesBelowLevel: a rule's target is part of the
// options ReadSnapshot checks, at the level the state was raised to: an
// app target in a state below LevelTargets is no state Apply makes.
func TestSnapshotRefusesAppRulesBelowLevel(t *testing.T) {
	f := restorableState(t)
	p := addLink(f.s, "ruled3", "https://example.com/")
	f.s.setOptions(p, &Options{Rules: []Rule{{URL: "myapp://open", Device: DeviceIOS}}})
	_, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, f)))
	if !errors.Is(err, ErrCorruptSnapshot) || !strings.Contains(err.Error(), `link "ruled3": rule target`) {
		t.Fatalf("ReadSnapshot = %v; want ErrCorruptSnapshot naming the rule target", err)
	}
}

func TestCheckRecordsAcceptsClientWrites(t *testing.T) {
	f := restorableState(t)
	snap, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, f)))
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.CheckRecords(stubRules{}); err != nil {
		t.Fatalf("a state clients' writes made: %v", err)
	}
}

// TestCheckRecordsRefusesWhatNoClientCouldWrite: every record a forged
// backup could carry past ReadSnapshot, which a client's write could not
// make, is refused, and the error names it.
func TestCheckRecordsRefusesWhatNoClientCouldWrite(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(s *state)
		want   string // in the error
	}{
		{"javascript target", func(s *state) { addLink(s, "evil", "javascript:alert(document.cookie)") },
			`link "evil": ` + "invalid create request: the target's scheme javascript: is refused: it runs script in the visitor's page"},
		// A state not raised to LevelTargets: a build before it would hold
		// a link no build of that cluster's could make.
		{"mailto target below LevelTargets", func(s *state) { addLink(s, "mail", "mailto:a@example.com") },
			`link "mail": the cluster is still being upgraded`},
		{"target splitting Location", func(s *state) { addLink(s, "split", "https://example.com/\r\nSet-Cookie: session=x") },
			`link "split": ` + "invalid create request: the target holds a control character"},
		{"rule target", func(s *state) {
			p := addLink(s, "ruled2", "https://example.com/")
			s.setOptions(p, &Options{Rules: []Rule{{URL: "http://127.0.0.1/", Device: DeviceIOS}}})
		}, `link "ruled2": rule 1: url: target 127.0.0.1 is a loopback address`},
		{"history target", func(s *state) {
			p := addLink(s, "hist", "https://example.com/")
			s.setOptions(p, &Options{History: []Version{{URL: "javascript:alert(1)", ChangedAt: 1}, {URL: "https://example.com/", ChangedAt: 2}}})
		}, `link "hist": history version 1: `},
		{"private target", func(s *state) { addLink(s, "inside", "http://127.0.0.1:8080/admin") },
			`link "inside": url: target 127.0.0.1 is a loopback address`},
		{"domain redirect", func(s *state) {
			s.domains["s.example"] = Domain{Name: "s.example", NotFoundRedirect: "javascript:alert(1)"}
		}, `domain "s.example": not-found redirect: `},
		{"webhook to loopback", func(s *state) {
			s.hooks.byID[hookA].hook.URL = "http://127.0.0.1:9/steal"
		}, `webhook "` + hookA + `": url: target 127.0.0.1 is a loopback address`},
		{"admin key that looks narrow", func(s *state) {
			k := testAPIKey("attackeradmn", ScopeAdmin, "team")
			s.keys[k.ID] = &k
		}, `key "attackeradmn": an admin key with workspaces team`},
		{"key with a bad workspace", func(s *state) {
			k := testAPIKey("badworkspace", ScopeLinksRead, "bad name")
			s.keys[k.ID] = &k
		}, `key "badworkspace": workspace`},
		{"key with * and more", func(s *state) {
			k := testAPIKey("starandmore1", ScopeLinksRead, AllWorkspaces, "team")
			s.keys[k.ID] = &k
		}, `key "starandmore1": workspaces: "*" with other workspaces`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := forge(t, restorableState(t), tc.tamper)
			err := snap.CheckRecords(stubRules{})
			if !errors.Is(err, ErrRefusedRecord) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckRecords = %v; want ErrRefusedRecord naming %q", err, tc.want)
			}
		})
	}
}

// TestCheckRecordsFollowsThePrivateTargetsSetting: a node that allows
// private targets restores links and webhooks pointing inside, as its
// clients may write them.
func TestCheckRecordsFollowsThePrivateTargetsSetting(t *testing.T) {
	snap := forge(t, restorableState(t), func(s *state) {
		addLink(s, "inside", "http://127.0.0.1:8080/")
		s.hooks.byID[hookA].hook.URL = "http://127.0.0.1:9/hook"
	})
	if err := snap.CheckRecords(stubRules{allowPrivate: true}); err != nil {
		t.Fatalf("with private targets allowed: %v", err)
	}
}

// TestRestoreKeepsTheRestoringKey: a backup that revokes the key
// performing the restore (or lacks it) does not lock it out; the audit
// log records the restore, with that key, and says the key was kept.
func TestRestoreKeepsTheRestoringKey(t *testing.T) {
	cur := New()
	operator := testAPIKey("operatorkey1", ScopeAdmin, AllWorkspaces)
	applyAll(t, cur,
		InitCommand{Key: testKey}.Encode(),
		KeyCreateCommand{Key: operator, By: RootKeyID, Now: 1}.Encode(),
	)
	hostile := New()
	applyAll(t, hostile,
		InitCommand{Key: testKey}.Encode(),
		KeyCreateCommand{Key: operator, By: RootKeyID, Now: 1}.Encode(),
		KeyRevokeCommand{ID: operator.ID, By: RootKeyID, Now: 2}.Encode(),
	)
	for name, backup := range map[string][]byte{"revokes it": snapshotBytes(t, hostile), "lacks it": snapshotBytes(t, New())} {
		t.Run(name, func(t *testing.T) {
			snap, err := ReadSnapshot(bytes.NewReader(backup))
			if err != nil {
				t.Fatal(err)
			}
			cur.KeepHandedOut(snap)
			kept := cur.RecordRestore(snap, RestoreRecord{KeyID: operator.ID, At: 1000, Backup: "foreign backup"})
			var buf bytes.Buffer
			if _, err := snap.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			f := restored(t, buf.Bytes())
			if k, ok := f.Key(operator.ID); !ok || k.Hash != operator.Hash {
				t.Fatalf("the restoring key after the restore: %+v, %v; want it valid", k, ok)
			}
			if err, _ := applyAll(t, f, KeyRevokeCommand{ID: "nosuchkey123", By: operator.ID, Now: 1001}.Encode())[0].(error); !errors.Is(err, ErrKeyNotFound) {
				t.Fatalf("an admin write with the restoring key after the restore: %v; want it authorized (ErrKeyNotFound)", err)
			}
			entries := f.Audit(AuditQuery{Limit: 1})
			if len(entries) != 1 || entries[0].Action != AuditBackupRestore || entries[0].KeyID != operator.ID ||
				entries[0].At != 1000 || !strings.HasPrefix(entries[0].Subject, "foreign backup") {
				t.Fatalf("newest audit entry %+v; want the restore by %s", entries, operator.ID)
			}
			if wantKept := name == "revokes it"; kept != wantKept || strings.Contains(entries[0].Subject, "kept key") != wantKept {
				t.Errorf("kept = %v, subject %q; want the key kept against the backup: %v", kept, entries[0].Subject, wantKept)
			}
			if entries[0].Action.String() != "backup.restore" {
				t.Errorf("the action is named %q", entries[0].Action)
			}
		})
	}
}

// TestRestoreAuditNeedsVersion7: a state whose audit log records a
// restore needs LevelRestoreAudit and is written as version 7. A build
// before it, which knows audit actions up to domain.remove, would refuse
// that entry in a version 6 snapshot: hence the version, and the leader
// restoring only once every server reads it.
func TestRestoreAuditNeedsVersion7(t *testing.T) {
	cur := restorableState(t)
	if cur.Level() != LevelVisits {
		t.Fatalf("level %d before the restore", cur.Level())
	}
	snap, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, cur)))
	if err != nil {
		t.Fatal(err)
	}
	cur.KeepHandedOut(snap)
	cur.RecordRestore(snap, RestoreRecord{KeyID: RootKeyID, At: 1000, Backup: "backup authenticated by the cluster key"})
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	if v := data[len(snapshotMagic)]; v != 7 {
		t.Fatalf("a state recording a restore is written as version %d, want 7", v)
	}
	f := restored(t, data)
	if f.Level() != LevelRestoreAudit {
		t.Fatalf("level %d after the restore, want LevelRestoreAudit", f.Level())
	}
	if again := snapshotBytes(t, f); !bytes.Equal(again, data) {
		t.Fatal("the restored state's snapshot differs from what was installed")
	}

	// The same bytes as version 6: the restore's entry is an unknown action.
	old := bytes.Clone(data)
	old[len(snapshotMagic)] = 6
	binary.BigEndian.PutUint32(old[len(old)-4:], crc32.Checksum(old[:len(old)-4], crcTable))
	if _, err := ReadSnapshot(bytes.NewReader(old)); !errors.Is(err, ErrCorruptSnapshot) || !strings.Contains(err.Error(), "audit action 8") {
		t.Fatalf("version 6 with a restore's audit entry: %v; want it refused as an unknown action", err)
	}
}

// TestAuditRestoresCounted: the level follows the restores the ring
// holds, so once the last is pushed out, older builds may hold the state
// again.
func TestAuditRestoresCounted(t *testing.T) {
	var a auditLog
	a.add(AuditEntry{Action: AuditBackupRestore})
	for range AuditRetention - 1 {
		a.add(AuditEntry{Action: AuditLinkCreate})
	}
	copied := a.clone()
	if !a.holdsRestore() || !copied.holdsRestore() {
		t.Fatal("the ring holds a restore, but the log does not say so")
	}
	a.add(AuditEntry{Action: AuditKeyCreate})
	copied = a.clone()
	if a.holdsRestore() || copied.holdsRestore() {
		t.Fatal("the restore left the ring, but the log still holds one")
	}
}

// TestRestoreKeepsWebhookDelivery: a webhook the cluster and the backup
// both hold keeps the cluster's outbox and numbering, so its receiver is
// not sent again what it had since the backup, and no delivery id names
// two events.
func TestRestoreKeepsWebhookDelivery(t *testing.T) {
	cur := New()
	applyAll(t, cur, InitCommand{Key: testKey}.Encode(), setHook(hookA, "https://hooks.example/a", allEvents()),
		create(10, CreateRequest{URL: "https://example.com/1"}))
	backup := snapshotBytes(t, cur)
	applyFrom(cur, 100,
		create(20, CreateRequest{URL: "https://example.com/2"}),
		create(21, CreateRequest{URL: "https://example.com/3"}),
		WebhookAckCommand{ID: hookA, Seq: 2}.Encode(),
		create(22, CreateRequest{URL: "https://example.com/4"}),
	)
	want := cur.Webhooks()[0]
	f := restored(t, mergedBackup(t, cur, backup))
	got := f.Webhooks()
	if len(got) != 1 || got[0].Next != want.Next || got[0].Acked != want.Acked || got[0].Pending != want.Pending {
		t.Fatalf("webhook after the restore: %+v; want the cluster's delivery state %+v", got, want)
	}
	_, events, _ := f.WebhookPending(hookA, 0, 10)
	if len(events) != 2 || events[0].Seq != 3 || events[1].Seq != 4 {
		t.Fatalf("pending after the restore: %+v; want 3 and 4, after the acknowledged 1 and 2", events)
	}
	r := createOne(t, f, 30, CreateRequest{URL: "https://example.com/after"})
	if _, events, _ := f.WebhookPending(hookA, 4, 10); r.Err != nil || len(events) != 1 || events[0].Seq != 5 {
		t.Fatalf("the event of a create after the restore: %+v; want seq 5, a number never used before", events)
	}
}

package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"
)

func testAPIKey(id string, scopes Scope, workspaces ...string) APIKey {
	return APIKey{ID: id, Name: "key " + id, Hash: [KeyHashSize]byte{id[0]}, Scopes: scopes, Workspaces: workspaces, CreatedAt: 100}
}

// keyWorkload creates two keys, writes with them, and revokes one.
func keyWorkload() [][]byte {
	return [][]byte{
		InitCommand{Key: testKey}.Encode(),
		KeyCreateCommand{Key: testAPIKey("aaaaaaaaaaaa", ScopeLinksRead|ScopeLinksWrite, "team"), By: RootKeyID, Now: 100}.Encode(),
		KeyCreateCommand{Key: testAPIKey("bbbbbbbbbbbb", ScopeAdmin, AllWorkspaces), By: RootKeyID, Now: 101}.Encode(),
		create(200, CreateRequest{URL: "https://example.com/a", Workspace: "team", CustomCode: "teamlink", KeyID: "aaaaaaaaaaaa"}),
		create(201, CreateRequest{URL: "https://example.com/b", CustomCode: "adminlink", KeyID: "bbbbbbbbbbbb"}),
		DeleteCommand{Code: "adminlink", Now: 300, KeyID: "bbbbbbbbbbbb"}.Encode(),
		KeyRevokeCommand{ID: "aaaaaaaaaaaa", By: "bbbbbbbbbbbb", Now: 400}.Encode(),
	}
}

func TestKeyCommandsRoundTrip(t *testing.T) {
	for _, cmd := range keyWorkload() {
		got, err := DecodeCommand(cmd)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		var again []byte
		switch c := got.(type) {
		case InitCommand:
			again = c.Encode()
		case CreateBatch:
			again = c.Encode()
		case DeleteCommand:
			again = c.Encode()
		case KeyCreateCommand:
			again = c.Encode()
		case KeyRevokeCommand:
			again = c.Encode()
		default:
			t.Fatalf("decoded %T", got)
		}
		if !bytes.Equal(again, cmd) {
			t.Fatalf("%T does not encode back to the same bytes", got)
		}
	}
}

func TestKeysApply(t *testing.T) {
	f := New()
	results := applyAll(t, f, keyWorkload()...)
	for i, r := range results {
		if err, ok := r.(error); ok && err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if cr, ok := r.([]CreateResult); ok && cr[0].Err != nil {
			t.Fatalf("entry %d: %v", i, cr[0].Err)
		}
	}
	if _, ok := f.Key("aaaaaaaaaaaa"); ok {
		t.Fatal("a revoked key is still known")
	}
	k, ok := f.Key("bbbbbbbbbbbb")
	if !ok || k.Scopes != ScopeAdmin || k.CreatedBy != RootKeyID {
		t.Fatalf("admin key: %+v %v", k, ok)
	}
	audit := f.Audit(AuditQuery{Limit: 10})
	want := []struct {
		action  AuditAction
		key     string
		subject string
	}{
		{AuditKeyRevoke, "bbbbbbbbbbbb", "aaaaaaaaaaaa"},
		{AuditLinkDelete, "bbbbbbbbbbbb", "adminlink"},
		{AuditLinkCreate, "bbbbbbbbbbbb", "adminlink"},
		{AuditLinkCreate, "aaaaaaaaaaaa", "teamlink"},
		{AuditKeyCreate, RootKeyID, "bbbbbbbbbbbb"},
		{AuditKeyCreate, RootKeyID, "aaaaaaaaaaaa"},
	}
	if len(audit) != len(want) {
		t.Fatalf("audit has %d entries, want %d: %+v", len(audit), len(want), audit)
	}
	for i, w := range want {
		if a := audit[i]; a.Action != w.action || a.KeyID != w.key || a.Subject != w.subject {
			t.Errorf("audit[%d] = %+v, want %v by %s on %s", i, a, w.action, w.key, w.subject)
		}
	}
	if got := f.Audit(AuditQuery{KeyID: "aaaaaaaaaaaa", Limit: 10}); len(got) != 1 || got[0].Subject != "teamlink" || got[0].Workspace != "team" {
		t.Fatalf("audit of one key: %+v", got)
	}
}

// TestStateChecksTheWritingKey: the state refuses a write whose key it
// does not accept, whatever node proposed it — a revoked key, an expired
// one, one without the scope or the workspace — and records nothing.
func TestStateChecksTheWritingKey(t *testing.T) {
	f := New()
	expiring := testAPIKey("eeeeeeeeeeee", ScopeLinksWrite, AllWorkspaces)
	expiring.ExpiresAt = 500
	applyAll(t, f,
		InitCommand{Key: testKey}.Encode(),
		KeyCreateCommand{Key: testAPIKey("rrrrrrrrrrrr", ScopeLinksRead|ScopeStatsRead, AllWorkspaces), Now: 1, By: RootKeyID}.Encode(),
		KeyCreateCommand{Key: testAPIKey("tttttttttttt", ScopeLinksWrite, "team"), Now: 1, By: RootKeyID}.Encode(),
		KeyCreateCommand{Key: expiring, Now: 1, By: RootKeyID}.Encode(),
		KeyCreateCommand{Key: testAPIKey("vvvvvvvvvvvv", ScopeLinksWrite, AllWorkspaces), Now: 1, By: RootKeyID}.Encode(),
		KeyRevokeCommand{ID: "vvvvvvvvvvvv", By: RootKeyID, Now: 2}.Encode(),
		create(10, CreateRequest{URL: "https://example.com/", CustomCode: "victim", Workspace: "team", KeyID: "tttttttttttt"}),
	)
	before := len(f.Audit(AuditQuery{Limit: 100}))
	for _, tc := range []struct {
		name string
		req  CreateRequest
		now  int64
	}{
		{"revoked key", CreateRequest{URL: "https://example.com/1", KeyID: "vvvvvvvvvvvv"}, 20},
		{"unknown key", CreateRequest{URL: "https://example.com/2", KeyID: "zzzzzzzzzzzz"}, 20},
		{"read-only key", CreateRequest{URL: "https://example.com/3", KeyID: "rrrrrrrrrrrr"}, 20},
		{"other workspace", CreateRequest{URL: "https://example.com/4", KeyID: "tttttttttttt", Workspace: "other"}, 20},
		{"expired key", CreateRequest{URL: "https://example.com/5", KeyID: "eeeeeeeeeeee"}, 500},
		// Only an import, which takes an admin credential, brings a
		// creation time or clicks: a writer of links cannot backdate one or
		// give it a head start, whichever node relays its create.
		{"links:write key bringing clicks", CreateRequest{URL: "https://example.com/6", KeyID: "tttttttttttt", Workspace: "team", Clicks: 5}, 20},
		{"links:write key bringing a creation time", CreateRequest{URL: "https://example.com/7", KeyID: "tttttttttttt", Workspace: "team", CreatedAt: 5}, 20},
		{"anonymous create bringing clicks", CreateRequest{URL: "https://example.com/8", Clicks: 5}, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := applyAll(t, f, create(tc.now, tc.req))[0].([]CreateResult)
			if !errors.Is(res[0].Err, ErrUnauthorized) {
				t.Fatalf("create: %+v, want ErrUnauthorized", res[0])
			}
		})
	}
	for _, key := range []string{"vvvvvvvvvvvv", "rrrrrrrrrrrr", "zzzzzzzzzzzz"} {
		if err := applyAll(t, f, DeleteCommand{Code: "victim", Now: 30, KeyID: key}.Encode())[0]; !errors.Is(err.(error), ErrUnauthorized) {
			t.Fatalf("delete with %s: %v", key, err)
		}
	}
	if _, ok := f.Get("victim"); !ok {
		t.Fatal("a refused delete removed the link")
	}
	if f.Len() != 1 || len(f.Audit(AuditQuery{Limit: 100})) != before {
		t.Fatalf("refused writes changed the state: %d links, audit %d → %d", f.Len(), before, len(f.Audit(AuditQuery{Limit: 100})))
	}
}

func TestKeyCreateRefusals(t *testing.T) {
	good := testAPIKey("kkkkkkkkkkkk", ScopeLinksRead, "ws")
	for _, tc := range []struct {
		name string
		edit func(*APIKey)
		want error
	}{
		{"duplicate id", func(*APIKey) {}, ErrKeyExists},
		{"bad id", func(k *APIKey) { k.ID = "UPPERCASE123" }, ErrKeyInvalid},
		{"no scopes", func(k *APIKey) { k.Scopes = 0 }, ErrKeyInvalid},
		{"unknown scope bit", func(k *APIKey) { k.Scopes = 1 << 6 }, ErrKeyInvalid},
		{"no workspaces", func(k *APIKey) { k.Workspaces = nil }, ErrKeyInvalid},
		{"empty workspace", func(k *APIKey) { k.Workspaces = []string{""} }, ErrKeyInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New()
			applyAll(t, f, KeyCreateCommand{Key: good, By: RootKeyID}.Encode())
			k := good
			k.Workspaces = []string{"ws"}
			tc.edit(&k)
			if err, _ := applyAll(t, f, KeyCreateCommand{Key: k, By: RootKeyID}.Encode())[0].(error); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	f := New()
	if err, _ := applyAll(t, f, KeyRevokeCommand{ID: "nonexistent1", By: RootKeyID}.Encode())[0].(error); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("revoke unknown: %v", err)
	}
}

func TestKeysAndAuditSurviveSnapshots(t *testing.T) {
	f := New()
	applyAll(t, f, keyWorkload()...)
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, f))}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, restored), snapshotBytes(t, f)) {
		t.Fatal("a restored state writes a different snapshot")
	}
	if k, ok := restored.Key("bbbbbbbbbbbb"); !ok || k.Hash != f.mustKey(t, "bbbbbbbbbbbb").Hash {
		t.Fatal("the key did not survive the snapshot")
	}
	if got, want := restored.Audit(AuditQuery{Limit: 100}), f.Audit(AuditQuery{Limit: 100}); len(got) != len(want) || got[0] != want[0] {
		t.Fatalf("audit after restore: %+v, want %+v", got, want)
	}
}

func (f *FSM) mustKey(t *testing.T, id string) APIKey {
	t.Helper()
	k, ok := f.Key(id)
	if !ok {
		t.Fatalf("no key %s", id)
	}
	return k
}

func TestAuditKeepsTheNewest(t *testing.T) {
	var a auditLog
	for i := range AuditRetention + 5 {
		a.add(AuditEntry{At: int64(i), Action: AuditLinkCreate})
	}
	got := a.writes.oldestFirst()
	if len(got) != AuditRetention || got[0].At != 5 || got[len(got)-1].At != AuditRetention+4 {
		t.Fatalf("ring holds %d entries from %d to %d", len(got), got[0].At, got[len(got)-1].At)
	}
	f := New()
	f.s.audit = a
	if newest := f.Audit(AuditQuery{Limit: 2}); newest[0].At != AuditRetention+4 || newest[1].At != AuditRetention+3 {
		t.Fatalf("newest first: %+v", newest)
	}
}

// TestLogFromBeforeKeysReplays replays log entries written by the last
// build before keys (testdata/log-v3.bin: the workload, with the older
// create and delete types) and checks they give today's state.
func TestLogFromBeforeKeysReplays(t *testing.T) {
	raw, err := os.ReadFile("testdata/log-v3.bin")
	if err != nil {
		t.Fatal(err)
	}
	var old [][]byte
	for len(raw) > 0 {
		n, w := binary.Uvarint(raw)
		if w <= 0 || uint64(len(raw)-w) < n {
			t.Fatal("damaged fixture")
		}
		old, raw = append(old, raw[w:w+int(n)]), raw[w+int(n):]
	}
	replayed, current := New(), New()
	applyAll(t, replayed, old...)
	applyAll(t, current, workload()...)
	if !bytes.Equal(snapshotBytes(t, replayed), snapshotBytes(t, current)) {
		t.Fatal("entries from before keys replay to a different state")
	}
}

// TestStateChecksWhoAdministersKeys: only the operator's token or an admin
// key valid at the command's time makes or revokes keys, so a revoked or
// expired admin key whose request was already on its way can do nothing;
// no one at all only for a cluster's first key.
func TestStateChecksWhoAdministersKeys(t *testing.T) {
	f := New()
	admin := testAPIKey("admin0000000", ScopeAdmin, AllWorkspaces)
	expiring := testAPIKey("expiring0000", ScopeAdmin, AllWorkspaces)
	expiring.ExpiresAt = 50
	results := applyAll(t, f,
		KeyCreateCommand{Key: admin, Now: 1}.Encode(),
		KeyCreateCommand{Key: testAPIKey("secondkey000", ScopeAdmin, AllWorkspaces), Now: 2}.Encode(),
		KeyCreateCommand{Key: expiring, By: "admin0000000", Now: 3}.Encode(),
		KeyCreateCommand{Key: testAPIKey("writer000000", ScopeLinksWrite, AllWorkspaces), By: "admin0000000", Now: 4}.Encode(),
		KeyCreateCommand{Key: testAPIKey("bywriter0000", ScopeAdmin, AllWorkspaces), By: "writer000000", Now: 5}.Encode(),
		KeyCreateCommand{Key: testAPIKey("byexpired000", ScopeAdmin, AllWorkspaces), By: "expiring0000", Now: 60}.Encode(),
		KeyRevokeCommand{ID: "admin0000000", By: "admin0000000", Now: 70}.Encode(),
		KeyCreateCommand{Key: testAPIKey("byrevoked000", ScopeAdmin, AllWorkspaces), By: "admin0000000", Now: 80}.Encode(),
		KeyRevokeCommand{ID: "writer000000", By: "admin0000000", Now: 90}.Encode(),
	)
	want := []error{nil, ErrUnauthorized, nil, nil, ErrUnauthorized, ErrUnauthorized, nil, ErrUnauthorized, ErrUnauthorized}
	for i, w := range want {
		if err, _ := results[i].(error); !errors.Is(err, w) {
			t.Errorf("entry %d: %v, want %v", i, err, w)
		}
	}
	if _, ok := f.Key("writer000000"); !ok {
		t.Fatal("a revoked admin key revoked another key")
	}
}

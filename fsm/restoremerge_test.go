package fsm

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// mergedBackup is what the leader hands Raft to restore backup into cur.
func mergedBackup(t *testing.T, cur *FSM, backup []byte) []byte {
	t.Helper()
	snap, err := ReadSnapshot(bytes.NewReader(backup))
	if err != nil {
		t.Fatalf("read backup: %v", err)
	}
	cur.KeepHandedOut(snap)
	cur.RecordRestore(snap, RestoreRecord{KeyID: RootKeyID, At: 1, Backup: "test backup", NewClusterID: [16]byte{9}})
	size, err := snap.WriteTo(discard{})
	if err != nil {
		t.Fatalf("size the merged snapshot: %v", err)
	}
	var buf bytes.Buffer
	n, err := snap.WriteTo(&buf)
	if err != nil || n != size || int64(buf.Len()) != n {
		t.Fatalf("encode the merged snapshot: %d bytes (sized %d), %v", n, size, err)
	}
	return buf.Bytes()
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// restored is a new FSM (a follower) that installed snapshot.
func restored(t *testing.T, snapshot []byte) *FSM {
	t.Helper()
	f := New()
	if err := f.Restore(nopCloser{bytes.NewReader(snapshot)}); err != nil {
		t.Fatalf("install: %v", err)
	}
	return f
}

// TestRestoreKeepsHandedOutCodes: after a backup is restored, no code the
// cluster handed out since (or ever) is handed out again, by any strategy,
// while what the backup holds comes back as it was.
func TestRestoreKeepsHandedOutCodes(t *testing.T) {
	cur := New()
	applyAll(t, cur, InitCommand{Key: testKey}.Encode())
	a := createOne(t, cur, 10, CreateRequest{URL: "https://example.com/a"})
	kept := createOne(t, cur, 11, CreateRequest{URL: "https://example.com/kept"})
	backup := snapshotBytes(t, cur)

	// Everything below happens after the backup.
	b := createOne(t, cur, 20, CreateRequest{URL: "https://example.com/b"})
	vanity := createOne(t, cur, 21, CreateRequest{URL: "https://example.com/v", CustomCode: "vanity"})
	hash := createOne(t, cur, 22, CreateRequest{URL: "https://example.com/h", Strategy: StrategyHash})
	gone := createOne(t, cur, 23, CreateRequest{URL: "https://example.com/gone"})
	applyFrom(cur, 100,
		DeleteCommand{Code: gone.Link.Code, Now: 24}.Encode(),
		DeleteCommand{Code: kept.Link.Code, Now: 25}.Encode(),
	)
	for _, r := range []CreateResult{a, kept, b, vanity, hash, gone} {
		if r.Err != nil {
			t.Fatalf("setup create: %v", r.Err)
		}
	}

	merged := mergedBackup(t, cur, backup)
	if again := mergedBackup(t, cur, backup); !bytes.Equal(merged, again) {
		t.Fatal("merging the same backup into the same state twice gave different snapshots")
	}
	leader, follower := restored(t, merged), restored(t, merged)

	// What the backup holds is back, with its targets.
	for _, l := range []Link{a.Link, kept.Link} {
		if got, ok := leader.Get(l.Code); !ok || got.URL != l.URL {
			t.Errorf("%s after the restore: %+v, %v; want the backup's link to %s", l.Code, got, ok, l.URL)
		}
	}
	// What was handed out after the backup is gone and stays out of use.
	handedOut := map[string]bool{}
	for _, l := range []Link{b.Link, vanity.Link, hash.Link, gone.Link} {
		handedOut[l.Code] = true
		t.Run("retired "+l.Code, func(t *testing.T) {
			if got, ok := leader.Get(l.Code); ok {
				t.Fatalf("redirects to %s after the restore; want no link", got.URL)
			}
			r := createOne(t, leader, 30, CreateRequest{URL: "https://stranger.example/", CustomCode: l.Code})
			if !errors.Is(r.Err, ErrCodeTaken) {
				t.Errorf("a custom create of it: %+v; want ErrCodeTaken", r)
			}
		})
	}
	if r := createOne(t, leader, 31, CreateRequest{URL: "https://example.com/h", Strategy: StrategyHash}); r.Err != nil || r.Link.Code == hash.Link.Code {
		t.Errorf("hash create of the same URL: %+v; want a new link at the next salt", r)
	}
	for i := range 200 {
		r := createOne(t, leader, int64(40+i), CreateRequest{URL: fmt.Sprintf("https://example.com/new/%d", i)})
		if r.Err != nil || handedOut[r.Link.Code] || r.Link.Code == a.Link.Code || r.Link.Code == kept.Link.Code {
			t.Fatalf("create %d after the restore: %+v; a code handed out before", i, r)
		}
		if r.Link.ID <= gone.Link.ID {
			t.Fatalf("create %d after the restore got id %d; ids handed out before reach %d", i, r.Link.ID, gone.Link.ID)
		}
	}

	// Every node installs the same bytes, so holds the same state.
	if !bytes.Equal(snapshotBytes(t, follower), snapshotBytes(t, restored(t, merged))) {
		t.Error("two nodes installing the merged snapshot hold different states")
	}
}

// TestRestoreOfUninitialisedBackup: a backup taken before the first leader
// set the code key restores without taking the key away.
func TestRestoreOfUninitialisedBackup(t *testing.T) {
	cur := New()
	applyAll(t, cur, InitCommand{Key: testKey, ClusterID: [16]byte{7}}.Encode())
	b := createOne(t, cur, 10, CreateRequest{URL: "https://example.com/b"})

	f := restored(t, mergedBackup(t, cur, snapshotBytes(t, New())))
	if f.ClusterID() != cur.ClusterID() {
		t.Errorf("cluster id %q after the restore, want %q", f.ClusterID(), cur.ClusterID())
	}
	r := createOne(t, f, 20, CreateRequest{URL: "https://example.com/after"})
	if r.Err != nil || r.Link.Code == b.Link.Code {
		t.Errorf("create after the restore: %+v; want a new code", r)
	}
}

// TestRestoreKeepsTheClusterIdentity: a cluster that restores a backup,
// its own or another cluster's, keeps its cluster id; a cluster restored
// before it had one (a disaster recovery) takes the new id its leader drew,
// never the lost cluster's. The code key is the backup's whenever it has
// one, so codes continue where the backup left them.
func TestRestoreKeepsTheClusterIdentity(t *testing.T) {
	initialised := func(key byte, id byte) *FSM {
		f := New()
		applyAll(t, f, InitCommand{Key: [32]byte{key}, ClusterID: [16]byte{id}}.Encode())
		return f
	}
	cases := []struct {
		name         string
		cur, backup  *FSM
		wantID       [16]byte
		wantKeyOfCur bool
	}{
		{"own backup", initialised(1, 1), initialised(1, 1), [16]byte{1}, false},
		{"another cluster's backup", initialised(1, 1), initialised(2, 2), [16]byte{1}, false},
		{"a backup taken before its init", initialised(1, 1), New(), [16]byte{1}, true},
		{"a new cluster restoring at start", New(), initialised(2, 2), [16]byte{9}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := restored(t, mergedBackup(t, c.cur, snapshotBytes(t, c.backup)))
			if got, want := f.ClusterID(), hex.EncodeToString(c.wantID[:]); got != want {
				t.Errorf("cluster id %s after the restore, want %s", got, want)
			}
			wantKey := c.backup.s.key
			if c.wantKeyOfCur {
				wantKey = c.cur.s.key
			}
			if f.s.key != wantKey {
				t.Errorf("code key %x after the restore, want %x", f.s.key[:2], wantKey[:2])
			}
		})
	}
}

// TestRestoreKeepsKeysAndRevocations: a restore keeps the keys made since
// the backup and never brings back a key revoked since; the audit log
// stays the cluster's own.
func TestRestoreKeepsKeysAndRevocations(t *testing.T) {
	cur := New()
	applyAll(t, cur,
		KeyCreateCommand{Key: testAPIKey("oldkeyrevokd", ScopeAdmin, AllWorkspaces), By: RootKeyID, Now: 1}.Encode(),
		KeyCreateCommand{Key: testAPIKey("oldkeykept12", ScopeLinksRead, "ws"), By: RootKeyID, Now: 2}.Encode(),
	)
	backup := snapshotBytes(t, cur)
	applyFrom(cur, 10,
		KeyRevokeCommand{ID: "oldkeyrevokd", By: RootKeyID, Now: 3}.Encode(),
		KeyCreateCommand{Key: testAPIKey("newkey123456", ScopeLinksWrite, "ws"), By: RootKeyID, Now: 4}.Encode(),
	)
	f := restored(t, mergedBackup(t, cur, backup))
	for id, want := range map[string]bool{"oldkeyrevokd": false, "oldkeykept12": true, "newkey123456": true} {
		if _, ok := f.Key(id); ok != want {
			t.Errorf("key %s known after the restore: %v, want %v", id, ok, want)
		}
	}
	if err, _ := f.Apply(&raft.Log{Index: 100, Type: raft.LogCommand, Data: KeyCreateCommand{Key: testAPIKey("oldkeyrevokd", ScopeAdmin, AllWorkspaces), By: RootKeyID}.Encode()}).(error); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("a revoked key id was created again: %v", err)
	}
	// The cluster's own entries, then the restore's.
	got, want := f.Audit(AuditQuery{Limit: 10}), cur.Audit(AuditQuery{Limit: 10})
	if len(got) != len(want)+1 || got[0].Action != AuditBackupRestore || got[1] != want[0] {
		t.Fatalf("audit after the restore: %+v, want the cluster's own %+v and the restore", got, want)
	}
}

package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/linkraft/linkraft/cluster/secure"
	"github.com/linkraft/linkraft/fsm"
)

// newClusterKey is a fresh cluster key, as `linkraft keygen` makes one.
func newClusterKey(t *testing.T) *secure.Key {
	t.Helper()
	raw := make([]byte, secure.KeySize)
	rand.Read(raw)
	k, err := secure.ParseKey(base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// openKeyed is a single node holding key (nil: none).
func openKeyed(t *testing.T, key *secure.Key, tweaks ...func(*Config)) *Node {
	t.Helper()
	return openNode(t, t.TempDir(), append([]func(*Config){func(c *Config) { c.Key = key }}, tweaks...)...)
}

func backupOf(t *testing.T, n *Node) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := n.Backup(&b); err != nil {
		t.Fatalf("backup: %v", err)
	}
	return b.Bytes()
}

// snapshotIn is the snapshot inside a backup's envelope.
func snapshotIn(backup []byte) []byte {
	return backup[backupHeaderSize : len(backup)-backupMACSize]
}

// edited is snapshot with old replaced by new (as long) and its CRC-32C
// computed again: what someone who changes a backup on purpose does.
func edited(t *testing.T, snapshot []byte, old, new string) []byte {
	t.Helper()
	if len(old) != len(new) || !bytes.Contains(snapshot, []byte(old)) {
		t.Fatalf("cannot replace %q by %q in the snapshot", old, new)
	}
	out := bytes.Replace(snapshot, []byte(old), []byte(new), 1)
	binary.BigEndian.PutUint32(out[len(out)-4:], crc32.Checksum(out[:len(out)-4], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// flipped is b with one bit of its middle byte flipped: damage.
func flipped(b []byte) []byte {
	out := bytes.Clone(b)
	out[len(out)/2] ^= 1
	return out
}

// sealed is snapshot in an envelope signed with key: a backup of a cluster
// holding key.
func sealed(key *secure.Key, snapshot []byte) []byte {
	mac := key.BackupMAC()
	out := append(append(bytes.Clone(backupMagic), backupFormat, backupKeyCluster), snapshot...)
	mac.Write(out)
	return mac.Sum(out)
}

// withEnvelope is snapshot in backup's envelope: header and MAC kept.
func withEnvelope(backup, snapshot []byte) []byte {
	out := append(bytes.Clone(backup[:backupHeaderSize]), snapshot...)
	return append(out, backup[len(backup)-backupMACSize:]...)
}

// stateOf is everything the node holds, as its snapshot's bytes.
func stateOf(t *testing.T, n *Node) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := n.FSM().WriteBackup(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func propose(t *testing.T, n *Node, cmd fsm.Command) {
	t.Helper()
	if _, err := n.Propose(context.Background(), cmd, ProposeOptions{}); err != nil {
		t.Fatalf("propose %T: %v", cmd, err)
	}
}

// TestRestoreRefusesAnEditedBackup: a backup changed after it was made,
// its checksum made right again, is refused as unauthenticated, wrapped as
// it was or as a bare snapshot (an earlier build's format), and the cluster
// is unchanged; damage is told apart. Only the backup as made restores.
func TestRestoreRefusesAnEditedBackup(t *testing.T) {
	t.Parallel()
	n := openKeyed(t, newClusterKey(t))
	l := createURL(t, n, "https://example.com/the-real-target")
	backup := backupOf(t, n)
	createURL(t, n, "https://example.com/after-the-backup")
	before := stateOf(t, n)
	forged := edited(t, snapshotIn(backup), "https://example.com/the-real-target", "https://attacker.example/phishing12")

	for _, tc := range []struct {
		name   string
		backup []byte
		want   error
		says   string
	}{
		{"edited, checksum recomputed", withEnvelope(backup, forged), ErrBackupUnauthenticated,
			"not made by a cluster holding this cluster key, or it was changed after it was made"},
		{"edited, as a bare snapshot", forged, ErrBackupUnauthenticated, "bare snapshot"},
		{"damaged", withEnvelope(backup, flipped(snapshotIn(backup))), fsm.ErrCorruptSnapshot, "checksum mismatch"},
		{"truncated", backup[:len(backup)-1], fsm.ErrCorruptSnapshot, "checksum mismatch"},
	} {
		err := n.Restore(tc.backup, RestoreOptions{By: fsm.RootKeyID})
		if err == nil {
			t.Fatalf("%s: restored; want %v saying %q", tc.name, tc.want, tc.says)
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want %v saying %q", tc.name, err, tc.want, tc.says)
		}
		if tc.want == ErrBackupUnauthenticated && !strings.Contains(err.Error(), "--foreign") {
			t.Errorf("%s: %v; want the message to name --foreign", tc.name, err)
		}
		if !bytes.Equal(stateOf(t, n), before) {
			t.Fatalf("%s: a refused restore changed the state", tc.name)
		}
	}
	if got, _ := n.FSM().Get(l.Code); got.URL != l.URL {
		t.Fatalf("%s leads to %s", l.Code, got.URL)
	}

	if err := n.Restore(backup, RestoreOptions{By: fsm.RootKeyID}); err != nil {
		t.Fatalf("the backup as made: %v", err)
	}
	entries := n.FSM().Audit(fsm.AuditQuery{Limit: 1})
	if len(entries) != 1 || entries[0].Action != fsm.AuditBackupRestore || entries[0].KeyID != fsm.RootKeyID ||
		entries[0].Subject != "backup authenticated by the cluster key" {
		t.Fatalf("newest audit entry after the restore: %+v", entries)
	}
}

// TestRestoreOfAnotherCluster: a backup of a cluster with another key, or
// of an earlier build, restores only with Foreign.
func TestRestoreOfAnotherCluster(t *testing.T) {
	t.Parallel()
	key := newClusterKey(t)
	n := openKeyed(t, key)
	other := openKeyed(t, newClusterKey(t))
	createURL(t, other, "https://example.com/from-elsewhere")
	var bare bytes.Buffer
	if err := other.FSM().WriteBackup(&bare); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		into   *Node
		backup []byte
		says   string
	}{
		{"another cluster key", n, backupOf(t, other), "not made by a cluster holding this cluster key"},
		{"an earlier build", n, bare.Bytes(), "bare snapshot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.into.Restore(tc.backup, RestoreOptions{By: fsm.RootKeyID})
			if err == nil {
				t.Fatalf("without Foreign: restored; want ErrBackupUnauthenticated saying %q", tc.says)
			}
			if !errors.Is(err, ErrBackupUnauthenticated) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("without Foreign: %v; want ErrBackupUnauthenticated saying %q", err, tc.says)
			}
			if err := tc.into.Restore(tc.backup, RestoreOptions{Foreign: true, By: fsm.RootKeyID}); err != nil {
				t.Fatalf("with Foreign: %v", err)
			}
			if e := tc.into.FSM().Audit(fsm.AuditQuery{Limit: 1}); len(e) != 1 || e[0].Action != fsm.AuditBackupRestore || !strings.HasPrefix(e[0].Subject, "foreign backup") {
				t.Fatalf("newest audit entry: %+v; want the foreign restore", e)
			}
		})
	}
}

// TestForeignRestoreChecksEveryRecord: Foreign lifts authentication, not
// the rules: a target no client may store, a webhook into the network on
// a node that does not allow private targets, an admin key with scopes a
// key create refuses; each refused, named, and nothing changed.
func TestForeignRestoreChecksEveryRecord(t *testing.T) {
	t.Parallel()
	n := openKeyed(t, newClusterKey(t))
	createURL(t, n, "https://example.com/kept")
	attacker := newClusterKey(t)
	src := openKeyed(t, attacker)

	javascript := createURL(t, src, "https://example.com/will-be-javascript-1")
	js := "javascript:alert(1)//" + strings.Repeat("x", len(javascript.URL)-len("javascript:alert(1)//"))
	script := sealed(attacker, edited(t, snapshotIn(backupOf(t, src)), javascript.URL, js))

	hooked := openKeyed(t, newClusterKey(t))
	propose(t, hooked, fsm.WebhookSetCommand{Webhook: fsm.Webhook{ID: "hookintoloopback", URL: "http://127.0.0.1:9/steal",
		Events: fsm.EventTypes(0).With(fsm.EventLinkCreated), Secret: "0123456789abcdef"}, By: fsm.RootKeyID})
	admin := openKeyed(t, newClusterKey(t))
	propose(t, admin, fsm.KeyCreateCommand{Key: fsm.APIKey{ID: "attackeradmn", Name: "x", Scopes: fsm.ScopeAdmin,
		Workspaces: []string{"team"}, CreatedAt: 1}, By: fsm.RootKeyID})

	before := stateOf(t, n)
	for _, tc := range []struct {
		name   string
		backup []byte
		says   string
	}{
		{"javascript target", script, `link "` + javascript.Code + `": url: the javascript: scheme is not allowed`},
		{"webhook to loopback", backupOf(t, hooked), `webhook "hookintoloopback": url: target 127.0.0.1`},
		{"admin key with narrow workspaces", backupOf(t, admin), `key "attackeradmn": an admin key with workspaces team`},
	} {
		err := n.Restore(tc.backup, RestoreOptions{Foreign: true, By: fsm.RootKeyID})
		if err == nil {
			t.Fatalf("%s: restored; want fsm.ErrRefusedRecord naming %q", tc.name, tc.says)
		}
		if !errors.Is(err, fsm.ErrRefusedRecord) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want fsm.ErrRefusedRecord naming %q", tc.name, err, tc.says)
		}
		if !bytes.Equal(stateOf(t, n), before) {
			t.Fatalf("%s: a refused restore changed the state", tc.name)
		}
	}

	// A node that allows private targets takes the webhook, as its
	// clients may register it.
	private := openKeyed(t, newClusterKey(t), func(c *Config) { c.Writes.AllowPrivateTargets = true })
	if err := private.Restore(backupOf(t, hooked), RestoreOptions{Foreign: true}); err != nil {
		t.Fatalf("a webhook to loopback on a node allowing private targets: %v", err)
	}
}

// TestRestoreKeepsTheKeyThatRestores: a backup that revokes the key
// performing the restore leaves that key valid.
func TestRestoreKeepsTheKeyThatRestores(t *testing.T) {
	t.Parallel()
	operator := fsm.APIKey{ID: "operatorkey1", Name: "ops", Hash: [fsm.KeyHashSize]byte{1}, Scopes: fsm.ScopeAdmin,
		Workspaces: []string{fsm.AllWorkspaces}, CreatedAt: 1}
	n := openKeyed(t, newClusterKey(t))
	propose(t, n, fsm.KeyCreateCommand{Key: operator, By: fsm.RootKeyID, Now: 1})
	src := openKeyed(t, newClusterKey(t))
	propose(t, src, fsm.KeyCreateCommand{Key: operator, By: fsm.RootKeyID, Now: 1})
	propose(t, src, fsm.KeyRevokeCommand{ID: operator.ID, By: fsm.RootKeyID, Now: 2})

	if err := n.Restore(backupOf(t, src), RestoreOptions{Foreign: true, By: operator.ID}); err != nil {
		t.Fatal(err)
	}
	if k, ok := n.FSM().Key(operator.ID); !ok || k.Hash != operator.Hash {
		t.Fatalf("the key that restored: %+v, %v; want it valid", k, ok)
	}
	if e := n.FSM().Audit(fsm.AuditQuery{KeyID: operator.ID, Limit: 1}); len(e) != 1 || e[0].Action != fsm.AuditBackupRestore || !strings.Contains(e[0].Subject, "kept key operatorkey1") {
		t.Fatalf("audit: %+v; want the restore, saying the key was kept", e)
	}
}

package cluster

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/linkraft/linkraft/fsm"
)

func compressedBackupOf(t *testing.T, n *Node) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := n.BackupCompressed(&b); err != nil {
		t.Fatalf("compressed backup: %v", err)
	}
	return b.Bytes()
}

// TestCompressedBackupRestores: a compressed backup is smaller than the
// plain one of the same state, equal states give equal bytes (which is how
// scheduled backups know nothing changed), and it restores what it held.
func TestCompressedBackupRestores(t *testing.T) {
	t.Parallel()
	n := openKeyed(t, newClusterKey(t))
	var links []fsm.Link
	for i := range 50 {
		links = append(links, createURL(t, n, "https://example.com/a/rather/long/path/to/compress/"+strings.Repeat("x", i)))
	}
	compressed, plain := compressedBackupOf(t, n), backupOf(t, n)
	if len(compressed) >= len(plain) {
		t.Fatalf("compressed backup %d bytes, plain %d", len(compressed), len(plain))
	}
	if again := compressedBackupOf(t, n); !bytes.Equal(again, compressed) {
		t.Fatal("two compressed backups of one state differ")
	}
	createURL(t, n, "https://example.com/after-the-backup")
	if err := n.Restore(compressed, RestoreOptions{By: fsm.RootKeyID}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	for _, l := range links {
		if got, _ := n.FSM().Get(l.Code); got.URL != l.URL {
			t.Fatalf("%s leads to %q after the restore, want %q", l.Code, got.URL, l.URL)
		}
	}
	if e := n.FSM().Audit(fsm.AuditQuery{Limit: 1}); len(e) != 1 || e[0].Subject != "backup authenticated by the cluster key" {
		t.Fatalf("newest audit entry: %+v", e)
	}
}

// TestCompressedBackupRefused: damage to the stored bytes, another
// cluster's key and a truncation are refused, each saying why, and the
// state is unchanged.
func TestCompressedBackupRefused(t *testing.T) {
	t.Parallel()
	n := openKeyed(t, newClusterKey(t))
	createURL(t, n, "https://example.com/kept")
	other := openKeyed(t, newClusterKey(t))
	createURL(t, other, "https://example.com/elsewhere")
	backup := compressedBackupOf(t, n)
	before := stateOf(t, n)
	for _, tc := range []struct {
		name   string
		backup []byte
		want   error
		says   string
	}{
		{"damaged", withEnvelope(backup, flipped(snapshotIn(backup))), fsm.ErrCorruptSnapshot, "checksum mismatch"},
		{"truncated", backup[:len(backup)-1], fsm.ErrCorruptSnapshot, "checksum mismatch"},
		{"another cluster key", compressedBackupOf(t, other), ErrBackupUnauthenticated, "not made by a cluster holding this cluster key"},
	} {
		err := n.Restore(tc.backup, RestoreOptions{By: fsm.RootKeyID})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want %v saying %q", tc.name, err, tc.want, tc.says)
		}
		if !bytes.Equal(stateOf(t, n), before) {
			t.Fatalf("%s: a refused restore changed the state", tc.name)
		}
	}
}

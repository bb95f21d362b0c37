package e2e

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// restoreBackup posts a backup to /admin/restore.
func (n *node) restoreBackup(t *testing.T, backup []byte) response {
	t.Helper()
	return n.request(t, http.MethodPost, "/admin/restore", http.Header{"Content-Type": {"application/octet-stream"}}, backup)
}

// backup takes a backup of n's state.
func (n *node) backup(t *testing.T) []byte {
	t.Helper()
	r := n.get(t, "/admin/backup")
	if r.status != http.StatusOK || len(r.body) == 0 {
		t.Fatalf("GET /admin/backup: want 200 with a body, got %v", r)
	}
	return r.body
}

// TestRestoreIntoFreshNode is disaster recovery as an operator runs it:
// start a brand-new node, and as soon as /health answers, restore the
// backup into it. The node is not ready for a restore yet (its Raft has
// not committed its first configuration); the restore waits for it
// instead of failing.
func TestRestoreIntoFreshNode(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	src := startNode(t, nodeOptions{})
	a := src.createURL(t, "https://example.com/disaster/a")
	b := src.createURL(t, "https://example.com/disaster/b")
	backup := src.backup(t)

	// The operator keeps the cluster key with the backup: the new node is
	// given the old node's key file, so the backup restores as its own.
	fresh := newNode(t, "fresh")
	answers := func(health) bool { return true }
	opts := nodeOptions{ID: "fresh", Settings: map[string]string{"cluster-key-file": filepath.Join(src.dataDir, "cluster.key")}}
	if err := fresh.launchUntil(t, opts, nil, func() error { return fresh.waitReady(answers) }); err != nil {
		t.Fatalf("fresh node does not answer /health: %v", err)
	}
	if r := fresh.restoreBackup(t, backup); r.status != http.StatusOK {
		t.Fatalf("restore into a node that just answered /health: want 200, got %v", r)
	}
	fresh.requireRedirect(t, a.ShortCode, a.OriginalURL)
	fresh.requireRedirect(t, b.ShortCode, b.OriginalURL)
	if got := fresh.createURL(t, "https://example.com/disaster/after"); got.ShortCode == a.ShortCode || got.ShortCode == b.ShortCode {
		t.Errorf("a create after the restore got %s, a code the backup holds", got.ShortCode)
	}
}

// TestRestoreNeverReissuesCodes: a code handed out after a backup was
// taken stays out of use once that backup is restored. Otherwise whoever
// holds that short link would land on a stranger's target.
func TestRestoreNeverReissuesCodes(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})
	a := n.createURL(t, "https://example.com/reissue/a")
	backup := n.backup(t)
	b := n.createURL(t, "https://example.com/reissue/b")
	deleted := n.createURL(t, "https://example.com/reissue/deleted")
	if r := n.request(t, http.MethodDelete, "/api/v1/urls/"+deleted.ShortCode, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: want 204, got %v", r)
	}

	if r := n.restoreBackup(t, backup); r.status != http.StatusOK {
		t.Fatalf("restore: want 200, got %v", r)
	}
	n.requireRedirect(t, a.ShortCode, a.OriginalURL)
	for range 20 {
		c := n.createURL(t, "https://example.com/reissue/c")
		if c.ShortCode == b.ShortCode || c.ShortCode == deleted.ShortCode {
			t.Fatalf("a create after the restore got %s again, a code handed out after the backup", c.ShortCode)
		}
	}
	for _, code := range []string{b.ShortCode, deleted.ShortCode} {
		r := n.request(t, http.MethodGet, "/"+code, http.Header{"Accept": {"application/json"}}, nil)
		requireProblem(t, r, http.StatusNotFound)
		if custom := n.postJSON(t, "/api/v1/urls", map[string]any{"url": "https://example.com/squat", "custom_code": code}); custom.status != http.StatusConflict {
			t.Errorf("custom_code %s after the restore: want 409 (it was handed out before), got %v", code, custom)
		}
	}
}

// Offsets of a backup file's envelope (cluster/backup.go): a 6-byte
// header ("LKRB", format, key) and a 32-byte HMAC-SHA256 at the end, around
// the snapshot, which ends in its own CRC-32C.
const (
	backupHeader = 6
	backupMAC    = 32
)

// editBackup is what someone who can write to the backup store does to
// change a link's target: replace its bytes (as many) in the snapshot and
// compute the snapshot's CRC-32C again. Without the cluster key the MAC
// stays as it was. bare drops the envelope: a backup as earlier builds
// wrote it.
func editBackup(t *testing.T, backup []byte, old, new string, bare bool) []byte {
	t.Helper()
	if len(old) != len(new) || !bytes.Contains(backup, []byte(old)) {
		t.Fatalf("cannot replace %q by %q in the backup", old, new)
	}
	out := bytes.Replace(backup, []byte(old), []byte(new), 1)
	snapshot := out[backupHeader : len(out)-backupMAC]
	binary.BigEndian.PutUint32(snapshot[len(snapshot)-4:], crc32.Checksum(snapshot[:len(snapshot)-4], crc32.MakeTable(crc32.Castagnoli)))
	if bare {
		return bytes.Clone(snapshot)
	}
	return out
}

// newestAudit is the newest entry of n's audit log.
func (n *node) newestAudit(t *testing.T) map[string]string {
	t.Helper()
	var doc struct {
		Entries []map[string]string `json:"entries"`
	}
	r := n.get(t, "/admin/audit?limit=1")
	if err := json.Unmarshal(r.body, &doc); r.status != http.StatusOK || err != nil {
		t.Fatalf("GET /admin/audit: %v (%v)", r, err)
	}
	if len(doc.Entries) == 0 {
		return nil
	}
	return doc.Entries[0]
}

// TestRestoreAuthenticatesBackups goes through `linkraft backup` and
// `linkraft restore` on nodes with cluster keys: the cluster's own backup
// restores and the audit log records it; one edited in the backup store
// (its checksum made right) is refused as unauthenticated and changes
// nothing; a backup of another cluster, or a bare snapshot as earlier
// builds wrote, restores only with --foreign, and even then no record a
// client could not write gets in.
func TestRestoreAuthenticatesBackups(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{Settings: map[string]string{"cluster-key": newClusterKey(t)}})
	const target = "https://example.com/restore-auth/the-real-one"
	l := n.createURL(t, target)
	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.backup")
	if out, err := runCLI(t, n, "backup", "-o", file); err != nil {
		t.Fatalf("linkraft backup: %v\n%s", err, out)
	}
	backup, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	after := n.createURL(t, "https://example.com/restore-auth/after-the-backup")

	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	phishing := "https://attacker.example/restore-auth/phish"
	phishing += strings.Repeat("x", len(target)-len(phishing))
	edited := write("edited.backup", editBackup(t, backup, target, phishing, false))
	bare := write("bare.backup", editBackup(t, backup, target, target, true))
	for _, tc := range []struct{ name, file, says string }{
		{"edited", edited, "not made by a cluster holding this cluster key, or it was changed after it was made"},
		{"bare snapshot of an earlier build", bare, "bare snapshot"},
	} {
		out, err := runCLI(t, n, "restore", tc.file)
		if err == nil || !strings.Contains(out, "backup authentication failed") || !strings.Contains(out, tc.says) || !strings.Contains(out, "--foreign") {
			t.Fatalf("linkraft restore of the %s backup: %v\n%s\nwant refused: authentication failed, %q, naming --foreign", tc.name, err, out, tc.says)
		}
		n.requireRedirect(t, l.ShortCode, target)
		n.requireRedirect(t, after.ShortCode, after.OriginalURL)
		if e := n.newestAudit(t); e["action"] == "backup.restore" {
			t.Fatalf("a refused restore is in the audit log: %v", e)
		}
	}

	if out, err := runCLI(t, n, "restore", file); err != nil {
		t.Fatalf("linkraft restore of the cluster's own backup: %v\n%s", err, out)
	}
	n.requireRedirect(t, l.ShortCode, target)
	requireProblem(t, n.request(t, http.MethodGet, "/"+after.ShortCode, http.Header{"Accept": {"application/json"}}, nil), http.StatusNotFound)
	if e := n.newestAudit(t); e["action"] != "backup.restore" || e["key_id"] != "admin-token" || e["detail"] != "backup authenticated by the cluster key" {
		t.Fatalf("newest audit entry after the restore: %v", e)
	}

	// Another cluster, another key; it allows private targets, as the
	// node restored into does not.
	other := startNode(t, nodeOptions{ID: "other", Settings: map[string]string{"cluster-key": newClusterKey(t), "allow-private-targets": "true"}})
	if out, err := runCLI(t, other, "restore", file); err == nil || !strings.Contains(out, "not made by a cluster holding this cluster key") {
		t.Fatalf("restore of another cluster's backup without --foreign: %v\n%s", err, out)
	}
	if out, err := runCLI(t, other, "restore", "--foreign", file); err != nil {
		t.Fatalf("restore of another cluster's backup with --foreign: %v\n%s", err, out)
	}
	other.requireRedirect(t, l.ShortCode, target)
	if e := other.newestAudit(t); e["action"] != "backup.restore" || !strings.HasPrefix(e["detail"], "foreign backup") {
		t.Fatalf("newest audit entry after the foreign restore: %v", e)
	}
	if out, err := runCLI(t, n, "restore", "--foreign", bare); err != nil {
		t.Fatalf("restore of a bare snapshot with --foreign: %v\n%s", err, out)
	}

	// --foreign lifts authentication, never the rules.
	js := "javascript:alert(document.cookie)//"
	js += strings.Repeat("x", len(target)-len(js))
	script := write("script.backup", editBackup(t, backup, target, js, false))
	r := other.postJSON(t, "/admin/webhooks", map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"link.created"}, "secret": "0123456789abcdef"})
	if r.status != http.StatusCreated {
		t.Fatalf("POST /admin/webhooks on a node allowing private targets: %v", r)
	}
	hooked := filepath.Join(dir, "hooked.backup")
	if out, err := runCLI(t, other, "backup", "-o", hooked); err != nil {
		t.Fatalf("linkraft backup: %v\n%s", err, out)
	}
	for _, tc := range []struct{ name, file, says string }{
		{"javascript: target", script, `link "` + l.ShortCode + `": url: the javascript: scheme is not allowed`},
		{"webhook to loopback", hooked, "url: target 127.0.0.1"},
	} {
		out, err := runCLI(t, n, "restore", "--foreign", tc.file)
		if err == nil || !strings.Contains(out, "the backup holds a record this cluster refuses") || !strings.Contains(out, tc.says) {
			t.Fatalf("restore --foreign of a backup with a %s: %v\n%s\nwant refused, naming %q", tc.name, err, out, tc.says)
		}
		n.requireRedirect(t, l.ShortCode, target)
	}
}

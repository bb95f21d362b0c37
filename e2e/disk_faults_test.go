package e2e

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDamagedRaftStoreIsRefusedAndReplaced: a cluster member whose raft.db
// was damaged on disk — a changed byte inside a stored link, or a file cut
// short — refuses to start, with an error that says what to do, and never
// answers a request from the damaged state. Started again with an empty
// data dir, as the error says, it rejoins and serves every link.
func TestDamagedRaftStoreIsRefusedAndReplaced(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	waitOneLeader(t, formationBound, nodes...)
	var links []link
	for i := range 12 {
		links = append(links, nodes[i%3].createURL(t, "https://example.com/disk-damage/"+itoa(i)))
	}
	victim := nodes[2]
	for _, l := range links {
		victim.requireRedirectHead(t, l.ShortCode, l.OriginalURL)
	}
	if err := victim.stop(); err != nil {
		t.Fatalf("stop %s: %v", victim.id, err)
	}
	store := filepath.Join(victim.dataDir, "raft.db")
	healthy, err := os.ReadFile(store)
	if err != nil {
		t.Fatal(err)
	}

	damages := []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"a changed byte inside a stored link", func(b []byte) []byte {
			target := []byte(links[5].OriginalURL)
			if bytes.Count(b, target) == 0 {
				t.Fatalf("link %s not found in raft.db", target)
			}
			return bytes.ReplaceAll(b, target, bytes.Replace(target, []byte("example"), []byte("exbmple"), 1))
		}},
		{"a file cut short", func(b []byte) []byte { return b[:len(b)/2] }},
	}
	for _, d := range damages {
		if err := os.WriteFile(store, d.damage(bytes.Clone(healthy)), 0o600); err != nil {
			t.Fatal(err)
		}
		victim.launch()
		select {
		case <-victim.done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: %s still running 20 s after starting on a damaged raft.db", d.name, victim.id)
		}
		out := victim.out.String()
		if victim.exitErr() == nil || !strings.Contains(out, "raft store is damaged") || !strings.Contains(out, "empty data dir") {
			t.Fatalf("%s: want a non-zero exit that names the damage and the remedy; exit %v, output:\n%s", d.name, victim.exitErr(), out)
		}
	}

	if err := os.RemoveAll(victim.dataDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(victim.dataDir, 0o750); err != nil { // empty: the node starts afresh
		t.Fatal(err)
	}
	victim.launch()
	if err := victim.waitReady(leaderKnown); err != nil {
		t.Fatalf("%s with an empty data dir: %v", victim.id, err)
	}
	for _, l := range links {
		l := l
		if !eventually(30*time.Second, func() bool {
			r, err := victim.tryRequest(t, http.MethodHead, "/"+l.ShortCode, nil, nil)
			return err == nil && r.status == http.StatusFound && r.header.Get("Location") == l.OriginalURL
		}) {
			t.Fatalf("%s, rejoined with an empty data dir, does not redirect %s to %s", victim.id, l.ShortCode, l.OriginalURL)
		}
	}
	fresh := victim.createURL(t, "https://example.com/disk-damage/after")
	for _, n := range nodes {
		n.requireRedirectHead(t, fresh.ShortCode, fresh.OriginalURL)
	}
}

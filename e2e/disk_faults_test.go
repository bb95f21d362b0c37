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
// or snapshot was damaged on disk — a changed byte inside a stored link, a
// file cut short, a flipped bit — refuses to start, with an error that says
// what to do, and never answers a request from the damaged state. Started
// again with an empty data dir, as the error says, it rejoins and serves
// every link.
func TestDamagedRaftStoreIsRefusedAndReplaced(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, map[string]string{"snapshot-threshold": "16"})
	waitOneLeader(t, formationBound, nodes...)
	var links []link
	for i := range 40 {
		links = append(links, nodes[i%3].createURL(t, "https://example.com/disk-damage/"+itoa(i)))
	}
	victim := nodes[2]
	for _, l := range links {
		victim.requireRedirectHead(t, l.ShortCode, l.OriginalURL)
	}
	var snapshot string // the victim's snapshot state, once it took one
	if !eventually(30*time.Second, func() bool {
		found, _ := filepath.Glob(filepath.Join(victim.dataDir, "snapshots", "*", "state.bin"))
		for _, f := range found {
			if !strings.HasSuffix(filepath.Dir(f), ".tmp") { // one being written
				snapshot = f
			}
		}
		return snapshot != ""
	}) {
		t.Fatalf("%s took no snapshot within 30 s with --snapshot-threshold 16", victim.id)
	}
	if err := victim.stop(); err != nil {
		t.Fatalf("stop %s: %v", victim.id, err)
	}
	store := filepath.Join(victim.dataDir, "raft.db")
	healthy := map[string][]byte{}
	for _, f := range []string{store, snapshot} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		healthy[f] = b
	}
	flipMiddle := func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b }

	damages := []struct {
		name   string
		file   string
		damage func([]byte) []byte
	}{
		{"a changed byte inside a stored link", store, func(b []byte) []byte {
			target := []byte(links[5].OriginalURL)
			if bytes.Count(b, target) == 0 {
				t.Fatalf("link %s not found in raft.db", target)
			}
			return bytes.ReplaceAll(b, target, bytes.Replace(target, []byte("example"), []byte("exbmple"), 1))
		}},
		{"raft.db cut short", store, func(b []byte) []byte { return b[:len(b)/2] }},
		{"a snapshot cut short", snapshot, func(b []byte) []byte { return b[:len(b)/2] }},
		{"a flipped bit in a snapshot", snapshot, flipMiddle},
	}
	for _, d := range damages {
		for f, b := range healthy { // one damage at a time
			if err := os.WriteFile(f, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(d.file, d.damage(bytes.Clone(healthy[d.file])), 0o600); err != nil {
			t.Fatal(err)
		}
		before := len(victim.out.String())
		victim.launch()
		select {
		case <-victim.done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: %s still running 20 s after starting on damaged data", d.name, victim.id)
		}
		out := victim.out.String()[before:] // this start's output only
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

package cluster

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

func recOpen(t *testing.T, id, dir, addr string) *Node {
	t.Helper()
	n, err := Open(Config{
		ID:       id,
		DataDir:  dir,
		RaftAddr: addr,
		Key:      testKey(t),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Raft:     RaftConfig{LogLevel: "off"},
		Writes:   WriteConfig{ClickFlushInterval: time.Hour},
	}, fsm.New())
	if err != nil {
		t.Fatalf("open %s: %v", id, err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func recCreate(t *testing.T, n *Node, url string) fsm.Link {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := n.Create(ctx, fsm.CreateRequest{URL: url, Workspace: "default", CodeLength: 7})
	if err != nil || res.Err != nil {
		t.Fatalf("create %s: %v / %v", url, err, res.Err)
	}
	return res.Link
}

func recWrite(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func recWaitLeader(t *testing.T, n *Node) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !(n.IsLeader() && n.FSM().Initialized()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not become leader within 10s (role %s)", n.ID(), n.Local().Role)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRecoverRebuildsCluster recovers a data dir whose only voter is gone
// (here: renamed and moved) into a single-server cluster with the peers
// file's id and address, keeping state from both a snapshot and the log.
func TestRecoverRebuildsCluster(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n1 := recOpen(t, "n1", dir, freeAddr(t))
	recWaitLeader(t, n1)
	inSnapshot := recCreate(t, n1, "https://example.com/x")
	if err := n1.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	inLog := recCreate(t, n1, "https://example.com/y")
	if err := n1.Close(); err != nil {
		t.Fatalf("close n1: %v", err)
	}

	addr2 := freeAddr(t)
	peers := recWrite(t, t.TempDir(), "peers.json", `[{"id": "n2", "address": "`+addr2+`", "non_voter": false}]`)
	rec, err := Recover(dir, peers)
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	if rec.Links != 2 || len(rec.Servers) != 1 || rec.Servers[0].ID != "n2" || string(rec.Servers[0].Address) != addr2 || rec.Index == 0 || rec.Term == 0 {
		t.Fatalf("recovery report = %+v", rec)
	}

	n2 := recOpen(t, "n2", dir, addr2)
	recWaitLeader(t, n2)
	for _, want := range []fsm.Link{inSnapshot, inLog} {
		got, ok := n2.FSM().Get(want.Code)
		if !ok || got.URL != want.URL {
			t.Fatalf("after recovery Get(%s) = %+v, %v; want %s", want.Code, got, ok, want.URL)
		}
	}
	st, err := n2.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Servers) != 1 || st.Servers[0].ID != "n2" || st.Servers[0].RaftAddr != addr2 || st.LeaderID != "n2" {
		t.Fatalf("status after recovery = %+v", st)
	}
	// The recovered cluster takes writes, and codes keep being unique.
	after := recCreate(t, n2, "https://example.com/z")
	if after.Code == inSnapshot.Code || after.Code == inLog.Code {
		t.Fatalf("code %s handed out again after recovery", after.Code)
	}
	if _, err := Recover(dir, peers); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("recover on a running node's data dir: err = %v, want a 'still running' refusal", err)
	}
}

func TestRecoverRefuses(t *testing.T) {
	t.Parallel()
	good := recWrite(t, t.TempDir(), "peers.json", `[{"id":"n1","address":"127.0.0.1:8081"}]`)

	t.Run("no data dir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "missing")
		_, err := Recover(dir, good)
		if err == nil || !strings.Contains(err.Error(), "no Raft state") {
			t.Fatalf("err = %v", err)
		}
		if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
			t.Fatalf("refusal created %s", dir)
		}
	})
	t.Run("empty data dir", func(t *testing.T) {
		dir := t.TempDir()
		_, err := Recover(dir, good)
		if err == nil || !strings.Contains(err.Error(), "no Raft state") {
			t.Fatalf("err = %v", err)
		}
		if _, serr := os.Stat(filepath.Join(dir, "raft.db")); !os.IsNotExist(serr) {
			t.Fatal("refusal created raft.db")
		}
	})

	// A data dir with real state, so only the peers file is at fault.
	dir := t.TempDir()
	n := recOpen(t, "n1", dir, freeAddr(t))
	recWaitLeader(t, n)
	recCreate(t, n, "https://example.com/x")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	pdir := t.TempDir()
	for _, tc := range []struct{ name, content, want string }{
		{"malformed", `{"id":`, "peers file"},
		{"object not list", `{"id":"n1","address":"127.0.0.1:8081"}`, "peers file"},
		{"empty list", `[]`, "peers file"},
		{"no address", `[{"id":"n1"}]`, "empty address"},
		{"no id", `[{"address":"127.0.0.1:8081"}]`, "empty ID"},
		{"not host:port", `[{"id":"n1","address":"127.0.0.1"}]`, "not host:port"},
		{"unspecified", `[{"id":"n1","address":"0.0.0.0:8081"}]`, "not reachable"},
		{"only non-voters", `[{"id":"n1","address":"127.0.0.1:8081","non_voter":true}]`, "voter"},
		{"duplicate id", `[{"id":"n1","address":"127.0.0.1:8081"},{"id":"n1","address":"127.0.0.1:8082"}]`, "duplicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Recover(dir, recWrite(t, pdir, strings.ReplaceAll(tc.name, " ", "_")+".json", tc.content))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	t.Run("missing peers file", func(t *testing.T) {
		if _, err := Recover(dir, filepath.Join(pdir, "nope.json")); err == nil || !strings.Contains(err.Error(), "nope.json") {
			t.Fatalf("err = %v", err)
		}
	})

	// None of the refusals touched the state: the node still starts as n1.
	n = recOpen(t, "n1", dir, freeAddr(t))
	recWaitLeader(t, n)
	if n.FSM().Len() != 1 {
		t.Fatalf("links after refusals = %d, want 1", n.FSM().Len())
	}
}

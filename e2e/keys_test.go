package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// apiKey is POST /admin/keys' answer.
type apiKey struct {
	ID  string `json:"id"`
	Key string `json:"key"`
}

// createKey makes a key through n (any node: admin calls go to the leader).
func createKey(t *testing.T, n *node, body string) apiKey {
	t.Helper()
	r := n.request(t, http.MethodPost, "/admin/keys", http.Header{"Content-Type": {"application/json"}}, []byte(body))
	if r.status != http.StatusCreated {
		t.Fatalf("create key through %s: %v", n.id, r)
	}
	var k apiKey
	if err := json.Unmarshal(r.body, &k); err != nil || k.Key == "" {
		t.Fatalf("key answer %v: %v", r, err)
	}
	return k
}

func bearer(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} }

// TestKeysReadAfterWrite: a key works on every node as soon as its
// creation is acknowledged anywhere, and on none once its revocation is.
// Each round creates the key through one node and uses it at once on
// every node (the followers may not have applied it yet: they must ask
// the leader before refusing it), then revokes it through another node
// and tries it at once everywhere.
func TestKeysReadAfterWrite(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	for round := range 6 {
		via, revokeVia := nodes[round%3], nodes[(round+1)%3]
		k := createKey(t, via, fmt.Sprintf(`{"name":"round %d","scopes":["links:write","links:read"],"workspaces":["keys"]}`, round))
		for _, n := range nodes {
			body := fmt.Sprintf(`{"url":"https://example.com/keys/%d/%s"}`, round, n.id)
			h := bearer(k.Key)
			h.Set("Content-Type", "application/json")
			if r := n.request(t, http.MethodPost, "/api/v1/urls", h, []byte(body)); r.status != http.StatusCreated {
				t.Fatalf("round %d: key made through %s, create through %s right after: %v", round, via.id, n.id, r)
			}
		}
		if r := revokeVia.request(t, http.MethodDelete, "/admin/keys/"+k.ID, nil, nil); r.status != http.StatusNoContent {
			t.Fatalf("round %d: revoke through %s: %v", round, revokeVia.id, r)
		}
		for _, n := range nodes {
			if r := n.request(t, http.MethodGet, "/api/v1/urls", bearer(k.Key), nil); r.status != http.StatusUnauthorized {
				t.Fatalf("round %d: key revoked through %s still works on %s: %v", round, revokeVia.id, n.id, r)
			}
		}
	}
	// Every create above is in the audit log under its key, on every node.
	r := nodes[0].get(t, "/admin/audit?limit=100")
	var audit struct {
		Entries []struct {
			KeyID     string `json:"key_id"`
			Action    string `json:"action"`
			Workspace string `json:"workspace"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(r.body, &audit); err != nil {
		t.Fatal(err)
	}
	creates := 0
	for _, e := range audit.Entries {
		if e.Action == "link.create" && e.Workspace == "keys" && e.KeyID != "" && e.KeyID != "admin-token" {
			creates++
		}
	}
	if creates != 18 {
		t.Fatalf("audit has %d keyed creates in workspace keys, want 18: %s", creates, r.body)
	}
}

// TestRevokedWhileFrozen: a key revoked while a follower is frozen (it
// cannot learn of the revocation) is refused by that follower once it is
// back, and meanwhile nothing it relays with that key is written.
func TestRevokedWhileFrozen(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, followers := waitOneLeader(t, leaderWaitTimeout, nodes...)
	frozen := followers[0]
	k := createKey(t, leader, `{"name":"soon revoked","scopes":["links:write","links:read"],"workspaces":["*"]}`)
	if r := frozen.request(t, http.MethodGet, "/api/v1/urls", bearer(k.Key), nil); r.status != http.StatusOK {
		t.Fatalf("key before the freeze on %s: %v", frozen.id, r)
	}
	frozen.signal(t, syscall.SIGSTOP)
	if r := leader.request(t, http.MethodDelete, "/admin/keys/"+k.ID, nil, nil); r.status != http.StatusNoContent {
		frozen.signal(t, syscall.SIGCONT)
		t.Fatalf("revoke with %s frozen: %v", frozen.id, r)
	}
	frozen.signal(t, syscall.SIGCONT)
	// The state machine refuses a write made with a revoked key whichever
	// node relays it, even one that has not applied the revocation yet.
	h := bearer(k.Key)
	h.Set("Content-Type", "application/json")
	r := frozen.request(t, http.MethodPost, "/api/v1/urls", h, []byte(`{"url":"https://example.com/after-revoke"}`))
	if r.status != http.StatusUnauthorized {
		t.Fatalf("create with the revoked key through %s after it woke: %v", frozen.id, r)
	}
	if !eventually(10*time.Second, func() bool {
		r, err := frozen.tryRequest(t, http.MethodGet, "/api/v1/urls", bearer(k.Key), nil)
		return err == nil && r.status == http.StatusUnauthorized
	}) {
		t.Fatalf("%s still accepts the revoked key 10 s after it woke", frozen.id)
	}
}

// TestKeyCreatedBeforeLeaderKill: a key whose creation is acknowledged
// just before the leader is killed works on every node afterwards, the
// restarted one included. The leader is killed at several points after the
// request is sent; an answer lost with the leader leaves no key to try
// (the client never learnt it), and the cluster goes on taking keys.
func TestKeyCreatedBeforeLeaderKill(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	acknowledged := 0
	for i, delay := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond} {
		leader, followers := waitOneLeader(t, leaderWaitTimeout, nodes...)
		type outcome struct {
			r   response
			err error
		}
		done := make(chan outcome, 1)
		go func() {
			r, err := leader.tryRequest(t, http.MethodPost, "/admin/keys", http.Header{"Content-Type": {"application/json"}},
				[]byte(fmt.Sprintf(`{"name":"racing %d","scopes":["links:read"],"workspaces":["*"]}`, i)))
			done <- outcome{r, err}
		}()
		time.Sleep(delay)
		leader.kill9()
		o := <-done
		waitOneLeader(t, leaderWaitTimeout, followers...)
		leader.restartUntil(leaderKnown)
		if o.err != nil || o.r.status != http.StatusCreated {
			t.Logf("kill after %v: the answer was lost (%v %v)", delay, o.err, o.r.status)
			continue
		}
		acknowledged++
		var k apiKey
		if err := json.Unmarshal(o.r.body, &k); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if r := n.request(t, http.MethodGet, "/api/v1/urls", bearer(k.Key), nil); r.status != http.StatusOK {
				t.Fatalf("kill after %v: acknowledged key refused by %s: %v", delay, n.id, r)
			}
		}
	}
	t.Logf("%d of 3 creates acknowledged before the kill; each works on every node", acknowledged)
	leader, _ := waitOneLeader(t, leaderWaitTimeout, nodes...)
	createKey(t, leader, `{"name":"after","scopes":["links:read"],"workspaces":["*"]}`)
}

// TestInitialAdminKey: a cluster bootstrapped without --admin-token writes
// an admin key to <data-dir>/admin.key, readable by its owner only, names
// the file (never the key) in its log, and creates no second one when it
// restarts. The CLI manages keys with it.
func TestInitialAdminKey(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{Settings: map[string]string{"admin-token": ""}})
	path := filepath.Join(n.dataDir, "admin.key")
	key := initialKey(t, n)
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: mode %v (%v), want 0600", path, st.Mode().Perm(), err)
	}
	// The key is written before it is proposed and logged once applied.
	eventually(5*time.Second, func() bool { return strings.Contains(n.out.String(), "admin.key") })
	if out := n.out.String(); strings.Contains(out, key) || !strings.Contains(out, "admin.key") {
		t.Fatalf("the log must name the file and never the key:\n%s", out)
	}
	if r := n.request(t, http.MethodGet, "/admin/cluster", noCredential(), nil); r.status != http.StatusUnauthorized {
		t.Fatalf("admin call without a key on a node without a token: %v", r)
	}
	if r := n.request(t, http.MethodGet, "/admin/cluster", http.Header{"X-Api-Key": {key}}, nil); r.status != http.StatusOK {
		t.Fatalf("admin call with the initial key: %v", r)
	}
	cli := func(args ...string) (string, error) {
		return runCommand(t, 30*time.Second, []string{"LINKRAFT_KEY=" + key, "LINKRAFT_ADDR=" + n.httpAddr}, args...)
	}
	out, err := cli("keys", "create", "--name", "cli", "--scopes", "links:read", "--workspaces", "a,b")
	if err != nil || !strings.Contains("\n"+out, "\nlr_") {
		t.Fatalf("linkraft keys create: %v\n%s", err, out)
	}
	n.restart()
	if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != key {
		t.Fatal("a restart replaced the initial key")
	}
	list, err := cli("keys", "list")
	if err != nil || strings.Count(list, "\n") != 3 || !strings.Contains(list, "initial admin key") {
		t.Fatalf("linkraft keys list after a restart: want the header, the initial key and the CLI's: %v\n%s", err, list)
	}
}

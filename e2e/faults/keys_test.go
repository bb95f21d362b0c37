package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestKeyRevokedWhileCutOff: a key is revoked while a follower is cut off
// from the other two (its packets dropped, so it cannot learn of it). While
// cut off, nothing it is asked to write with the key is applied; once the
// network heals it refuses the key, for reads too, within a few seconds.
func TestKeyRevokedWhileCutOff(t *testing.T) {
	if testing.Short() {
		t.Skip("fault-injection test: skipped in -short mode")
	}
	seed, c := startIsolated(t, 5)
	l, err := c.waitLeader(formTimeout)
	if err != nil {
		t.Fatal(err)
	}
	nodes := c.nodes()
	leader := indexOf(nodes, l)
	cut := (leader + 1) % 3
	a := c.cl.do(fasthttp.MethodPost, l.httpAddr, "/admin/keys",
		[]byte(`{"name":"revoked while cut off","scopes":["links:read","links:write"],"workspaces":["*"]}`), requestTimeout)
	var k struct{ ID, Key string }
	if a.err != nil || a.status != fasthttp.StatusCreated || json.Unmarshal(a.body, &k) != nil {
		t.Fatalf("create key: %v %d %s", a.err, a.status, a.body)
	}
	if r := c.cl.doAs(k.Key, fasthttp.MethodGet, nodes[cut].httpAddr, "/api/v1/urls", nil, requestTimeout); r.status != fasthttp.StatusOK {
		t.Fatalf("the key on %s before the cut: %v %d", nodes[cut].id, r.err, r.status)
	}

	others := []int{leader, (leader + 2) % 3}
	if err := c.env.partition(map[int][]int{cut: others, others[0]: {cut}, others[1]: {cut}}); err != nil {
		t.Fatal(err)
	}
	if r := c.cl.do(fasthttp.MethodDelete, l.httpAddr, "/admin/keys/"+k.ID, nil, requestTimeout); r.status != fasthttp.StatusNoContent {
		logErr(t, c.env.heal())
		t.Fatalf("revoke with %s cut off: %v %d %s", nodes[cut].id, r.err, r.status, r.body)
	}
	url := fmt.Sprintf("https://example.com/revoked/%d", seed)
	w := c.cl.doAs(k.Key, fasthttp.MethodPost, nodes[cut].httpAddr, "/api/v1/urls", []byte(`{"url":"`+url+`"}`), requestTimeout)
	t.Logf("a create with the revoked key on %s while it is cut off: %v %d", nodes[cut].id, w.err, w.status)
	if w.status == fasthttp.StatusCreated {
		logErr(t, c.env.heal())
		t.Fatalf("a create with a revoked key was acknowledged on %s", nodes[cut].id)
	}
	if err := c.env.heal(); err != nil {
		t.Fatal(err)
	}

	healed := time.Now()
	refused := false
	for time.Since(healed) < 15*time.Second {
		r := c.cl.doAs(k.Key, fasthttp.MethodGet, nodes[cut].httpAddr, "/api/v1/urls", nil, requestTimeout)
		if r.status == fasthttp.StatusUnauthorized {
			refused = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !refused {
		t.Fatalf("%s still accepts the revoked key 15 s after the heal", nodes[cut].id)
	}
	t.Logf("%s refuses the revoked key %v after the heal", nodes[cut].id, time.Since(healed).Round(time.Millisecond))
	// Whatever the cut-off node was asked to create with the key is not
	// stored.
	exports, err := c.exports()
	if err != nil {
		t.Fatal(err)
	}
	for id, body := range exports {
		if bytes.Contains(body, []byte(url)) {
			t.Fatalf("the export through %s holds a link created with a revoked key", id)
		}
	}
}

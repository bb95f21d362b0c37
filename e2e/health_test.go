package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// probeAnswer is a health answer as a load balancer's probe sees it:
// no credential, status code and document.
type probeAnswer struct {
	status int
	doc    map[string]any
}

// probe asks path on n as a load balancer or DNS check does: without a
// credential, within a second.
func probe(n *node, path string) (probeAnswer, error) {
	c := &http.Client{Transport: n.transport, Timeout: time.Second}
	resp, err := c.Get("http://" + n.httpAddr + path)
	if err != nil {
		return probeAnswer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return probeAnswer{}, err
	}
	a := probeAnswer{status: resp.StatusCode}
	if err := json.Unmarshal(body, &a.doc); err != nil {
		return a, fmt.Errorf("%s: %d %s: %w", path, resp.StatusCode, body, err)
	}
	return a, nil
}

func (a probeAnswer) String() string { return fmt.Sprintf("%d %v", a.status, a.doc) }

// TestHealthWithoutQuorum: with two of three nodes down the survivor
// cannot write, but it still redirects from its own state, so its /health
// stays 200 (DNS and load balancer checks keep it) and says writes are
// unavailable, no_leader; /health/writes is 503 with that reason. Once the
// majority is back, writes are ok again everywhere. Probes send no
// credential and are not told the cluster id.
func TestHealthWithoutQuorum(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, followers := waitOneLeader(t, formationBound, nodes...)
	l := leader.createURL(t, "https://example.com/health-without-quorum")
	survivor := followers[0]
	if !eventually(5*time.Second, func() bool {
		r, err := survivor.tryRequest(t, http.MethodHead, "/"+l.ShortCode, nil, nil)
		return err == nil && r.status == http.StatusFound
	}) {
		t.Fatalf("%s does not redirect %s within 5 s", survivor.id, l.ShortCode)
	}
	if a, err := probe(survivor, "/health"); err != nil || a.status != http.StatusOK || a.doc["writes"] != "ok" {
		t.Fatalf("/health on %s with a quorum: %v %v, want 200 with writes ok", survivor.id, a, err)
	}
	leader.kill9()
	followers[1].kill9()

	// The survivor notices it has no leader within an election timeout;
	// until then writes still look possible to it.
	var last probeAnswer
	if !eventually(10*time.Second, func() bool {
		a, err := probe(survivor, "/health")
		last = a
		return err == nil && a.doc["writes_reason"] == "no_leader"
	}) {
		t.Fatalf("/health on %s never said writes are unavailable for want of a leader; last %v", survivor.id, last)
	}
	if last.status != http.StatusOK || last.doc["status"] != "healthy" || last.doc["writes"] != "unavailable" {
		t.Errorf("/health on %s without a quorum: %v, want 200 healthy, writes unavailable", survivor.id, last)
	}
	if _, shown := last.doc["cluster_id"]; shown {
		t.Errorf("/health without a credential shows the cluster id: %v", last)
	}
	if a, err := probe(survivor, "/health/writes"); err != nil || a.status != http.StatusServiceUnavailable || a.doc["reason"] != "no_leader" {
		t.Errorf("/health/writes on %s without a quorum: %v %v, want 503 no_leader", survivor.id, a, err)
	}
	if h := survivor.health(t); h.Links != 1 { // with the admin token
		t.Errorf("/health links on %s = %d, want 1", survivor.id, h.Links)
	}
	if r := survivor.get(t, "/health"); !json.Valid(r.body) || !hasField(r.body, "cluster_id") {
		t.Errorf("/health with the admin token lacks the cluster id: %v", r)
	}
	survivor.requireRedirect(t, l.ShortCode, l.OriginalURL)

	leader.launch()
	followers[1].launch()
	for _, n := range nodes {
		if !eventually(leaderWaitTimeout, func() bool {
			a, err := probe(n, "/health/writes")
			last = a
			return err == nil && a.status == http.StatusOK
		}) {
			t.Fatalf("/health/writes on %s not 200 once the cluster is back: %v", n.id, last)
		}
	}
	survivor.createURL(t, "https://example.com/health-quorum-back")
}

// hasField reports whether the JSON object body has field.
func hasField(body []byte, field string) bool {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return false
	}
	_, ok := fields[field]
	return ok
}

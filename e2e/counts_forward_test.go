package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestCountsOnlyGoForwardAcrossNodes: a user behind round-robin DNS reads
// a link's count through one node, then through another. Once any node has
// shown a count, every later read on every node shows at least that count:
// a stats read, a link read and YOURLS' url-stats catch up with the leader
// first, as lists do. Each round clicks through another node and reads all
// three in turn, as fast as they answer, until every node shows the click.
func TestCountsOnlyGoForwardAcrossNodes(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, _ := waitOneLeader(t, formationBound, nodes...)
	l := leader.createURL(t, "https://example.com/counts-forward")
	for _, n := range nodes {
		n.requireRedirectHead(t, l.ShortCode, l.OriginalURL)
	}
	reads := []struct {
		name  string
		count func(n *node) (int64, error)
	}{
		{"stats", func(n *node) (int64, error) { return n.clicksOf(l.ShortCode) }},
		{"link", func(n *node) (int64, error) { return countField(n, "/api/v1/urls/"+l.ShortCode, "click_count") }},
		{"yourls url-stats", func(n *node) (int64, error) {
			return yourlsClicks(n, l.ShortCode)
		}},
	}
	const rounds = 12
	var shown int64 // the highest count any node has shown so far
	for round := range rounds {
		clicker := nodes[round%len(nodes)]
		if r := clicker.request(t, http.MethodGet, "/"+l.ShortCode, nil, nil); r.status != http.StatusFound {
			t.Fatalf("click %d through %s: %v", round, clicker.id, r)
		}
		want := int64(round + 1)
		deadline := time.Now().Add(clickWaitTimeout)
		for i := 0; ; i++ {
			n, read := nodes[i%len(nodes)], reads[(i/len(nodes))%len(reads)]
			got, err := read.count(n)
			if err != nil {
				t.Fatal(err)
			}
			if got < shown {
				t.Fatalf("round %d: %s on %s shows %d clicks after a node showed %d", round, read.name, n.id, got, shown)
			}
			shown = max(shown, got)
			if shown >= want && i%len(nodes) == len(nodes)-1 && allShow(t, nodes, reads[0].count, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the nodes did not all show %d clicks within %v", round, want, clickWaitTimeout)
			}
		}
	}
}

// allShow reports whether count shows at least want on every node.
func allShow(t *testing.T, nodes []*node, count func(*node) (int64, error), want int64) bool {
	t.Helper()
	for _, n := range nodes {
		got, err := count(n)
		if err != nil {
			t.Fatal(err)
		}
		if got < want {
			return false
		}
	}
	return true
}

// countField reads the integer field of the JSON object at path on n.
func countField(n *node, path, field string) (int64, error) {
	status, _, body, err := plainDo(n.client, http.MethodGet, "http://"+n.httpAddr+path, nil)
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("GET %s on %s: %d %s", path, n.id, status, body)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return 0, fmt.Errorf("GET %s on %s: %v in %s", path, n.id, err, body)
	}
	var v int64
	if err := json.Unmarshal(m[field], &v); err != nil {
		return 0, fmt.Errorf("GET %s on %s: no integer %s in %s", path, n.id, field, body)
	}
	return v, nil
}

// yourlsClicks reads code's clicks through YOURLS' url-stats on n, with
// the node's credential as the signature.
func yourlsClicks(n *node, code string) (int64, error) {
	path := "/yourls-api.php?action=url-stats&format=json&signature=" + e2eToken + "&shorturl=" + code
	status, _, body, err := plainDo(n.client, http.MethodGet, "http://"+n.httpAddr+path, nil)
	if err != nil {
		return 0, err
	}
	var s struct {
		Link struct {
			Clicks json.Number `json:"clicks"`
		} `json:"link"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &s) != nil {
		return 0, fmt.Errorf("YOURLS url-stats on %s: %d %s", n.id, status, body)
	}
	return s.Link.Clicks.Int64()
}

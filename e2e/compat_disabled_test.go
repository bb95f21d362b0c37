package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestShlinkDisabledAcrossNodes: a Shlink validUntil in the past makes a
// disabled link, and an edit enables it again, across a cluster of three
// linkraft processes, each request through the next node. Created through
// one node (Shlink CreateShortUrlTest::createsShortUrlWithValidUntil), the
// link is read through another
// (ResolveShortUrlTest::shortUrlIsProperlyResolvedEvenWhenNotEnabled) and
// answers 410 on every node (docs/COMPATIBILITY.md); enabled through the
// third by a later validUntil (EditShortUrlTest::metadataCanBeReset), it
// redirects on every node. An edit to a past validUntil through each node
// (a follower's forwarded to the leader) disables it everywhere again.
func TestShlinkDisabledAcrossNodes(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes, key := compatCluster(t)
	for _, n := range nodes {
		waitRaised(t, n, 13) // fsm.LevelDisabled: until then the adapter refuses a past validUntil
	}
	rr := &roundRobin{nodes: nodes}
	shlink := func(method, path, body string) map[string]any {
		t.Helper()
		r := rr.call(t, method, path, body, http.Header{"X-Api-Key": {key}})
		var m map[string]any
		if r.status != http.StatusOK || json.Unmarshal(r.body, &m) != nil {
			t.Fatalf("%s %s %s: %v, want 200 with the link", method, path, body, r)
		}
		return m
	}
	redirectsEverywhere := func(want int) {
		t.Helper()
		for _, n := range nodes {
			r := n.request(t, http.MethodGet, "/disabled-link", noCredential(), nil)
			if r.status != want || want == http.StatusFound && r.header.Get("Location") != "https://example.com/disabled" {
				t.Fatalf("GET /disabled-link on %s: %v, want %d", n.id, r, want)
			}
		}
	}
	shlinkTime := func(at time.Time) string { return at.UTC().Format("2006-01-02T15:04:05+00:00") }
	past, future := shlinkTime(time.Now().AddDate(0, 0, -1)), shlinkTime(time.Now().AddDate(0, 1, 0))
	validUntil := func(m map[string]any) any {
		meta, _ := m["meta"].(map[string]any)
		return meta["validUntil"]
	}

	made := shlink("POST", "/rest/v3/short-urls",
		`{"longUrl":"https://example.com/disabled","customSlug":"disabled-link","validUntil":"`+past+`"}`)
	if validUntil(made) != past {
		t.Fatalf("created through %s: %v, want validUntil %s", nodes[0].id, made, past)
	}
	if got := validUntil(shlink("GET", "/rest/v3/short-urls/disabled-link", "")); got != past {
		t.Fatalf("read through %s: validUntil %v, want %s", nodes[1].id, got, past)
	}
	redirectsEverywhere(http.StatusGone)
	if got := validUntil(shlink("PATCH", "/rest/v3/short-urls/disabled-link", `{"validUntil":"`+future+`"}`)); got != future {
		t.Fatalf("enabled through %s: validUntil %v, want %s", nodes[2].id, got, future)
	}
	redirectsEverywhere(http.StatusFound)

	// Disabled and enabled again, the disabling edit through each node in
	// turn: 0, 2, 1.
	for range nodes {
		shlink("PATCH", "/rest/v3/short-urls/disabled-link", `{"validUntil":"`+past+`"}`)
		redirectsEverywhere(http.StatusGone)
		shlink("PATCH", "/rest/v3/short-urls/disabled-link", `{"validUntil":null}`)
		redirectsEverywhere(http.StatusFound)
	}
}

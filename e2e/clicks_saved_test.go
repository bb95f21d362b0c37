package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestClicksSurviveAStopWithoutLeader: a node left alone (the two others
// killed) keeps redirecting and counting; SIGTERM stops it well within
// foreman's 5 s grace although no leader takes its clicks, and once the
// cluster is back its clicks are counted, exactly once, on every node.
func TestClicksSurviveAStopWithoutLeader(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, followers := waitOneLeader(t, formationBound, nodes...)
	l := leader.createURL(t, "https://example.com/saved-clicks")
	alone := followers[0]
	for _, n := range nodes {
		n.requireRedirectHead(t, l.ShortCode, l.OriginalURL)
	}
	leader.kill9()
	followers[1].kill9()

	const clicks = 7
	for i := range clicks {
		if r := alone.request(t, http.MethodGet, "/"+l.ShortCode, nil, nil); r.status != http.StatusFound {
			t.Fatalf("click %d on %s without a leader: %v", i, alone.id, r)
		}
	}
	began := time.Now()
	if err := alone.stop(); err != nil {
		t.Fatalf("SIGTERM %s: %v", alone.id, err)
	}
	took := time.Since(began)
	if took > 4*time.Second {
		t.Errorf("%s took %v to stop without a leader, past what foreman grants (5 s)", alone.id, took.Round(time.Millisecond))
	}
	t.Logf("%s stopped %v after SIGTERM with %d clicks and no leader", alone.id, took.Round(time.Millisecond), clicks)
	if !strings.Contains(alone.out.String(), "saved them for the next start") {
		t.Fatalf("%s did not say it saved its clicks:\n%s", alone.id, tail(alone.out.String(), 2000))
	}

	for _, n := range []*node{leader, followers[1], alone} {
		n.launch()
	}
	waitOneLeader(t, formationBound, nodes...)
	for _, n := range nodes {
		if got := n.waitClicks(t, l.ShortCode, clicks); got != clicks {
			t.Fatalf("clicks on %s after the restart: %d, want %d", n.id, got, clicks)
		}
	}
	// Exactly once: another flush interval later, still the same count.
	time.Sleep(2 * time.Second)
	for _, n := range nodes {
		if got := n.clicks(t, l.ShortCode); got != clicks {
			t.Fatalf("clicks on %s settled at %d, want %d", n.id, got, clicks)
		}
	}
}

// tail is the end of a log, for failure messages.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

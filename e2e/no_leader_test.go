package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestWithoutALeaderAnswersAreFast: two of three nodes are killed (kill
// -9), so the survivor has no majority and no leader. Once it has gone an
// election timeout without one, a create there answers 503 with
// Retry-After and a code it does not hold 404 marked as its own view
// (X-Linkraft-Stale), both within about a second rather than after the
// write timeout, and at once from then on; a code it holds still
// redirects. The web UI on it says that writes are paused, that redirects
// go on, and what the operator can do.
//
// The write timeout is 10 s, so the bound the answers are held to, half of
// it, is far above the second or so they take (about 1 s measured, the
// promise is 1.5 s) and far below what waiting for the timeout takes (10
// s before this was fixed). The durations are logged; only that bound is
// asserted.
func TestWithoutALeaderAnswersAreFast(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	const (
		writeTimeout = 10 * time.Second
		// electionTimeout is Raft's, as cluster/node.go sets it.
		electionTimeout = 500 * time.Millisecond
		fast            = writeTimeout / 2
	)
	tests := []struct {
		name           string
		leaderSurvives bool
		browser        bool
	}{
		{"a follower survives", false, true},
		{"the leader survives", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := startCluster(t, 3, map[string]string{"write-timeout": writeTimeout.String()})
			leader, followers := waitOneLeader(t, formationBound, nodes...)
			const target = "https://example.com/no-leader/held"
			held := followers[0].createURL(t, target)
			survivor, down := followers[1], []*node{leader, followers[0]}
			if tt.leaderSurvives {
				survivor, down = leader, followers
			}
			// A create acknowledged anywhere redirects on every node that
			// reaches the leader: the survivor holds it before the crash.
			survivor.requireRedirectHead(t, held.ShortCode, target)
			for _, n := range down {
				n.kill9()
			}
			lost := time.Now()
			if !eventually(leaderWaitTimeout, func() bool { return survivor.knowsNoLeader() }) {
				t.Fatalf("%s still names a leader %v after two of three nodes were killed", survivor.id, leaderWaitTimeout)
			}
			t.Logf("%s names no leader %v after the kill; asking it %v later", survivor.id, time.Since(lost).Round(time.Millisecond), electionTimeout)
			// The contract's condition: the node has gone an election
			// timeout without a leader. This waits for no event.
			time.Sleep(electionTimeout)

			// The create and the miss go together, both at the contract's
			// moment; a second round shows a node long without a leader.
			for round := 1; round <= 2; round++ {
				body := []byte(`{"original_url":"https://example.com/no-leader/refused/` + itoa(round) + `"}`)
				created := survivor.timedRequest(http.MethodPost, "/api/v1/urls", body)
				missed := survivor.timedRequest(http.MethodGet, "/nosuchcode", nil)
				create, miss := <-created, <-missed
				if create.err != nil || miss.err != nil {
					t.Fatalf("round %d: create: %v; GET of an unknown code: %v", round, create.err, miss.err)
				}
				t.Logf("round %d on %s without a leader: create %d after %v (Retry-After %q); GET of an unknown code %d after %v (X-Linkraft-Stale %q)",
					round, survivor.id, create.status, create.took.Round(100*time.Microsecond), create.header.Get("Retry-After"),
					miss.status, miss.took.Round(100*time.Microsecond), miss.header.Get("X-Linkraft-Stale"))
				p := requireProblem(t, create.response, http.StatusServiceUnavailable)
				if retry, err := strconv.Atoi(create.header.Get("Retry-After")); err != nil || retry < 1 {
					t.Errorf("round %d: create without a leader: Retry-After %q, want a number of seconds", round, create.header.Get("Retry-After"))
				}
				if miss.status != http.StatusNotFound || miss.header.Get("X-Linkraft-Stale") == "" {
					t.Errorf("round %d: GET of an unknown code without a leader: %d, X-Linkraft-Stale %q; want 404 marked stale", round, miss.status, miss.header.Get("X-Linkraft-Stale"))
				}
				if create.took >= fast || miss.took >= fast {
					t.Errorf("round %d: without a leader a create answered after %v (%s), a miss after %v; want both well before the %v write timeout (under %v)",
						round, create.took, p.Detail, miss.took, writeTimeout, fast)
				}
			}

			start := time.Now()
			hit := survivor.get(t, "/"+held.ShortCode)
			t.Logf("GET of a held code on %s without a leader: %d after %v", survivor.id, hit.status, time.Since(start).Round(100*time.Microsecond))
			if hit.status != http.StatusFound || hit.header.Get("Location") != target || hit.header.Get("X-Linkraft-Stale") != "" {
				t.Errorf("GET of a held code without a leader: %d to %q (X-Linkraft-Stale %q); want 302 to %q", hit.status, hit.header.Get("Location"), hit.header.Get("X-Linkraft-Stale"), target)
			}

			if tt.browser {
				uiSaysWritesArePaused(t, survivor)
			}
		})
	}
}

// timedAnswer is a response and how long it took to come.
type timedAnswer struct {
	response
	took time.Duration
	err  error
}

// timedRequest sends one request to n (with its credential) on a
// goroutine of its own and delivers the answer, timed.
func (n *node) timedRequest(method, path string, body []byte) <-chan timedAnswer {
	answer := make(chan timedAnswer, 1)
	go func() {
		start := time.Now()
		status, header, data, err := plainDo(n.client, method, "http://"+n.httpAddr+path, body)
		answer <- timedAnswer{response: response{status: status, header: header, body: data}, took: time.Since(start), err: err}
	}()
	return answer
}

// knowsNoLeader reports whether n's /health names no leader, whatever its
// status (a node may or may not take itself out of rotation for it).
func (n *node) knowsNoLeader() bool {
	probe := &http.Client{Transport: n.transport, Timeout: 2 * time.Second}
	resp, err := probe.Get("http://" + n.httpAddr + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var h health
	return json.Unmarshal(body, &h) == nil && h.NodeID == n.id && h.Leader == ""
}

// uiSaysWritesArePaused opens /ui/ on n, a node without a leader, in
// chromium: above the views the page says that writes are paused, that
// redirects go on and what the operator can do, and a shorten through the
// form says the same. With LINKRAFT_SCREENSHOTS set to a directory it
// saves ui-no-leader.png there.
func uiSaysWritesArePaused(t *testing.T, n *node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), browserTimeout)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // CI runs as root, where chromium's sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()

	if err := chromedp.Do(bctx,
		chromedp.Navigate("http://"+n.httpAddr+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("s-url")),
	); err != nil {
		t.Fatalf("open the UI: %v", err)
	}
	says := func(id string) string {
		return `(() => { const t = document.getElementById(` + jsString(id) + `).textContent;
			return ["Writes are paused", "Redirects keep working", "linkraft status", "majority", "docs/DEPLOY.md"].every(w => t.includes(w)); })()`
	}
	waitPage(t, bctx, "the page says writes are paused, redirects go on, and what to do", 10*time.Second,
		`!document.getElementById("paused").hidden && `+says("paused"), `document.getElementById("paused").textContent`)

	useKey(t, bctx, e2eToken)
	if err := chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("s-url"), "https://example.com/no-leader/ui"),
		chromedp.Click(chromedp.ID("s-go")),
	); err != nil {
		t.Fatalf("shorten through the form: %v", err)
	}
	waitPage(t, bctx, "a shorten without a leader says writes are paused and what to do", 10*time.Second,
		says("s-out"), `document.getElementById("s-out").textContent`)
	if shots := os.Getenv("LINKRAFT_SCREENSHOTS"); shots != "" {
		screenshot(t, bctx, filepath.Join(shots, "ui-no-leader.png"))
	}
}

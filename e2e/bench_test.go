package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchRoutes are the routes linkraft bench sends, by their label in
// linkraft_http_requests_total ("delete": removing its seeds afterwards).
var benchRoutes = []string{"redirect", "create", "stats", "delete"}

// benchReport is the part of `linkraft bench --json` this test reads.
type benchReport struct {
	RunID           string           `json:"run_id"`
	Scenario        string           `json:"scenario"`
	Server          string           `json:"server"`
	Requests        int64            `json:"requests"`
	Throughput      float64          `json:"throughput_rps"`
	Success         int64            `json:"success"`
	Errors          int64            `json:"errors"`
	ErrorsByStatus  map[string]int64 `json:"errors_by_status"`
	TransportErrors map[string]int64 `json:"transport_errors"`
	Ops             []struct {
		Op       string `json:"op"`
		Requests int64  `json:"requests"`
	} `json:"ops"`
	Sent []struct {
		Target  string           `json:"target"`
		Seed    map[string]int64 `json:"seed"`
		Warmup  map[string]int64 `json:"warmup"`
		Run     map[string]int64 `json:"run"`
		Cleanup map[string]int64 `json:"cleanup"`
	} `json:"sent"`
	Seeds *struct {
		Workspace string `json:"workspace"`
		Created   int    `json:"created"`
		Kept      bool   `json:"kept"`
		Removed   int    `json:"removed"`
		Failed    int    `json:"failed"`
	} `json:"seeds"`
	Ceiling        *benchReport `json:"ceiling"`
	CeilingPercent float64      `json:"ceiling_percent"`
}

// sentTo is every request of route the tool sent to target, in every phase.
func (r *benchReport) sentTo(target, route string) int64 {
	var n int64
	for _, s := range r.Sent {
		if s.Target == target {
			n += s.Seed[route] + s.Warmup[route] + s.Run[route] + s.Cleanup[route]
		}
	}
	return n
}

// sentAll is every request of route the tool sent, to any target.
func (r *benchReport) sentAll(route string) int64 {
	var n int64
	for _, s := range r.Sent {
		n += s.Seed[route] + s.Warmup[route] + s.Run[route] + s.Cleanup[route]
	}
	return n
}

// TestBenchMatchesServerCounters runs every `linkraft bench` scenario for a
// second against a three-node cluster and checks the report against the
// nodes' own counters: for each node and route, the change of
// linkraft_http_requests_total must equal what the report says it sent
// there — seeding, warm-up, measured requests and the deletes that remove
// the seeds afterwards, each listed separately in the JSON.
//
// Every node counts exactly the requests sent to it. A create sent to a
// follower is counted by the follower's instrumented route only: the
// follower relays it to the leader inside the node-to-node protocol, not
// as a public request, so the leader's create route does not count it
// again. Redirects and stats are answered locally. So for every node and
// those routes, Δ = sent, whoever leads. A delete is different: a follower
// counts it and forwards it to the leader as a public request, which the
// leader counts under "delete" again; so the leader's Δ is every delete
// sent, the followers' what was sent to them.
//
// After each run no seeded link is left in the bench's workspace, unless
// --keep-seeds kept them; the measured creates stay.
func TestBenchMatchesServerCounters(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil) // the harness starts nodes with --create-rate 0
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.httpAddr
	}
	common := []string{"--targets", strings.Join(addrs, ","), "--duration", "1s", "--warmup", "200ms",
		"--seed-links", "30", "--timeout", "10s", "--json", "--key", e2eToken}
	runs := []struct {
		name, scenario string
		extra          []string
		// workspace and keep: where the seeds go and whether they stay.
		workspace string
		keep      bool
	}{
		{"redirect", "redirect", []string{"-c", "4", "--ceiling"}, "bench", false},
		{"create", "create", []string{"-c", "8", "--rate", "300"}, "bench", false},
		{"mixed", "mixed", []string{"-c", "8", "--rate", "500"}, "bench", false},
		{"stats", "stats", []string{"-c", "8", "--rate", "500"}, "bench", false},
		{"ceiling", "ceiling", []string{"-c", "4"}, "", false},
		{"keep-seeds", "redirect", []string{"-c", "4", "--keep-seeds", "--workspace", "bench-kept"}, "bench-kept", true},
	}
	for _, run := range runs {
		t.Run(run.name, func(t *testing.T) {
			args := append(append([]string{"bench", "--scenario", run.scenario}, common...), run.extra...)
			leader, _ := waitOneLeader(t, 10*time.Second, nodes...)
			before := scrapeRequestCounts(t, nodes)
			rep := runBench(t, args)
			after := scrapeRequestCounts(t, nodes)
			checkBenchReport(t, run.scenario, slices.Contains(run.extra, "--ceiling"), rep)
			checkBenchCounters(t, nodes, leader, rep, before, after)
			if run.workspace != "" {
				checkBenchSeeds(t, leader, rep, run.workspace, run.keep)
			}
			t.Logf("%d measured requests (%.0f req/s); counters checked on every node", rep.Requests, rep.Throughput)
		})
	}
	// A key that may not write in the bench's workspace stops it before
	// the run, saying what the key needs.
	t.Run("forbidden-workspace", func(t *testing.T) {
		k := createKey(t, nodes[0], `{"name":"bench-elsewhere","scopes":["links:write"],"workspaces":["elsewhere"]}`)
		args := append(append([]string{"bench", "--scenario", "redirect"}, common...), "--key", k.Key)
		var stdout, stderr bytes.Buffer
		err := runBinary(t, 90*time.Second, nil, &stdout, &stderr, args...)
		if err == nil || stdout.Len() != 0 || !strings.Contains(stderr.String(), `the key needs links:write on workspace "bench"`) {
			t.Errorf("want a failure that names the workspace and no report; err %v, stdout %q, stderr:\n%s", err, stdout.String(), stderr.String())
		}
	})
}

// checkBenchSeeds checks what the report says of the seeds against what the
// workspace holds: the run's seeds (their URLs carry its run id) all gone,
// or with keep all there.
func checkBenchSeeds(t *testing.T, leader *node, rep *benchReport, workspace string, keep bool) {
	t.Helper()
	s := rep.Seeds
	wantCreated := 30
	if rep.Scenario == "create" {
		wantCreated = 1 // the probe of the key
	}
	if s == nil || s.Workspace != workspace || s.Created != wantCreated || s.Kept != keep || s.Failed != 0 {
		t.Fatalf("report seeds = %+v, want %d created in %s, kept %v, none failed", s, wantCreated, workspace, keep)
	}
	wantLeft := 0
	if keep {
		wantLeft = wantCreated
	} else if s.Removed != wantCreated {
		t.Errorf("report: %d seeds removed, want %d", s.Removed, wantCreated)
	}
	seedPrefix := "https://example.com/bench/" + rep.RunID + "/"
	createPrefix := "https://bench.example.com/" + rep.RunID + "/"
	var left, creates int64
	for _, l := range listWorkspace(t, leader, workspace) {
		switch {
		case strings.HasPrefix(l.OriginalURL, seedPrefix):
			left++
		case strings.HasPrefix(l.OriginalURL, createPrefix):
			creates++
		}
	}
	if left != int64(wantLeft) {
		t.Errorf("GET /api/v1/urls?workspace=%s lists %d of run %s's seeds, want %d", workspace, left, rep.RunID, wantLeft)
	}
	// The measured creates (and the warm-up's) are the load: they stay.
	var measured int64
	for _, o := range rep.Ops {
		if o.Op == "create" {
			measured = o.Requests
		}
	}
	if creates < measured {
		t.Errorf("workspace %s holds %d of run %s's measured creates, want at least %d", workspace, creates, rep.RunID, measured)
	}
}

// listWorkspace lists every link of a workspace, page by page (bounded).
func listWorkspace(t *testing.T, n *node, workspace string) []link {
	t.Helper()
	var all []link
	path := "/api/v1/urls?limit=1000&workspace=" + workspace
	for range 100 {
		r := n.get(t, path)
		var page struct {
			Links      []link  `json:"links"`
			NextCursor *string `json:"next_cursor"`
		}
		if r.status != http.StatusOK || json.Unmarshal(r.body, &page) != nil {
			t.Fatalf("GET %s: %v", path, r)
		}
		all = append(all, page.Links...)
		if page.NextCursor == nil {
			return all
		}
		path = "/api/v1/urls?limit=1000&workspace=" + workspace + "&cursor=" + *page.NextCursor
	}
	t.Fatalf("listing workspace %s: more than 100 pages", workspace)
	return nil
}

// checkBenchReport checks what the report says about itself.
func checkBenchReport(t *testing.T, scenario string, ceiling bool, rep *benchReport) {
	t.Helper()
	if rep.Scenario != scenario || rep.Requests == 0 {
		t.Fatalf("report for scenario %q: %+v", scenario, rep)
	}
	if rep.Errors != 0 || len(rep.TransportErrors) != 0 || rep.Success != rep.Requests {
		t.Fatalf("want no errors against a healthy cluster; errors %d by status %v, transport %v",
			rep.Errors, rep.ErrorsByStatus, rep.TransportErrors)
	}
	var byOps int64
	for _, o := range rep.Ops {
		byOps += o.Requests
	}
	if byOps != rep.Requests {
		t.Errorf("routes sum to %d requests, report says %d", byOps, rep.Requests)
	}
	wantServer := "linkraft"
	if scenario == "ceiling" {
		wantServer = "ceiling"
	}
	if rep.Server != wantServer {
		t.Errorf("server = %q, want %q", rep.Server, wantServer)
	}
	if ceiling && (rep.Ceiling == nil || rep.Ceiling.Requests == 0 || rep.CeilingPercent <= 0) {
		t.Errorf("--ceiling: want a ceiling run and a percentage, got %+v, %v", rep.Ceiling, rep.CeilingPercent)
	}
}

// checkBenchCounters compares every node's counter changes with the report
// (see TestBenchMatchesServerCounters).
func checkBenchCounters(t *testing.T, nodes []*node, leader *node, rep *benchReport, before, after map[string]map[string]int64) {
	t.Helper()
	for _, n := range nodes {
		for _, route := range benchRoutes {
			want := rep.sentTo(n.httpAddr, route)
			if route == "delete" && n == leader {
				want = rep.sentAll(route) // the followers forwarded theirs here
			}
			if got := after[n.id][route] - before[n.id][route]; got != want {
				t.Errorf("%s: linkraft_http_requests_total{route=%q} rose by %d, want %d from the report",
					n.id, route, got, want)
			}
		}
	}
}

// runBench runs the linkraft binary with args and decodes its JSON report
// from stdout; the progress lines on stderr are only logged on failure.
func runBench(t *testing.T, args []string) *benchReport {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := runBinary(t, 90*time.Second, nil, &stdout, &stderr, args...); err != nil {
		t.Fatalf("linkraft %v: %v\nstderr:\n%s", args, err, stderr.String())
	}
	var rep benchReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("linkraft %v: stdout is not a JSON report: %v\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	return &rep
}

// scrapeRequestCounts reads linkraft_http_requests_total from every node,
// summed over status codes: node id → route → count.
func scrapeRequestCounts(t *testing.T, nodes []*node) map[string]map[string]int64 {
	t.Helper()
	out := map[string]map[string]int64{}
	for _, n := range nodes {
		r := n.get(t, "/metrics")
		if r.status != http.StatusOK {
			t.Fatalf("GET /metrics on %s: %v", n.id, r)
		}
		counts, err := parseRequestCounts(r.body)
		if err != nil {
			t.Fatalf("GET /metrics on %s: %v", n.id, err)
		}
		out[n.id] = counts
	}
	return out
}

// parseRequestCounts sums linkraft_http_requests_total by route from the
// Prometheus text format.
func parseRequestCounts(body []byte) (map[string]int64, error) {
	counts := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "linkraft_http_requests_total{") {
			continue
		}
		_, labels, _ := strings.Cut(line, "{")
		labels, value, ok := strings.Cut(labels, "} ")
		_, route, found := strings.Cut(labels, `route="`)
		route, _, closed := strings.Cut(route, `"`)
		f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if !ok || !found || !closed || err != nil {
			return nil, fmt.Errorf("unexpected metric line %q", line)
		}
		counts[route] += int64(f)
	}
	return counts, sc.Err()
}

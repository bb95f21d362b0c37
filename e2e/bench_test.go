package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchRoutes are the routes linkraft bench sends, by their label in
// linkraft_http_requests_total.
var benchRoutes = []string{"redirect", "create", "stats"}

// benchReport is the part of `linkraft bench --json` this test reads.
type benchReport struct {
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
		Target string           `json:"target"`
		Seed   map[string]int64 `json:"seed"`
		Warmup map[string]int64 `json:"warmup"`
		Run    map[string]int64 `json:"run"`
	} `json:"sent"`
	Ceiling        *benchReport `json:"ceiling"`
	CeilingPercent float64      `json:"ceiling_percent"`
}

// sentTo is every request of route the tool sent to target, in every phase.
func (r *benchReport) sentTo(target, route string) int64 {
	var n int64
	for _, s := range r.Sent {
		if s.Target == target {
			n += s.Seed[route] + s.Warmup[route] + s.Run[route]
		}
	}
	return n
}

// TestBenchMatchesServerCounters runs every `linkraft bench` scenario for a
// second against a three-node cluster and checks the report against the
// nodes' own counters: for each node and route, the change of
// linkraft_http_requests_total must equal what the report says it sent
// there — seeding, warm-up and measured requests, each listed separately
// in the JSON.
//
// Every node counts exactly the requests sent to it. A create sent to a
// follower is counted by the follower's instrumented route only: the
// follower relays it to the leader inside the node-to-node protocol, not
// as a public request, so the leader's create route does not count it
// again. Redirects and stats are answered locally. So for every node and
// route, Δ = sent, whoever leads.
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
		scenario string
		extra    []string
	}{
		{"redirect", []string{"-c", "4", "--ceiling"}},
		{"create", []string{"-c", "8", "--rate", "300"}},
		{"mixed", []string{"-c", "8", "--rate", "500"}},
		{"stats", []string{"-c", "8", "--rate", "500"}},
		{"ceiling", []string{"-c", "4"}},
	}
	for _, run := range runs {
		t.Run(run.scenario, func(t *testing.T) {
			args := append(append([]string{"bench", "--scenario", run.scenario}, common...), run.extra...)
			before := scrapeRequestCounts(t, nodes)
			rep := runBench(t, args)
			after := scrapeRequestCounts(t, nodes)
			checkBenchReport(t, run.scenario, rep)
			checkBenchCounters(t, nodes, rep, before, after)
			t.Logf("%d measured requests (%.0f req/s); counters checked on every node", rep.Requests, rep.Throughput)
		})
	}
}

// checkBenchReport checks what the report says about itself.
func checkBenchReport(t *testing.T, scenario string, rep *benchReport) {
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
	if scenario == "redirect" && (rep.Ceiling == nil || rep.Ceiling.Requests == 0 || rep.CeilingPercent <= 0) {
		t.Errorf("--ceiling: want a ceiling run and a percentage, got %+v, %v", rep.Ceiling, rep.CeilingPercent)
	}
}

// checkBenchCounters compares every node's counter changes with the report
// (see TestBenchMatchesServerCounters).
func checkBenchCounters(t *testing.T, nodes []*node, rep *benchReport, before, after map[string]map[string]int64) {
	t.Helper()
	for _, n := range nodes {
		for _, route := range benchRoutes {
			want := rep.sentTo(n.httpAddr, route)
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

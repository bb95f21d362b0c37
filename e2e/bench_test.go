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
// Forwarding is accounted for exactly. A create sent to a follower is
// counted by the follower's instrumented route and then forwarded to the
// leader, whose instrumented create route counts it a second time (the
// forwarder sits inside the instrumentation, and a forwarded request is
// served where it lands). Followers never receive forwarded creates. So
// with a leader that stays the same through the run:
//
//	follower f: Δcreate(f) = sent(f, create)
//	leader L:   Δcreate(L) = sent(L, create) + Σ_f sent(f, create)
//
// The second equation also needs every follower create to have reached
// the leader exactly once, which holds when every create was answered by
// the leader (no errors, no transport errors: checked first). Redirects
// and stats are always answered locally, so Δ = sent for every node. A run
// during which the leader changed cannot be attributed; it is repeated
// (at most twice) rather than judged.
func TestBenchMatchesServerCounters(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil) // the harness starts nodes with --create-rate 0
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.httpAddr
	}
	common := []string{"--targets", strings.Join(addrs, ","), "--duration", "1s", "--warmup", "200ms",
		"--seed-links", "30", "--timeout", "10s", "--json"}
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
			for attempt := 1; ; attempt++ {
				leader, before := benchLeader(t, nodes), scrapeRequestCounts(t, nodes)
				rep := runBench(t, args)
				after, leaderAfter := scrapeRequestCounts(t, nodes), benchLeader(t, nodes)
				if leader != leaderAfter {
					if attempt == 3 {
						t.Fatalf("leadership changed during each of %d runs (last: %v to %v); forwarded creates cannot be attributed", attempt, leader, leaderAfter)
					}
					t.Logf("leadership changed from %v to %v during the run; running it again", leader, leaderAfter)
					continue
				}
				checkBenchReport(t, run.scenario, rep)
				checkBenchCounters(t, nodes, leader.node, rep, before, after)
				t.Logf("%d measured requests (%.0f req/s); counters checked on every node, leader %v", rep.Requests, rep.Throughput, leader)
				return
			}
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
// (see TestBenchMatchesServerCounters for the create equation).
func checkBenchCounters(t *testing.T, nodes []*node, leader *node, rep *benchReport, before, after map[string]map[string]int64) {
	t.Helper()
	var forwarded int64
	for _, n := range nodes {
		if n != leader {
			forwarded += rep.sentTo(n.httpAddr, "create")
		}
	}
	for _, n := range nodes {
		for _, route := range benchRoutes {
			want := rep.sentTo(n.httpAddr, route)
			if route == "create" && n == leader {
				want += forwarded
			}
			if got := after[n.id][route] - before[n.id][route]; got != want {
				t.Errorf("%s (%s): linkraft_http_requests_total{route=%q} rose by %d, want %d from the report",
					n.id, benchRole(n == leader), route, got, want)
			}
		}
	}
}

func benchRole(leader bool) string {
	if leader {
		return "leader"
	}
	return "follower"
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

// benchLeadership is who leads in which term; the same value before and after
// a run means the leader did not change in between.
type benchLeadership struct {
	node *node
	term uint64
}

func (l benchLeadership) String() string { return fmt.Sprintf("%s in term %d", l.node.id, l.term) }

// benchLeader returns the leadership the first node reports; every node
// must name the same leader.
func benchLeader(t *testing.T, nodes []*node) benchLeadership {
	t.Helper()
	view := nodes[0].clusterView(t)
	var l benchLeadership
	for _, n := range nodes {
		if n.id == view.Leader {
			l = benchLeadership{node: n, term: view.Term}
		}
		if h := n.health(t); h.Leader != view.Leader {
			t.Fatalf("%s names %q as leader, %s names %q", n.id, h.Leader, nodes[0].id, view.Leader)
		}
	}
	if l.node == nil {
		t.Fatalf("leader %q is none of the cluster's nodes", view.Leader)
	}
	return l
}

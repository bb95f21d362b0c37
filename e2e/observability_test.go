package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// What an operator watches: /metrics (Raft's own metrics next to
// linkraft's), the replication fields of /admin/cluster, JSON logs and the
// access log.

// scrape reads n's /metrics into a map from "name{labels}" (as the text
// format writes them) to value.
func scrape(t *testing.T, n *node) map[string]float64 {
	t.Helper()
	r := n.get(t, "/metrics")
	if r.status != http.StatusOK {
		t.Fatalf("GET /metrics on %s: want 200, got %v", n.id, r)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(r.body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics on %s: bad sample line %q", n.id, line)
		}
		out[line[:i]] = v
	}
	return out
}

// waitMetric polls n's /metrics until the series key has a value ok
// accepts, and fails the test with the last value otherwise.
func waitMetric(t *testing.T, n *node, timeout time.Duration, key string, ok func(float64) bool) float64 {
	t.Helper()
	var v float64
	var found bool
	if !eventually(timeout, func() bool {
		v, found = scrape(t, n)[key]
		return found && ok(v)
	}) {
		t.Fatalf("/metrics on %s: %s = %v (present: %v) within %v", n.id, key, v, found, timeout)
	}
	return v
}

func positive(v float64) bool { return v > 0 }

// requireJSONLines checks that every line n wrote is a JSON object and
// returns them.
func requireJSONLines(t *testing.T, n *node) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, line := range strings.Split(n.out.String(), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("node %s started with --log-format json wrote a line that is not a JSON object: %q", n.id, line)
		}
		lines = append(lines, m)
	}
	return lines
}

// accessLines counts n's access log lines for path.
func accessLines(t *testing.T, n *node, path string) int {
	t.Helper()
	count := 0
	for _, m := range requireJSONLines(t, n) {
		if m["msg"] == "request" && m["path"] == path {
			count++
		}
	}
	return count
}

func TestObservabilityCluster(t *testing.T) {
	skipIfShort(t)
	nodes := startCluster(t, 3, map[string]string{
		"log-format": "json",
		// Small enough that the creates below make every node snapshot.
		"snapshot-threshold": "16",
	})
	leader, followers := waitOneLeader(t, 20*time.Second, nodes...)

	// Creates through the leader and through a follower (relayed in
	// batches), one at a time: each is its own entry.
	var links []link
	for i := range 40 {
		via := leader
		if i%2 == 1 {
			via = followers[0]
		}
		links = append(links, via.createURL(t, fmt.Sprintf("https://example.com/observability/%d", i)))
	}

	// Raised to the entry level of 64-bit record positions, a cluster
	// gives link ids up to 2^63 - 1 (docs/MONITORING.md).
	waitRaised(t, leader, 16) // fsm.LevelPositions
	m := scrape(t, leader)
	if used, limit := m["linkraft_link_ids_used"], m["linkraft_link_ids_limit"]; used < 40 || limit != 1<<63-1 {
		t.Errorf("leader /metrics: link ids used %v of %v, want at least 40 of 2^63 - 1", used, limit)
	}
	for _, key := range []string{
		"raft_commit_time_seconds_count",       // commit time
		"raft_fsm_apply_batch_seconds_count",   // FSM apply latency (the FSM applies in batches)
		"raft_boltdb_store_logs_seconds_count", // fsync of log appends
		"raft_state_leader_total",              // leader changes
		"linkraft_create_batch_size_count",
		"linkraft_engine_disk_bytes", // the state engine in <data-dir>/engine
	} {
		if m[key] <= 0 {
			t.Errorf("leader /metrics: %s = %v, want > 0", key, m[key])
		}
	}
	for _, f := range followers {
		key := `raft_replication_append_entries_rpc_seconds_count{peer_id="` + f.id + `"}`
		if m[key] <= 0 {
			t.Errorf("leader /metrics: %s = %v, want > 0 (per-peer append RPC time)", key, m[key])
		}
		// The leader asks every follower its applied index every 2 s.
		waitMetric(t, leader, 10*time.Second, `linkraft_replication_lag_entries{follower="`+f.id+`"}`, func(float64) bool { return true })
	}
	if _, ok := m[`linkraft_replication_lag_entries{follower="`+leader.id+`"}`]; ok {
		t.Errorf("leader /metrics has a replication lag series for the leader itself")
	}
	waitMetric(t, leader, 10*time.Second, `linkraft_gossip_members{state="alive"}`, func(v float64) bool { return v == 3 })
	waitMetric(t, followers[0], 5*time.Second, "linkraft_relay_batch_size_count", positive)
	// Raft checks the snapshot threshold every 10-20 s.
	waitMetric(t, leader, 40*time.Second, "raft_snapshot_take_snapshot_seconds_count", positive)
	// Every name follows Prometheus' conventions, on the leader (which
	// reports the most series) and on a follower, now that both have
	// replicated and snapshotted.
	requirePromlint(t, leader)
	requirePromlint(t, followers[0])
	t.Run("promtool", func(t *testing.T) {
		requirePromtool(t, leader)
		requirePromtool(t, followers[0])
	})
	for _, f := range followers {
		for key := range scrape(t, f) {
			if strings.HasPrefix(key, "linkraft_replication_lag_entries") {
				t.Errorf("follower %s has lag series %s; only the leader reports lag", f.id, key)
			}
		}
	}

	// /admin/cluster: every server that answers carries its applied index
	// and its lag behind the leader, 0 for the leader.
	r := leader.get(t, "/admin/cluster")
	if r.status != http.StatusOK {
		t.Fatalf("GET /admin/cluster: want 200, got %v", r)
	}
	var view struct {
		Servers []map[string]any `json:"servers"`
	}
	if err := json.Unmarshal(r.body, &view); err != nil {
		t.Fatalf("GET /admin/cluster: %v: %s", err, r.body)
	}
	if len(view.Servers) != 3 {
		t.Fatalf("GET /admin/cluster: want 3 servers, got %s", r.body)
	}
	for _, s := range view.Servers {
		applied, ok1 := s["applied_index"].(float64)
		lag, ok2 := s["replication_lag"].(float64)
		if !ok1 || !ok2 || applied <= 0 {
			t.Errorf("GET /admin/cluster: server %v lacks a positive applied_index or a replication_lag", s)
		}
		if s["leader"] == true && lag != 0 {
			t.Errorf("GET /admin/cluster: the leader's replication_lag is %v, want 0", lag)
		}
	}

	// Redirects without --access-log write no per-request lines.
	const redirects = 20
	for range redirects {
		followers[1].requireRedirect(t, links[0].ShortCode, links[0].OriginalURL)
	}
	for _, n := range nodes {
		if got := accessLines(t, n, "/"+links[0].ShortCode); got != 0 {
			t.Errorf("node %s without --access-log logged %d request lines", n.id, got)
		}
	}
	// Raft's lines are JSON too: every election logs a warning on the
	// node that started it.
	raftLines := 0
	for _, n := range nodes {
		for _, m := range requireJSONLines(t, n) {
			if m["component"] == "raft" {
				raftLines++
			}
		}
	}
	if raftLines == 0 {
		t.Errorf("no node wrote a Raft log line (component raft); want at least the election's")
	}
}

// requirePromlint runs promtool's linter ("promtool check metrics" is this
// code) over n's /metrics and fails on any finding: camelCase, a counter
// without _total, a unit that is not a base unit suffix, ...
func requirePromlint(t *testing.T, n *node) {
	t.Helper()
	r := n.get(t, "/metrics")
	if r.status != http.StatusOK {
		t.Fatalf("GET /metrics on %s: want 200, got %v", n.id, r)
	}
	problems, err := promlint.New(bytes.NewReader(r.body)).Lint()
	if err != nil {
		t.Fatalf("promlint on %s's /metrics: %v", n.id, err)
	}
	for _, p := range problems {
		t.Errorf("/metrics on %s: %s: %s", n.id, p.Metric, p.Text)
	}
}

// requirePromtool pipes n's /metrics through "promtool check metrics", the
// check operators run, and fails on anything it reports. promlint above is
// the same linter as a library; this runs the released tool (Debian's, which
// `make deps` installs), so a difference between the two versions shows.
func requirePromtool(t *testing.T, n *node) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		realPartMissing(t, "no promtool on PATH", "it comes with Debian's prometheus package; `make deps` installs only promtool")
	}
	r := n.get(t, "/metrics")
	if r.status != http.StatusOK {
		t.Fatalf("GET /metrics on %s: want 200, got %v", n.id, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(r.body)
	// It reports findings on standard error and exits non-zero; a clean
	// run prints nothing.
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics on %s's /metrics: %v\n%s", n.id, err, out)
	}
}

func TestObservabilityAccessLog(t *testing.T) {
	skipIfShort(t)
	n := startNode(t, nodeOptions{Settings: map[string]string{"access-log": "true", "log-format": "json"}})
	l := n.createURL(t, "https://example.com/access-log")
	const redirects = 10
	for range redirects {
		n.requireRedirect(t, l.ShortCode, l.OriginalURL)
	}
	path := "/" + l.ShortCode
	if !eventually(5*time.Second, func() bool { return accessLines(t, n, path) == redirects }) {
		t.Fatalf("with --access-log: %d request lines for %s, want %d", accessLines(t, n, path), path, redirects)
	}
	for _, m := range requireJSONLines(t, n) {
		if m["msg"] != "request" || m["path"] != path {
			continue
		}
		if m["level"] != "INFO" || m["method"] != "GET" || m["status"] != float64(302) || m["node"] != n.id ||
			m["remote"] == nil || m["duration"] == nil {
			t.Fatalf("access log line lacks what it should say: %v", m)
		}
	}

	// A bad --log-format stops the node at once with a clear message.
	out, err := runCommand(t, 10*time.Second, nil, "serve", "--log-format", "yaml", "--data-dir", t.TempDir())
	if err == nil || !strings.Contains(out, "--log-format must be text or json") {
		t.Fatalf("serve --log-format yaml: want an error naming --log-format, got %v: %s", err, out)
	}
}

package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/e2e/faults"
)

// resumedLine is what a node logs when it starts from the state its last
// clean stop kept instead of rebuilding it from Raft's snapshot and log.
const resumedLine = "resumed the state kept at the last stop"

// resumedSnapshotLine is what it logs when it starts from the checkpoint
// its latest snapshot refers to (after a crash, nothing kept).
const resumedSnapshotLine = "resumed the state of the latest snapshot"

// resumeHistory is the writes of a test of clean stops, and what every
// node must show of them.
type resumeHistory struct {
	live    []link
	deleted []string
	clicks  map[string]int64
}

// write makes a round of writes through the nodes given: creates of each
// kind, a delete and clicks, each counted once.
func (h *resumeHistory) write(t *testing.T, round int, through ...*node) {
	t.Helper()
	for i := range 8 {
		n := through[i%len(through)]
		fields := map[string]any{"original_url": "https://example.com/resume/" + itoa(round) + "/" + itoa(i)}
		switch i % 4 {
		case 1:
			fields["custom_code"] = "resume-" + itoa(round) + "-" + itoa(i)
		case 2:
			fields["strategy"] = "hash"
		case 3:
			fields["workspace"] = "resume-ws"
		}
		h.live = append(h.live, n.createLink(t, fields))
	}
	gone := h.live[len(h.live)-5]
	if r := through[0].request(t, http.MethodDelete, "/api/v1/urls/"+gone.ShortCode, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE %s: want 204, got %v", gone.ShortCode, r)
	}
	h.live = append(h.live[:len(h.live)-5], h.live[len(h.live)-4:]...)
	h.deleted = append(h.deleted, gone.ShortCode)
	for i, l := range h.live[len(h.live)-3:] {
		for c := range i + 1 {
			if r := through[c%len(through)].get(t, "/"+l.ShortCode); r.status != http.StatusFound {
				t.Fatalf("GET /%s: want 302, got %v", l.ShortCode, r)
			}
			h.clicks[l.ShortCode]++
		}
	}
}

// check fails unless every node serves exactly the history: every live
// link, no deleted one, each click once, and the same set of links.
func (h *resumeHistory) check(t *testing.T, step string, nodes ...*node) {
	t.Helper()
	if m := waitExactClicks(15*time.Second, nodes, h.clicks); m != "" {
		t.Errorf("%s: clicks differ:\n%s", step, m)
	}
	want := exportSet(t, nodes[0])
	for _, n := range nodes {
		checkRedirectsHead(t, n, h.live)
		for _, code := range h.deleted {
			r := n.request(t, http.MethodGet, "/"+code, http.Header{"Accept": {"application/json"}}, nil)
			requireProblem(t, r, http.StatusNotFound)
		}
		if got := n.health(t).Links; got != int64(len(h.live)) {
			t.Errorf("%s: %s holds %d links, want %d", step, n.id, got, len(h.live))
		}
		if d := faults.DiffSets(want, exportSet(t, n)); d != "" {
			t.Errorf("%s: %s's links differ from %s's:\n%s", step, n.id, nodes[0].id, d)
		}
	}
}

// TestCleanStopsResume: a node stopped with SIGTERM keeps its state and
// its next start resumes it (it logs so) instead of rebuilding it, and
// applies only the log after it: the writes made before the stop and while
// it was down (creates, deletes, clicks) reach it exactly once. Stops in
// awkward orders: a follower, the leader, then the whole cluster with the
// leader first; snapshots are taken often, so each start replays a log
// that begins at a snapshot below the state it resumes. A node killed
// with SIGKILL has nothing kept and resumes its latest snapshot.
func TestCleanStopsResume(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, map[string]string{"snapshot-threshold": "16"})
	leader, followers := waitOneLeader(t, leaderWaitTimeout, nodes...)
	h := &resumeHistory{clicks: map[string]int64{}}
	h.write(t, 0, nodes...)

	resumed := func(n *node) int { return strings.Count(n.out.String(), resumedLine) }
	stopAndResume := func(round int, n *node, others ...*node) {
		t.Helper()
		before := resumed(n)
		if err := n.stop(); err != nil {
			t.Fatalf("SIGTERM %s: exit %v", n.id, err)
		}
		h.write(t, round, others...)
		n.restartUntil(leaderKnown)
		if resumed(n) != before+1 {
			t.Errorf("round %d: %s did not resume its kept state", round, n.id)
		}
	}
	stopAndResume(1, followers[0], leader, followers[1])
	h.check(t, "a follower stopped and resumed", nodes...)

	leader, followers = waitOneLeader(t, leaderWaitTimeout, nodes...)
	stopAndResume(2, leader, followers...)
	h.check(t, "the leader stopped and resumed", nodes...)

	leader, followers = waitOneLeader(t, leaderWaitTimeout, nodes...)
	before := map[*node]int{}
	for _, n := range append([]*node{leader}, followers...) {
		before[n] = resumed(n)
		if err := n.stop(); err != nil {
			t.Fatalf("SIGTERM %s: exit %v", n.id, err)
		}
	}
	for _, n := range nodes {
		fmt.Fprintf(n.out, "\n=== harness: start after a full stop ===\n")
		n.launch()
	}
	for _, n := range nodes {
		if err := n.waitReady(leaderKnown); err != nil {
			t.Fatalf("%s after the full stop: %v", n.id, err)
		}
		if resumed(n) != before[n]+1 {
			t.Errorf("%s did not resume its kept state after the full stop", n.id)
		}
	}
	h.write(t, 3, nodes...)
	h.check(t, "the whole cluster stopped and resumed", nodes...)

	// A crash keeps nothing: the start resumes the checkpoint the latest
	// snapshot refers to and replays the log after it.
	crashed := nodes[1]
	if !eventually(30*time.Second, func() bool {
		found, _ := filepath.Glob(filepath.Join(crashed.dataDir, "snapshots", "*", "engine"))
		return slices.ContainsFunc(found, func(f string) bool { return !strings.Contains(f, ".tmp") })
	}) {
		t.Fatalf("%s took no snapshot referring to a checkpoint within 30 s", crashed.id)
	}
	crashed.kill9()
	h.write(t, 4, nodes[0], nodes[2])
	kept, fromSnapshot := resumed(crashed), strings.Count(crashed.out.String(), resumedSnapshotLine)
	crashed.restartUntil(leaderKnown)
	if resumed(crashed) != kept {
		t.Errorf("%s resumed a kept state after SIGKILL, when nothing was kept", crashed.id)
	}
	if strings.Count(crashed.out.String(), resumedSnapshotLine) != fromSnapshot+1 {
		t.Errorf("%s did not resume its latest snapshot's checkpoint after SIGKILL", crashed.id)
	}
	h.check(t, "a node killed and resumed from its snapshot", nodes...)
}

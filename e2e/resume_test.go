package e2e

import (
	"bytes"
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
	keyed   map[string]link // the first answer to a create sent with an Idempotency-Key, by key
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
	key := "resume-key-" + itoa(round)
	a, err := postCreate(through[len(through)-1], map[string]any{"original_url": "https://example.com/resume/keyed/" + itoa(round)}, key)
	if err != nil || a.status != http.StatusCreated {
		t.Fatalf("create with Idempotency-Key %s: %v %d %s", key, err, a.status, a.body)
	}
	h.live = append(h.live, a.link)
	h.keyed[key] = a.link
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
		// A resend answers with the first link (the leader's window, which
		// a restarted leader rebuilt after it started), and adds none.
		for key, first := range h.keyed {
			a, err := postCreate(n, map[string]any{"original_url": first.OriginalURL}, key)
			if err != nil || a.status != http.StatusCreated || a.link.ShortCode != first.ShortCode {
				t.Errorf("%s: a resend with Idempotency-Key %s through %s answered %v %d %s, want %s", step, key, n.id, err, a.status, a.body, first.ShortCode)
			}
		}
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
	h := &resumeHistory{clicks: map[string]int64{}, keyed: map[string]link{}}
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

// TestKill9DuringImportAndInstall: SIGKILL in the middle of an import,
// while snapshots are taken as it goes, and again in the middle of a new
// node's install of the state. Each node starts again (from its latest
// snapshot's checkpoint, or with the install to do again) and holds a
// whole state: every link it holds redirects, its export agrees with its
// count, the import run again completes it, and the new node ends up with
// every link.
func TestKill9DuringImportAndInstall(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	leader := startNode(t, nodeOptions{Settings: map[string]string{"snapshot-threshold": "16", "cluster-key": newClusterKey(t)}})
	const links = 60_000
	target := func(i int) string { return "https://example.com/k9/" + itoa(i) }
	var b strings.Builder
	for i := range links {
		fmt.Fprintf(&b, `{"short_code":"k9%06d","original_url":"%s"}`+"\n", i, target(i))
	}
	body := []byte(b.String())
	ndjson := http.Header{"Content-Type": {"application/x-ndjson"}}
	// A first import ends with a snapshot; the second is cut by the kill.
	first := bytes.SplitAfterN(body, []byte("\n"), links/3+1)
	if r := leader.request(t, http.MethodPost, "/admin/import", ndjson, bytes.Join(first[:links/3], nil)); r.status != http.StatusOK {
		t.Fatalf("the first import: %v", r)
	}
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+leader.httpAddr+"/admin/import", bytes.NewReader(first[links/3]))
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("Authorization", "Bearer "+e2eToken)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	if !eventuallyEvery(60*time.Second, 5*time.Millisecond, func() bool {
		h, err := leader.tryHealth()
		return err == nil && h.Links >= links/2 && snapshotAt(leader.dataDir) > 0
	}) {
		t.Fatalf("the imports did not reach %d links and a snapshot in 60 s", links/2)
	}
	leader.kill9()
	leader.restart()
	if !strings.Contains(leader.out.String(), resumedSnapshotLine) {
		t.Errorf("%s had a snapshot when it was killed and did not resume its checkpoint", leader.id)
	}
	// The log after the snapshot is applied once the node has elected
	// itself and committed an entry of its term: wait until the count
	// holds still.
	var held int64
	eventually(20*time.Second, func() bool {
		before := leader.health(t).Links
		time.Sleep(200 * time.Millisecond)
		held = leader.health(t).Links
		return held == before && held >= links/2
	})
	if held < links/2 || held > links {
		t.Fatalf("after SIGKILL in the import %s holds %d links, want %d to %d", leader.id, held, links/2, links)
	}
	if got := len(exportSet(t, leader)); int64(got) != held {
		t.Errorf("after SIGKILL in the import the export has %d links, /health counts %d", got, held)
	}
	for _, i := range []int{0, int(held) / 2, int(held) - 1} {
		leader.requireRedirect(t, fmt.Sprintf("k9%06d", i), target(i))
	}
	r := leader.request(t, http.MethodPost, "/admin/import", ndjson, body)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), fmt.Sprintf(`"created":%d,"skipped":%d`, links-held, held)) {
		t.Fatalf("the import run again: want %d created and %d skipped, got %v", links-held, held, r)
	}

	joiner := startWaitingNode(t, "node2", leader.clusterKey, nil)
	if r := leader.postJSON(t, "/admin/join", map[string]any{"id": joiner.id, "raft_addr": joiner.raftAddr, "http_addr": joiner.httpAddr}); r.status != http.StatusOK {
		t.Fatalf("POST /admin/join: want 200, got %v", r)
	}
	eventuallyEvery(10*time.Second, 5*time.Millisecond, func() bool { return len(snapshotDirs(joiner.dataDir)) > 0 })
	joiner.kill9()
	joiner.restartUntil(leaderKnown)
	if !eventually(60*time.Second, func() bool { h, err := joiner.tryHealth(); return err == nil && h.Links == links }) {
		h, _ := joiner.tryHealth()
		t.Fatalf("after SIGKILL in its install %s holds %d links, want %d", joiner.id, h.Links, links)
	}
	for _, i := range []int{0, links / 2, links - 1} {
		joiner.requireRedirect(t, fmt.Sprintf("k9%06d", i), target(i))
	}
}

// snapshotDirs lists what the data dir's snapshot store holds, finished
// or being written.
func snapshotDirs(dataDir string) []string {
	found, _ := filepath.Glob(filepath.Join(dataDir, "snapshots", "*"))
	return found
}

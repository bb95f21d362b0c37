package e2e

import (
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkraft/linkraft/e2e/faults"
)

// Fault tolerance of a three-node cluster (the guarantees of docs/API.md):
// formation over gossip, read-after-write across nodes, leader crashes under
// load, loss of quorum, exactly-once click counting through a leader change,
// full-cluster crashes, and backup/restore between clusters.

const (
	// formationBound is the contract bound for three nodes started at once
	// to form one cluster.
	formationBound = 10 * time.Second
	// failoverBound is the contract bound for creates to succeed again
	// after the leader was killed.
	failoverBound = 5 * time.Second
)

// TestClusterFormationAndReadAfterWrite: three nodes started with the same
// flags (gossip seeds, --bootstrap-expect 3, one --cluster-key) form one
// cluster within 10 s; every node takes creates; a code created on one node
// redirects at once on any other (no 404 in 200 create-then-redirect pairs).
func TestClusterFormationAndReadAfterWrite(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	key := newClusterKey(t)

	start := time.Now()
	nodes := startCluster(t, 3, map[string]string{"cluster-key": key})
	leader, _ := waitOneLeader(t, formationBound, nodes...)
	view := leader.waitServers(t, formationBound, nodeIDs(nodes...)...)
	formed := time.Since(start)
	t.Logf("cluster formed in %v (from launching the first process to one leader known to all and 3 servers)", formed.Round(time.Millisecond))
	if formed > formationBound {
		t.Errorf("cluster took %v to form, want at most %v", formed, formationBound)
	}
	for _, s := range view.Servers {
		if !strings.EqualFold(s.Suffrage, "voter") {
			t.Errorf("server %s has suffrage %q, want voter", s.ID, s.Suffrage)
		}
	}

	// Every node accepts creates (followers forward to the leader).
	for _, n := range nodes {
		l := n.createURL(t, "https://example.com/formation/"+n.id)
		for _, reader := range nodes {
			reader.requireRedirect(t, l.ShortCode, l.OriginalURL)
		}
	}

	// 200 pairs: create on node i, redirect at once on node j != i. Four
	// clients run pairs concurrently so the redirect often races the
	// follower's apply.
	seed := uint64(time.Now().UnixNano())
	t.Logf("pair seed %d", seed)
	const pairs, clients = 200, 4
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := mrand.New(mrand.NewPCG(seed, uint64(c)))
			for p := range pairs / clients {
				i := rng.IntN(len(nodes))
				j := (i + 1 + rng.IntN(len(nodes)-1)) % len(nodes)
				target := fmt.Sprintf("https://example.com/pair/%d/%d", c, p)
				l, status, err := nodes[i].tryCreate(target)
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("create on %s: %d %v", nodes[i].id, status, err))
					mu.Unlock()
					continue
				}
				st, loc, err := plainRequest(nodes[j].client, http.MethodGet, "http://"+nodes[j].httpAddr+"/"+l.ShortCode, nil)
				if err != nil || st != http.StatusFound || loc != target {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("created %s on %s, GET on %s: %d %q %v", l.ShortCode, nodes[i].id, nodes[j].id, st, loc, err))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("%d of %d create-then-redirect pairs failed:\n%s", len(failures), pairs, strings.Join(firstN(failures, 10), "\n"))
	}
}

// TestClusterLeaderFailover kills the leader with kill -9 five times under
// a load of creates and redirects against the survivors: creates succeed
// again within 5 s each time (median logged), redirects of acknowledged
// codes never fail, and the killed node restarted with its data dir has
// every acknowledged link. The subtests have a follower catch up after a
// log compaction, through a snapshot.
func TestClusterLeaderFailover(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)

	const runs = 5
	var failovers []time.Duration
	var acked []link
	for run := 1; run <= runs; run++ {
		leader, survivors := waitOneLeader(t, leaderWaitTimeout, nodes...)
		load := startLoad(t, loadConfig{
			name:            "failover-" + itoa(run),
			writers:         func() []*node { return survivors },
			readers:         func() []*node { return survivors },
			createWorkers:   3,
			redirectWorkers: 3,
			pause:           10 * time.Millisecond,
			// A create may be answered 503 while no leader is known (the
			// write timeout passed); that is the contract. Anything else
			// is a failure.
			tolerate503: true,
			maxOps:      3000,
			maxDuration: 40 * time.Second,
		})
		// Let the load reach a steady state before the crash.
		if !eventually(10*time.Second, func() bool { return load.ackedCount() >= 30 }) {
			load.stopLoad()
			load.report(t)
			t.Fatalf("run %d: the load got only %d creates acknowledged in 10 s before the crash", run, load.ackedCount())
		}
		killedAt := time.Now()
		leader.kill9()
		t.Logf("run %d: killed leader %s at %s", run, leader.id, killedAt.Format("15:04:05.000"))
		var failover time.Duration
		if eventually(failoverBound+5*time.Second, func() bool { _, ok := load.firstSuccessAfter(killedAt); return ok }) {
			first, _ := load.firstSuccessAfter(killedAt)
			failover = first.Sub(killedAt)
		} else {
			failover = time.Since(killedAt)
		}
		// Keep the load on the new leader a little longer.
		time.Sleep(500 * time.Millisecond)
		load.stopLoad()
		t.Logf("run %d: creates succeed again after %v", run, failover.Round(time.Millisecond))
		failovers = append(failovers, failover)
		if failover > failoverBound {
			t.Errorf("run %d: creates succeeded again only %v after the leader was killed, want at most %v", run, failover, failoverBound)
		}
		load.report(t)
		acked = append(acked, load.ackedLinks()...)

		// The killed node comes back with its data dir and has every
		// acknowledged link.
		leader.restartUntil(leaderKnown)
		checkRedirectsHead(t, leader, acked)
	}
	t.Logf("failover times %v, median %v (aim: 2 s)", failovers, median(failovers).Round(time.Millisecond))

	t.Run("follower catches up through a snapshot", func(t *testing.T) {
		// There is no flag for raft's snapshot threshold; a restore makes
		// the leader replace its log with a snapshot (leaving a gap in the
		// log), so a follower that was down during it can only catch up
		// with InstallSnapshot.
		leader, followers := waitOneLeader(t, leaderWaitTimeout, nodes...)
		down := followers[0]
		down.kill9()
		var whileDown []link
		for i := range 20 {
			whileDown = append(whileDown, followers[1].createURL(t, "https://example.com/while-down/"+itoa(i)))
		}
		backup := leader.get(t, "/admin/backup")
		if backup.status != http.StatusOK {
			t.Fatalf("GET /admin/backup: want 200, got %v", backup)
		}
		r := followers[1].request(t, http.MethodPost, "/admin/restore", http.Header{"Content-Type": {"application/octet-stream"}}, backup.body)
		if r.status != http.StatusOK {
			t.Fatalf("POST /admin/restore with the cluster's own backup: want 200, got %v", r)
		}
		for i := range 20 {
			whileDown = append(whileDown, followers[1].createURL(t, "https://example.com/after-compaction/"+itoa(i)))
		}
		down.restartUntil(leaderKnown)
		want := leader.linkCount(t)
		if !eventually(10*time.Second, func() bool { h, err := down.tryHealth(); return err == nil && h.Links == want }) {
			h, _ := down.tryHealth()
			t.Errorf("restarted follower %s has %d links 10 s after restart, the leader has %d", down.id, h.Links, want)
		}
		checkRedirectsHead(t, down, append(append([]link(nil), acked...), whileDown...))
	})

	t.Run("follower catches up through a snapshot after log compaction by threshold", func(t *testing.T) {
		if os.Getenv("LINKRAFT_E2E_SLOW") == "" {
			t.Skip("needs > 10240 log entries beyond raft's TrailingLogs and raft's SnapshotInterval (checked every 120-240 s, no flag to lower it): minutes, too slow for CI; set LINKRAFT_E2E_SLOW=1 to run")
		}
		leader, followers := waitOneLeader(t, leaderWaitTimeout, nodes...)
		down := followers[0]
		down.kill9()
		// Sequential creates are one log entry each. raft snapshots when
		// 8192 entries piled up since the last snapshot and keeps 10240
		// trailing entries, so the follower must miss more than that.
		const entries = 20000
		start := time.Now()
		var last link
		for i := range entries {
			last = followers[1].createURL(t, "https://example.com/compaction/"+itoa(i))
		}
		t.Logf("%d sequential creates took %v", entries, time.Since(start))
		// Wait for a snapshot on the leader: raft checks every 120-240 s.
		time.Sleep(250 * time.Second)
		down.restartUntil(leaderKnown)
		want := leader.linkCount(t)
		if !eventually(30*time.Second, func() bool { h, err := down.tryHealth(); return err == nil && h.Links == want }) {
			h, _ := down.tryHealth()
			t.Errorf("restarted follower %s has %d links, the leader has %d", down.id, h.Links, want)
		}
		down.requireRedirectHead(t, last.ShortCode, last.OriginalURL)
	})
}

// TestClusterLostQuorum: with two of three nodes killed, creates on the
// survivor answer 503 with Retry-After within --write-timeout (2 s) + 1 s,
// the survivor still redirects existing codes, writes resume once one node
// is back, and no acknowledged link is missing on any node.
func TestClusterLostQuorum(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	const writeTimeout = 2 * time.Second
	cases := []struct {
		name           string
		leaderSurvives bool
	}{
		{"follower survives", false},
		{"leader survives", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes := startCluster(t, 3, map[string]string{"write-timeout": writeTimeout.String()})
			leader, followers := waitOneLeader(t, leaderWaitTimeout, nodes...)
			var acked []link
			for i, n := range nodes {
				for k := range 5 {
					acked = append(acked, n.createURL(t, fmt.Sprintf("https://example.com/quorum/%d/%d", i, k)))
				}
			}

			// Every node has applied every acknowledged link before the
			// crash (a redirect on a lagging node catches it up), so the
			// survivor can serve them from its own state.
			for _, n := range nodes {
				checkRedirectsHead(t, n, acked)
			}

			survivor, down := followers[1], []*node{leader, followers[0]}
			if tc.leaderSurvives {
				survivor, down = leader, followers
			}
			for _, n := range down {
				n.kill9()
			}

			for i := range 3 {
				start := time.Now()
				r := survivor.postJSON(t, "/api/v1/urls", map[string]any{"original_url": "https://example.com/quorum/refused/" + itoa(i)})
				took := time.Since(start)
				requireProblem(t, r, http.StatusServiceUnavailable)
				if retry, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || retry < 1 {
					t.Errorf("503 without quorum: Retry-After = %q, want a positive number of seconds", r.header.Get("Retry-After"))
				}
				if took > writeTimeout+time.Second {
					t.Errorf("create without quorum took %v to answer 503, want at most --write-timeout %v + 1 s", took, writeTimeout)
				}
			}
			for _, l := range acked {
				survivor.requireRedirect(t, l.ShortCode, l.OriginalURL)
			}
			// The operator's view of the cluster comes from the survivor's
			// own state, marked stale, once no leader was found within the
			// write timeout.
			start := time.Now()
			r := survivor.get(t, "/admin/cluster")
			if took := time.Since(start); r.status != http.StatusOK || r.header.Get("X-Linkraft-Stale") == "" || took > writeTimeout+2*time.Second {
				t.Errorf("GET /admin/cluster without quorum: %d, X-Linkraft-Stale %q after %v; want 200, stale, within --write-timeout + 2 s",
					r.status, r.header.Get("X-Linkraft-Stale"), took)
			}

			// One node back: a quorum again, writes resume.
			down[0].restartLive()
			var recovered link
			ok := eventually(20*time.Second, func() bool {
				l, _, err := survivor.tryCreate("https://example.com/quorum/recovered")
				recovered = l
				return err == nil
			})
			if !ok {
				t.Fatalf("writes on %s still fail 20 s after %s restarted", survivor.id, down[0].id)
			}
			acked = append(acked, recovered)
			acked = append(acked, down[0].createURL(t, "https://example.com/quorum/recovered-2"))
			down[1].restartUntil(leaderKnown)
			for _, n := range nodes {
				checkRedirectsHead(t, n, acked)
			}
		})
	}
}

// TestClusterClicksExactThroughLeaderKill: clicks taken by every node are
// counted exactly once through a leader crash when no node that took
// unflushed clicks crashed. The leader's clicks are flushed (visible in
// stats) before it is killed; the survivors take clicks before, during and
// after the election; HEAD requests never count.
func TestClusterClicksExactThroughLeaderKill(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil) // click flush every 200 ms
	leader, survivors := waitOneLeader(t, leaderWaitTimeout, nodes...)

	var codes []link
	for i := range 3 {
		codes = append(codes, nodes[i].createURL(t, "https://example.com/clicks/"+itoa(i)))
	}
	sent := map[string]int64{}
	var mu sync.Mutex
	click := func(n *node, l link, method string) {
		status, loc, err := plainRequest(n.client, method, "http://"+n.httpAddr+"/"+l.ShortCode, nil)
		if err != nil || status != http.StatusFound || loc != l.OriginalURL {
			t.Errorf("%s /%s on %s: %d %q %v, want 302", method, l.ShortCode, n.id, status, loc, err)
			return
		}
		if method == http.MethodGet {
			mu.Lock()
			sent[l.ShortCode]++
			mu.Unlock()
		}
	}

	// Phase 1: clicks on all three nodes, the leader included, until stats
	// show all of them (so nothing is pending on the leader).
	const k = 4
	for _, n := range nodes {
		for _, l := range codes {
			for range k {
				click(n, l, http.MethodGet)
			}
			click(n, l, http.MethodHead)
		}
	}
	if m := waitExactClicks(10*time.Second, nodes, sent); m != "" {
		t.Fatalf("before the crash the stats do not show the clicks sent:\n%s", m)
	}

	// Phase 2: survivors keep taking clicks while the leader is killed.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w, n := range survivors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				method := http.MethodGet
				if i%7 == 0 {
					method = http.MethodHead
				}
				click(n, codes[(w+i)%len(codes)], method)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	leader.kill9()
	newLeader, _ := waitOneLeader(t, leaderWaitTimeout, survivors...)
	t.Logf("killed leader %s, new leader %s", leader.id, newLeader.id)
	time.Sleep(time.Second) // clicks keep arriving after the election
	close(stop)
	wg.Wait()

	t.Logf("GET redirects answered 302 per code: %v", sent)
	if m := waitExactClicks(10*time.Second, survivors, sent); m != "" {
		t.Fatalf("after the leader change the click counts are not exact:\n%s", m)
	}
	// A few more flush intervals: a retried batch must not count twice.
	time.Sleep(5 * fastFlush)
	if m := waitExactClicks(0, survivors, sent); m != "" {
		t.Errorf("click counts changed after they were exact:\n%s", m)
	}
	// The link read shows the same click_count.
	for _, n := range survivors {
		for _, l := range codes {
			var got link
			decodeObject(t, n.get(t, "/api/v1/urls/"+l.ShortCode), readFields, &got)
			if got.ClickCount != sent[l.ShortCode] {
				t.Errorf("GET /api/v1/urls/%s on %s: click_count %d, want %d", l.ShortCode, n.id, got.ClickCount, sent[l.ShortCode])
			}
		}
	}
	// The killed node catches up to the same counts.
	leader.restartUntil(leaderKnown)
	if m := waitExactClicks(10*time.Second, []*node{leader}, sent); m != "" {
		t.Errorf("the restarted node does not show the exact counts:\n%s", m)
	}
}

// TestClusterFullRestartAndRestore: kill -9 of all three nodes keeps every
// acknowledged link and every flushed click; a backup of that cluster
// restored into a fresh cluster (other processes, ports and data dirs)
// gives the same export, and the fresh cluster keeps working.
func TestClusterFullRestartAndRestore(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)

	var acked []link
	for i := range 30 {
		n := nodes[i%3]
		fields := map[string]any{"original_url": "https://example.com/full/" + itoa(i)}
		switch i % 5 {
		case 1:
			fields["custom_code"] = "full-restart-" + itoa(i)
		case 2:
			fields["strategy"] = "hash"
		case 3:
			fields["workspace"] = "full-ws"
			fields["expires_in_hours"] = 48
		}
		acked = append(acked, n.createLink(t, fields))
	}
	deleted := nodes[1].createURL(t, "https://example.com/full/deleted")
	if r := nodes[2].request(t, http.MethodDelete, "/api/v1/urls/"+deleted.ShortCode, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE through %s: want 204, got %v", nodes[2].id, r)
	}
	clicks := map[string]int64{}
	for i, l := range acked[:6] {
		for c := range i + 1 {
			n := nodes[c%3]
			if r := n.get(t, "/"+l.ShortCode); r.status != http.StatusFound {
				t.Fatalf("GET /%s on %s: want 302, got %v", l.ShortCode, n.id, r)
			}
			clicks[l.ShortCode]++
		}
	}
	if m := waitExactClicks(10*time.Second, nodes, clicks); m != "" {
		t.Fatalf("clicks not flushed before the crash:\n%s", m)
	}

	for _, n := range nodes {
		n.kill9()
	}
	restartAll(t, nodes...)
	// Clicks first: the redirect checks below use HEAD, which never counts.
	if m := waitExactClicks(10*time.Second, nodes, clicks); m != "" {
		t.Errorf("after the full-cluster crash the flushed clicks are not all there:\n%s", m)
	}
	for _, n := range nodes {
		checkRedirectsHead(t, n, acked)
		r := n.request(t, http.MethodGet, "/"+deleted.ShortCode, http.Header{"Accept": {"application/json"}}, nil)
		requireProblem(t, r, http.StatusNotFound)
		if h := n.health(t); h.Links != int64(len(acked)) {
			t.Errorf("after the full-cluster crash %s has %d links, want %d", n.id, h.Links, len(acked))
		}
	}
	// Codes keep being unique after the crash.
	codes := map[string]bool{deleted.ShortCode: true}
	for _, l := range acked {
		codes[l.ShortCode] = true
	}
	for i, n := range nodes {
		l := n.createURL(t, "https://example.com/full/after-restart/"+itoa(i))
		if codes[l.ShortCode] {
			t.Errorf("code %s handed out again after the full-cluster restart", l.ShortCode)
		}
		acked = append(acked, l)
	}

	// Backup through a follower, export for comparison, then retire the
	// first cluster before starting the second.
	_, followers := waitOneLeader(t, leaderWaitTimeout, nodes...)
	backup := followers[0].get(t, "/admin/backup")
	if backup.status != http.StatusOK || len(backup.body) == 0 {
		t.Fatalf("GET /admin/backup: want 200 with a body, got %v", backup)
	}
	want := exportSet(t, followers[0])
	if len(want) != len(acked) {
		t.Errorf("export has %d links, want %d", len(want), len(acked))
	}
	for _, n := range nodes {
		n.kill9()
	}

	// The operator keeps the cluster key with the backup: the new cluster
	// is given the old one, so the backup restores as the cluster's own.
	fresh := startJoinedCluster(t, 3, map[string]string{"cluster-key": nodes[0].clusterKey})
	freshLeader, freshFollowers := waitOneLeader(t, leaderWaitTimeout, fresh...)
	r := freshFollowers[0].request(t, http.MethodPost, "/admin/restore", http.Header{"Content-Type": {"application/octet-stream"}}, backup.body)
	if r.status != http.StatusOK {
		t.Fatalf("POST /admin/restore on the fresh cluster: want 200, got %v", r)
	}
	for _, n := range fresh {
		if !eventually(10*time.Second, func() bool { h, err := n.tryHealth(); return err == nil && h.Links == int64(len(acked)) }) {
			h, _ := n.tryHealth()
			t.Errorf("fresh node %s has %d links after the restore, want %d", n.id, h.Links, len(acked))
		}
	}
	if d := faults.DiffSets(want, exportSet(t, freshFollowers[1])); d != "" {
		t.Errorf("export of the restored cluster differs from the original:\n%s", d)
	}
	for _, n := range fresh {
		checkRedirectsHead(t, n, acked)
	}
	if m := waitExactClicks(5*time.Second, fresh, clicks); m != "" {
		t.Errorf("restored clicks differ:\n%s", m)
	}
	// The restored cluster takes writes through every node, also after a
	// leadership change (the backup's record of the old cluster's
	// addresses must not send forwarded writes to the old nodes).
	check := func(stage string) {
		for _, n := range fresh {
			l, status, err := n.tryCreate("https://example.com/restored/" + stage + "/" + n.id)
			if err != nil {
				t.Errorf("%s: create through %s: %d %v", stage, n.id, status, err)
				continue
			}
			for _, m := range fresh {
				m.requireRedirectHead(t, l.ShortCode, l.OriginalURL)
			}
		}
	}
	check("after-restore")
	if r := freshLeader.request(t, http.MethodPost, "/admin/leadership-transfer", nil, nil); r.status != http.StatusOK {
		t.Fatalf("leadership transfer on the restored cluster: want 200, got %v", r)
	}
	waitOneLeader(t, leaderWaitTimeout, fresh...)
	check("after-transfer")
}

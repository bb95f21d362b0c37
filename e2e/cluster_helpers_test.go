package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkraft/linkraft/e2e/faults"
)

// Helpers for the multi-node tests (cluster_faults_test.go,
// cluster_membership_test.go). They never call t.Fatal from a goroutine:
// background load records what it saw and the test judges it afterwards.

// clusterServer is one entry of GET /admin/cluster's "servers".
type clusterServer struct {
	ID          string `json:"id"`
	RaftAddr    string `json:"raft_addr"`
	HTTPAddr    string `json:"http_addr"`
	Suffrage    string `json:"suffrage"`
	Leader      bool   `json:"leader"`
	Reachable   bool   `json:"reachable"`
	LastContact string `json:"last_contact"`
	CatchingUp  bool   `json:"catching_up"`
}

// clusterView is the GET /admin/cluster answer.
type clusterView struct {
	NodeID       string          `json:"node_id"`
	Role         string          `json:"role"`
	Leader       string          `json:"leader"`
	Term         uint64          `json:"term"`
	CommitIndex  uint64          `json:"commit_index"`
	AppliedIndex uint64          `json:"applied_index"`
	Servers      []clusterServer `json:"servers"`
}

// ids returns the ids of the servers, sorted.
func (c clusterView) ids() []string {
	ids := make([]string, 0, len(c.Servers))
	for _, s := range c.Servers {
		ids = append(ids, s.ID)
	}
	sort.Strings(ids)
	return ids
}

// server returns the entry for id.
func (c clusterView) server(id string) (clusterServer, bool) {
	for _, s := range c.Servers {
		if s.ID == id {
			return s, true
		}
	}
	return clusterServer{}, false
}

// clusterView reads GET /admin/cluster and requires a 200.
func (n *node) clusterView(t *testing.T) clusterView {
	t.Helper()
	r := n.get(t, "/admin/cluster")
	if r.status != http.StatusOK {
		t.Fatalf("GET /admin/cluster on %s: want 200, got %v", n.id, r)
	}
	var c clusterView
	decodeObject(t, r, []string{"node_id", "role", "leader", "term", "commit_index", "applied_index", "servers"}, &c)
	return c
}

// waitServers polls /admin/cluster on n until the configuration lists
// exactly the ids in want (bounded), and returns the last view; it fails
// the test otherwise.
func (n *node) waitServers(t *testing.T, timeout time.Duration, want ...string) clusterView {
	t.Helper()
	c, err := n.pollServers(t, timeout, want...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pollServers is waitServers returning an error instead of failing.
func (n *node) pollServers(t *testing.T, timeout time.Duration, want ...string) (clusterView, error) {
	t.Helper()
	want = append([]string(nil), want...)
	sort.Strings(want)
	var last clusterView
	var lastBody string
	ok := eventually(timeout, func() bool {
		r, err := n.tryRequest(t, http.MethodGet, "/admin/cluster", nil, nil)
		if err != nil || r.status != http.StatusOK {
			lastBody = fmt.Sprintf("%v %v", r, err)
			return false
		}
		lastBody = string(r.body)
		var c clusterView
		if json.Unmarshal(r.body, &c) != nil {
			return false
		}
		last = c
		return strings.Join(c.ids(), ",") == strings.Join(want, ",")
	})
	if !ok {
		return last, fmt.Errorf("/admin/cluster on %s does not list exactly %v within %v; last answer: %s", n.id, want, timeout, lastBody)
	}
	return last, nil
}

// nodeIDs returns the ids of nodes, sorted.
func nodeIDs(nodes ...*node) []string {
	ids := make([]string, 0, len(nodes))
	for _, n := range nodes {
		ids = append(ids, n.id)
	}
	sort.Strings(ids)
	return ids
}

// tryHealth reads /health (readiness) without failing the test.
func (n *node) tryHealth() (health, error) { return n.tryHealthAt("/health") }

// tryLive reads /health/live (liveness, the same body), which is 200 on a
// node without a leader or not yet in a cluster.
func (n *node) tryLive() (health, error) { return n.tryHealthAt("/health/live") }

func (n *node) tryHealthAt(path string) (health, error) {
	probe := &http.Client{Transport: n.transport, Timeout: 2 * time.Second}
	resp, err := probe.Get("http://" + n.httpAddr + path)
	if err != nil {
		return health{}, err
	}
	defer resp.Body.Close()
	var h health
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return h, fmt.Errorf("%s: %d %s", path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return h, fmt.Errorf("%s: %w: %s", path, err, body)
	}
	return h, nil
}

// waitOneLeader polls /health on nodes until exactly one of them is leader
// and every one of them names it, and returns the leader and the others.
func waitOneLeader(t *testing.T, timeout time.Duration, nodes ...*node) (*node, []*node) {
	t.Helper()
	var leader *node
	var followers []*node
	var seen []string
	ok := eventually(timeout, func() bool {
		leader, followers, seen = nil, nil, nil
		named := map[string]bool{}
		for _, n := range nodes {
			h, err := n.tryHealth()
			if err != nil {
				seen = append(seen, n.id+": "+err.Error())
				return false
			}
			seen = append(seen, fmt.Sprintf("%s: role %s leader %q", n.id, h.Role, h.Leader))
			named[h.Leader] = true
			if h.Role == "leader" {
				if leader != nil {
					return false
				}
				leader = n
			} else {
				followers = append(followers, n)
			}
		}
		return leader != nil && len(named) == 1 && named[leader.id]
	})
	if !ok {
		t.Fatalf("no single leader known to all of %v within %v; last /health: %v", nodeIDs(nodes...), timeout, seen)
	}
	return leader, followers
}

// launchNode prepares and starts a node with the given --cluster-key
// (empty: it makes its own) and settings (on top of the harness defaults)
// without waiting for anything.
func launchNode(t *testing.T, id, clusterKey string, settings map[string]string) *node {
	t.Helper()
	n := newNode(t, id)
	n.clusterKey = clusterKey
	n.args, n.env = n.commandLine(nodeOptions{Settings: settings})
	n.launch()
	return n
}

// restartAll kills and relaunches every node (same flags and data dirs)
// before waiting for any of them, so a cluster that needs a quorum to elect
// a leader can come back; then it waits until every node knows a leader.
func restartAll(t *testing.T, nodes ...*node) {
	t.Helper()
	for _, n := range nodes {
		n.kill()
		fmt.Fprintf(n.out, "\n=== harness: restart ===\n")
		n.launch()
	}
	for _, n := range nodes {
		if err := n.waitReady(leaderKnown); err != nil {
			t.Fatalf("node %s after restart: %v", n.id, err)
		}
	}
}

// newClusterKey returns a fresh --cluster-key value.
func newClusterKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random cluster key: %v", err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// requireRedirectHead checks that HEAD /{code} redirects to target with a
// 302; HEAD does not count clicks, so checks with it leave counts alone.
func (n *node) requireRedirectHead(t *testing.T, code, target string) {
	t.Helper()
	r := n.request(t, http.MethodHead, "/"+code, nil, nil)
	if r.status != http.StatusFound || r.header.Get("Location") != target {
		t.Errorf("HEAD /%s on %s: want 302 to %q, got %d Location %q", code, n.id, target, r.status, r.header.Get("Location"))
	}
}

// checkRedirectsHead checks (with a few workers) that every link redirects
// on n with HEAD, and reports at most a handful of failures.
func checkRedirectsHead(t *testing.T, n *node, links []link) {
	t.Helper()
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(links) {
					return
				}
				l := links[i]
				status, loc, err := plainRequest(n.client, http.MethodHead, "http://"+n.httpAddr+"/"+l.ShortCode, nil)
				if err != nil || status != http.StatusFound || loc != l.OriginalURL {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("HEAD /%s: %d %q %v (want 302 to %q)", l.ShortCode, status, loc, err, l.OriginalURL))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		if len(failures) > 10 {
			failures = append(failures[:10], fmt.Sprintf("... and %d more", len(failures)-10))
		}
		t.Errorf("node %s does not redirect %d of %d acknowledged links:\n%s", n.id, len(failures), len(links), strings.Join(failures, "\n"))
	}
}

// plainRequest sends one request without a *testing.T (safe in goroutines)
// and returns the status and Location.
func plainRequest(c *http.Client, method, url string, body []byte) (int, string, error) {
	status, header, _, err := plainDo(c, method, url, body)
	if err != nil {
		return 0, "", err
	}
	return status, header.Get("Location"), nil
}

// plainDo is plainRequest returning the header and body too.
func plainDo(c *http.Client, method, url string, body []byte) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+e2eToken) // every cluster these tests start has it
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, data, nil
}

// tryCreate creates a link for target on n without a *testing.T; it
// returns the link on 201 and otherwise the status (0 on a transport error).
func (n *node) tryCreate(target string) (link, int, error) {
	body, _ := json.Marshal(map[string]any{"original_url": target})
	status, _, data, err := plainDo(n.client, http.MethodPost, "http://"+n.httpAddr+"/api/v1/urls", body)
	if err != nil {
		return link{}, 0, err
	}
	if status != http.StatusCreated {
		return link{}, status, fmt.Errorf("create %s on %s: %d %s", target, n.id, status, data)
	}
	var l link
	if err := json.Unmarshal(data, &l); err != nil || l.ShortCode == "" {
		return link{}, status, fmt.Errorf("create %s on %s: bad answer %s", target, n.id, data)
	}
	return l, status, nil
}

// createOutcome is one create the load generator made.
type createOutcome struct {
	start, end time.Time
	status     int
}

// loadConfig tells a load generator what to do.
type loadConfig struct {
	// name makes target URLs unique per generator.
	name string
	// writers create links through the nodes writers returns, round robin.
	writers func() []*node
	// readers redirect acknowledged codes through the nodes readers returns.
	readers func() []*node
	// createWorkers and redirectWorkers are the goroutines of each kind.
	createWorkers, redirectWorkers int
	// pause is the sleep between two requests of one worker.
	pause time.Duration
	// retry503 retries a create answered 503 (same target) up to this many
	// times before counting it as failed.
	retry503 int
	// tolerate503 accepts a create that is still answered 503 after the
	// retries (the contract while no leader is known) instead of counting
	// it as failed.
	tolerate503 bool
	// maxOps bounds the requests of each worker; maxDuration the whole run.
	maxOps      int
	maxDuration time.Duration
}

// loadGen is a bounded background loop of creates and redirects.
type loadGen struct {
	cfg  loadConfig
	stop chan struct{}
	wg   sync.WaitGroup

	mu           sync.Mutex
	acked        []link
	creates      []createOutcome
	statuses     map[int]int // create statuses after retries (0: transport error)
	retried503   int
	createErrors []string // creates that failed for good
	redirects    int
	redirectErrs []string // redirects of acknowledged codes that were not 302 to the target
	seq          atomic.Int64
}

// startLoad starts the generator; stopLoad (also registered as cleanup)
// ends it.
func startLoad(t *testing.T, cfg loadConfig) *loadGen {
	t.Helper()
	if cfg.maxOps == 0 {
		cfg.maxOps = 100000
	}
	if cfg.maxDuration == 0 {
		cfg.maxDuration = 2 * time.Minute
	}
	g := &loadGen{cfg: cfg, stop: make(chan struct{}), statuses: map[int]int{}}
	deadline := time.Now().Add(cfg.maxDuration)
	running := func(i int) bool {
		if i >= cfg.maxOps || time.Now().After(deadline) {
			return false
		}
		select {
		case <-g.stop:
			return false
		case <-time.After(cfg.pause):
			return true
		}
	}
	for w := range cfg.createWorkers {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for i := 0; running(i); i++ {
				writers := cfg.writers()
				n := writers[(w+i)%len(writers)]
				g.createOne(n)
			}
		}()
	}
	for w := range cfg.redirectWorkers {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			rng := mrand.New(mrand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for i := 0; running(i); i++ {
				l, ok := g.pick(rng)
				if !ok {
					continue
				}
				readers := cfg.readers()
				n := readers[rng.IntN(len(readers))]
				status, loc, err := plainRequest(n.client, http.MethodGet, "http://"+n.httpAddr+"/"+l.ShortCode, nil)
				g.mu.Lock()
				g.redirects++
				if err != nil || status != http.StatusFound || loc != l.OriginalURL {
					g.redirectErrs = append(g.redirectErrs, fmt.Sprintf("%s GET /%s on %s: %d %q %v (want 302 to %q)",
						time.Now().Format("15:04:05.000"), l.ShortCode, n.id, status, loc, err, l.OriginalURL))
				}
				g.mu.Unlock()
			}
		}()
	}
	t.Cleanup(g.stopLoad)
	return g
}

// createOne makes one create, retrying 503 answers as a client would.
func (g *loadGen) createOne(n *node) {
	target := fmt.Sprintf("https://example.com/load/%s/%d", g.cfg.name, g.seq.Add(1))
	for attempt := 0; ; attempt++ {
		start := time.Now()
		l, status, err := n.tryCreate(target)
		end := time.Now()
		g.mu.Lock()
		g.creates = append(g.creates, createOutcome{start: start, end: end, status: status})
		if status == http.StatusCreated {
			g.acked = append(g.acked, l)
			g.statuses[status]++
			g.mu.Unlock()
			return
		}
		if status == http.StatusServiceUnavailable && attempt < g.cfg.retry503 {
			g.retried503++
			g.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			continue
		}
		g.statuses[status]++
		if status == http.StatusServiceUnavailable && g.cfg.tolerate503 {
			g.mu.Unlock()
			return
		}
		g.createErrors = append(g.createErrors, fmt.Sprintf("%s on %s: %v", start.Format("15:04:05.000"), n.id, err))
		g.mu.Unlock()
		return
	}
}

// pick returns an acknowledged link: half of the time the newest one (the
// one most likely to be missing on a lagging node), otherwise any.
func (g *loadGen) pick(rng *mrand.Rand) (link, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.acked) == 0 {
		return link{}, false
	}
	if rng.IntN(2) == 0 {
		return g.acked[len(g.acked)-1], true
	}
	return g.acked[rng.IntN(len(g.acked))], true
}

func (g *loadGen) stopLoad() {
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	g.wg.Wait()
}

// ackedLinks returns a copy of the acknowledged links.
func (g *loadGen) ackedLinks() []link {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]link(nil), g.acked...)
}

func (g *loadGen) ackedCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.acked)
}

// firstSuccessAfter returns when the first create started at or after t0
// was acknowledged.
func (g *loadGen) firstSuccessAfter(t0 time.Time) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var first time.Time
	for _, c := range g.creates {
		if c.status == http.StatusCreated && !c.start.Before(t0) && (first.IsZero() || c.end.Before(first)) {
			first = c.end
		}
	}
	return first, !first.IsZero()
}

// report checks what the load saw: every redirect of an acknowledged code
// was a 302, and no create failed for good.
func (g *loadGen) report(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	t.Logf("load %s: %d creates acknowledged, final create statuses %v, %d retried 503s, %d redirects",
		g.cfg.name, len(g.acked), g.statuses, g.retried503, g.redirects)
	if len(g.redirectErrs) > 0 {
		t.Errorf("%d of %d redirects of acknowledged codes failed, first and last ones:\n%s", len(g.redirectErrs), g.redirects, strings.Join(firstLast(g.redirectErrs, 5), "\n"))
	}
	if len(g.createErrors) > 0 {
		t.Errorf("%d creates failed for good, first ones:\n%s", len(g.createErrors), strings.Join(firstN(g.createErrors, 10), "\n"))
	}
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(append([]string(nil), s[:n]...), fmt.Sprintf("... and %d more", len(s)-n))
	}
	return s
}

// firstLast returns the first n and the last n lines of s.
func firstLast(s []string, n int) []string {
	if len(s) <= 2*n {
		return s
	}
	out := append([]string(nil), s[:n]...)
	out = append(out, fmt.Sprintf("... %d more ...", len(s)-2*n))
	return append(out, s[len(s)-n:]...)
}

// median of durations.
func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// exportSet reads GET /admin/export from n and returns its lines as a set
// of canonical JSON objects, with short_url reduced to its path (its host
// comes from the request's Host header).
func exportSet(t *testing.T, n *node) map[string]bool {
	t.Helper()
	r := n.get(t, "/admin/export")
	if r.status != http.StatusOK {
		t.Fatalf("GET /admin/export on %s: want 200, got %v", n.id, r)
	}
	set, err := faults.ExportSet(r.body)
	if err != nil {
		t.Fatalf("export of %s: %v", n.id, err)
	}
	return set
}

// clicksOf reads the click count of code without failing the test, and
// checks that its clicks over time add up to it.
func (n *node) clicksOf(code string) (int64, error) {
	status, _, body, err := plainDo(n.client, http.MethodGet, "http://"+n.httpAddr+"/api/v1/urls/"+code+"/stats", nil)
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("stats of %s on %s: %d %s", code, n.id, status, body)
	}
	var s struct {
		Clicks *float64 `json:"clicks"`
		Series []struct {
			Clicks int64 `json:"clicks"`
		} `json:"series"`
	}
	if err := json.Unmarshal(body, &s); err != nil || s.Clicks == nil || *s.Clicks != math.Trunc(*s.Clicks) {
		return 0, fmt.Errorf("stats of %s on %s: no integer clicks in %s", code, n.id, body)
	}
	// The tests run for less than the day the default series covers, so
	// every click counted must also sit in one of its hours.
	var hourly int64
	for _, p := range s.Series {
		hourly += p.Clicks
	}
	if hourly != int64(*s.Clicks) {
		return 0, fmt.Errorf("stats of %s on %s: %d clicks, but the hours add up to %d", code, n.id, int64(*s.Clicks), hourly)
	}
	return int64(*s.Clicks), nil
}

// waitExactClicks polls until every node shows want[code] clicks for every
// code (bounded) and returns a description of the mismatches left, "" when
// none.
func waitExactClicks(timeout time.Duration, nodes []*node, want map[string]int64) string {
	var mismatch []string
	eventually(timeout, func() bool {
		mismatch = nil
		for _, n := range nodes {
			for code, w := range want {
				got, err := n.clicksOf(code)
				if err != nil {
					mismatch = append(mismatch, err.Error())
				} else if got != w {
					mismatch = append(mismatch, fmt.Sprintf("%s: %s has %d clicks, want %d", n.id, code, got, w))
				}
			}
		}
		sort.Strings(mismatch)
		return len(mismatch) == 0
	})
	return strings.Join(mismatch, "\n")
}

// runCLI runs an admin subcommand against node n, with the node's
// credential in LINKRAFT_KEY, and returns its output and exit error.
func runCLI(t *testing.T, n *node, args ...string) (string, error) {
	t.Helper()
	full := append([]string{args[0], "--addr", "http://" + n.httpAddr}, args[1:]...)
	return runCommand(t, 30*time.Second, []string{"LINKRAFT_KEY=" + n.credential}, full...)
}

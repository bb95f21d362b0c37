package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	// balancerPoll is how often the test's load balancer asks each node's
	// /health, as HAProxy or a DNS check would (every 100-200 ms).
	balancerPoll = 150 * time.Millisecond
	// drainLoadWorkers and drainLoadPace make the steady load: each worker
	// sends one request per pace.
	drainLoadWorkers = 4
	drainLoadPace    = 10 * time.Millisecond
	// drainMaxOps bounds each worker's loop besides the test's end, and
	// balancerMaxPolls each poller's (about 10 minutes).
	drainMaxOps      = 100_000
	balancerMaxPolls = 4000
)

// balancer picks nodes as a load balancer does: it polls each node's
// /health and picks, at random, only among those that last answered 200.
type balancer struct {
	nodes   []*node
	healthy []atomic.Bool
	// changes[i] records every change of node i's state.
	mu      sync.Mutex
	changes map[int][]balancerChange
	stop    chan struct{}
	wg      sync.WaitGroup
}

type balancerChange struct {
	at      time.Time
	healthy bool
}

func newBalancer(nodes []*node) *balancer {
	b := &balancer{nodes: nodes, healthy: make([]atomic.Bool, len(nodes)), changes: map[int][]balancerChange{}, stop: make(chan struct{})}
	for i, n := range nodes {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.poll(i, n)
		}()
	}
	return b
}

// poll asks n's /health every balancerPoll until close.
func (b *balancer) poll(i int, n *node) {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	tick := time.NewTicker(balancerPoll)
	defer tick.Stop()
	for range balancerMaxPolls {
		ok := false
		if resp, err := client.Get("http://" + n.httpAddr + "/health"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ok = resp.StatusCode == http.StatusOK
		}
		if b.healthy[i].Swap(ok) != ok {
			b.mu.Lock()
			b.changes[i] = append(b.changes[i], balancerChange{time.Now(), ok})
			b.mu.Unlock()
		}
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
	}
}

// pick is a node the balancer holds healthy, or nil when none is.
func (b *balancer) pick(rng *rand.Rand) (int, *node) {
	var up []int
	for i := range b.nodes {
		if b.healthy[i].Load() {
			up = append(up, i)
		}
	}
	if len(up) == 0 {
		return -1, nil
	}
	i := up[rng.IntN(len(up))]
	return i, b.nodes[i]
}

// waitHealthy waits (bounded) until the balancer holds every node healthy.
func (b *balancer) waitHealthy(t *testing.T, within time.Duration) {
	t.Helper()
	if !eventually(within, func() bool {
		for i := range b.nodes {
			if !b.healthy[i].Load() {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the balancer does not hold every node healthy within %v", within)
	}
}

// firstChange is when the balancer first held node i healthy (or not,
// as healthy says) at or after since.
func (b *balancer) firstChange(i int, since time.Time, healthy bool) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.changes[i] {
		if c.healthy == healthy && !c.at.Before(since) {
			return c.at, true
		}
	}
	return time.Time{}, false
}

func (b *balancer) close() {
	close(b.stop)
	b.wg.Wait()
}

// loadFailure is one request of the load that did not get its answer.
type loadFailure struct {
	at   time.Time
	kind string // redirect or create
	node string
	what string
}

// drainLoad is the steady traffic of redirects and creates the test runs
// through a balancer.
type drainLoad struct {
	b      *balancer
	client *http.Client
	token  string

	mu       sync.Mutex
	codes    []link
	failures []loadFailure
	sent     map[string]int // by kind
	took     map[string][]time.Duration
	byNode   map[string]int
	noNode   int // picks that found no healthy node
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

func startDrainLoad(b *balancer, token string, seed []link) *drainLoad {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	l := &drainLoad{
		b: b, token: token, codes: append([]link(nil), seed...),
		client: &http.Client{Transport: tr, Timeout: 15 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		sent: map[string]int{}, took: map[string][]time.Duration{}, byNode: map[string]int{}, stop: make(chan struct{}),
	}
	for w := range drainLoadWorkers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.work(rand.New(rand.NewPCG(uint64(w), 42)))
		}()
	}
	return l
}

// work sends one request per drainLoadPace until stopped: four redirects
// for each create, the redirects of codes created earlier by any node.
func (l *drainLoad) work(rng *rand.Rand) {
	tick := time.NewTicker(drainLoadPace)
	defer tick.Stop()
	for range drainMaxOps {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		_, n := l.b.pick(rng)
		if n == nil {
			l.mu.Lock()
			l.noNode++
			l.mu.Unlock()
			continue
		}
		if rng.IntN(5) == 0 {
			l.create(n)
		} else {
			l.redirect(n, rng)
		}
	}
}

func (l *drainLoad) create(n *node) {
	body, _ := json.Marshal(map[string]string{"original_url": fmt.Sprintf("https://example.com/drain/%d", time.Now().UnixNano())})
	req, _ := http.NewRequest(http.MethodPost, "http://"+n.httpAddr+"/api/v1/urls", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+l.token)
	status, _, answer, err := l.do(req, "create", n)
	var created link
	switch {
	case err != nil:
		l.fail("create", n, err.Error())
	case status != http.StatusCreated || json.Unmarshal(answer, &created) != nil:
		l.fail("create", n, fmt.Sprintf("%d %s", status, answer))
	default:
		l.mu.Lock()
		l.codes = append(l.codes, created)
		l.mu.Unlock()
	}
}

func (l *drainLoad) redirect(n *node, rng *rand.Rand) {
	l.mu.Lock()
	target := l.codes[rng.IntN(len(l.codes))]
	l.mu.Unlock()
	req, _ := http.NewRequest(http.MethodGet, "http://"+n.httpAddr+"/"+target.ShortCode, nil)
	status, location, answer, err := l.do(req, "redirect", n)
	switch {
	case err != nil:
		l.fail("redirect", n, err.Error())
	case status != http.StatusFound || location != target.OriginalURL:
		l.fail("redirect", n, fmt.Sprintf("%s: %d to %q %s, want 302 to %q", target.ShortCode, status, location, answer, target.OriginalURL))
	}
}

// do sends req and reads the answer whole: status, Location, body.
func (l *drainLoad) do(req *http.Request, kind string, n *node) (int, string, []byte, error) {
	l.mu.Lock()
	l.sent[kind]++
	l.byNode[n.id]++
	l.mu.Unlock()
	start := time.Now()
	defer func() {
		l.mu.Lock()
		l.took[kind] = append(l.took[kind], time.Since(start))
		l.mu.Unlock()
	}()
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), body, err
}

// latencies is the median, 99th percentile and slowest of ds.
func latencies(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	return fmt.Sprintf("median %v, p99 %v, max %v", r(s[len(s)/2]), r(s[len(s)*99/100]), r(s[len(s)-1]))
}

func (l *drainLoad) fail(kind string, n *node, what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = append(l.failures, loadFailure{at: time.Now(), kind: kind, node: n.id, what: what})
}

// finish stops the load and waits for its requests in flight; safe to
// call more than once.
func (l *drainLoad) finish() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
	l.client.CloseIdleConnections()
}

// TestDrainedRollingRestart: under a steady load of redirects and creates
// sent through a load balancer that polls /health, every node of a
// three-node cluster is stopped with SIGTERM (drained: /health 503 at
// once, still serving for --shutdown-drain) and started again, one after
// the other, the leader included. A client that stops picking a node once
// its /health says 503 sees no failed request. The timings it logs (how
// soon the balancer took a node out and back in, latencies) are for
// reading, not checked. Not parallel: other tests' load on the machine
// would only blur what it logs.
func TestDrainedRollingRestart(t *testing.T) {
	skipIfShort(t)
	nodes := startCluster(t, 3, map[string]string{"shutdown-drain": "5s"})
	leader, _ := waitOneLeader(t, formationBound, nodes...)
	var seed []link
	for i := range 20 {
		seed = append(seed, leader.createURL(t, fmt.Sprintf("https://example.com/drain-seed/%d", i)))
	}
	b := newBalancer(nodes)
	defer b.close()
	b.waitHealthy(t, leaderWaitTimeout)
	l := startDrainLoad(b, e2eToken, seed)
	t.Cleanup(l.finish) // a test that fails half-way leaves no load behind
	began := time.Now()

	for i, n := range nodes {
		b.waitHealthy(t, leaderWaitTimeout)
		// Every restart has load around it before and after.
		loadBefore := l.sentTotal()
		if !eventually(10*time.Second, func() bool { return l.sentTotal() >= loadBefore+50 }) {
			t.Fatalf("the load stalled before restarting %s", n.id)
		}
		role := "follower"
		if h, err := n.tryHealth(); err == nil && h.Role == "leader" {
			role = "leader"
		}
		signalled := time.Now()
		if err := n.stop(); err != nil {
			t.Fatalf("%s exited with %v after SIGTERM, want status 0", n.id, err)
		}
		exited := time.Now()
		n.launch()
		if !eventually(leaderWaitTimeout, func() bool {
			a, err := probe(n, "/health/writes")
			return err == nil && a.status == http.StatusOK
		}) {
			t.Fatalf("%s does not take writes again within %v of its restart", n.id, leaderWaitTimeout)
		}
		b.waitHealthy(t, leaderWaitTimeout)
		out, _ := b.firstChange(i, signalled, false)
		back, _ := b.firstChange(i, exited, true)
		t.Logf("%s (%s): taken out %v after SIGTERM; exited %v after SIGTERM; back in %v after the restart",
			n.id, role, out.Sub(signalled).Round(time.Millisecond), exited.Sub(signalled).Round(time.Millisecond), back.Sub(exited).Round(time.Millisecond))
	}
	// Load after the last restart too.
	loadAfter := l.sentTotal()
	if !eventually(10*time.Second, func() bool { return l.sentTotal() >= loadAfter+50 }) {
		t.Fatal("the load stalled after the last restart")
	}
	l.finish()

	l.mu.Lock()
	defer l.mu.Unlock()
	failed := map[string]int{}
	for _, f := range l.failures {
		failed[f.kind]++
	}
	t.Logf("%v of drained rolling restarts: sent %d redirects (%d failed), %d creates (%d failed); by node %v; %d picks found no healthy node",
		time.Since(began).Round(time.Second), l.sent["redirect"], failed["redirect"], l.sent["create"], failed["create"], l.byNode, l.noNode)
	t.Logf("latency of redirects: %s; of creates: %s", latencies(l.took["redirect"]), latencies(l.took["create"]))
	for i, f := range l.failures {
		if i == 20 {
			t.Logf("... and %d more", len(l.failures)-i)
			break
		}
		t.Logf("failed %s on %s at +%v: %s", f.kind, f.node, f.at.Sub(began).Round(time.Millisecond), strings.TrimSpace(f.what))
	}
	if len(l.failures) > 0 {
		t.Errorf("%d requests failed during drained rolling restarts, want none", len(l.failures))
	}
}

func (l *drainLoad) sentTotal() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent["redirect"] + l.sent["create"]
}

// TestDrainServesWhileTakenOut: from SIGTERM on, a node answers /health and
// /health/writes 503 shutting_down while it still redirects, creates and
// answers /health/live 200, each answer closing its connection; a second
// signal ends the drain at once, and the node exits 0.
func TestDrainServesWhileTakenOut(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{Settings: map[string]string{"shutdown-drain": "1m"}})
	l := n.createURL(t, "https://example.com/drain-serves")
	n.mu.Lock()
	proc := n.cmd.Process
	n.mu.Unlock()
	if err := proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	var last probeAnswer
	if !eventually(5*time.Second, func() bool {
		a, err := probe(n, "/health")
		last = a
		return err == nil && a.status == http.StatusServiceUnavailable
	}) {
		t.Fatalf("/health not 503 within 5 s of SIGTERM; last %v", last)
	}
	for _, path := range []string{"/health", "/health/writes"} {
		if a, err := probe(n, path); err != nil || a.status != http.StatusServiceUnavailable || a.doc["reason"] != "shutting_down" {
			t.Errorf("%s while draining: %v %v, want 503 shutting_down", path, a, err)
		}
	}
	if a, err := probe(n, "/health/live"); err != nil || a.status != http.StatusOK {
		t.Errorf("/health/live while draining: %v %v, want 200", a, err)
	}
	resp, err := n.client.Get("http://" + n.httpAddr + "/" + l.ShortCode)
	if err != nil {
		t.Fatalf("GET /%s while draining: %v", l.ShortCode, err)
	}
	resp.Body.Close()
	// resp.Close: the answer said Connection: close (net/http takes the
	// header out).
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != l.OriginalURL || !resp.Close {
		t.Errorf("GET /%s while draining: %d Location %q, closing %v; want 302 to %s, closing the connection",
			l.ShortCode, resp.StatusCode, resp.Header.Get("Location"), resp.Close, l.OriginalURL)
	}
	n.createURL(t, "https://example.com/created-while-draining")

	// The harness's stop is the second signal.
	if err := n.stop(); err != nil {
		t.Errorf("exit after a second SIGTERM: %v, want status 0", err)
	}
	if !strings.Contains(n.out.String(), "drain cut short") {
		t.Errorf("the node did not say the second signal cut its drain short:\n%s", tail(n.out.String(), 2000))
	}
}

// TestStopWhileStarting: a SIGTERM that reaches a node while it opens (a
// systemctl stop during its start) stops it as any stop does, with exit
// status 0, instead of killing it halfway through its start.
func TestStopWhileStarting(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := newNode(t, "node1")
	n.args, n.env = n.commandLine(nodeOptions{})
	n.launch()
	// The node's first line names where its cluster key came from: it has
	// begun to open, and is not serving yet.
	if !eventuallyEvery(10*time.Second, time.Millisecond, func() bool { return strings.Contains(n.out.String(), "cluster key") }) {
		t.Fatalf("the node did not start:\n%s", n.out.String())
	}
	if err := n.stop(); err != nil {
		t.Fatalf("SIGTERM while the node starts: %v; want exit status 0\n%s", err, n.out.String())
	}
}

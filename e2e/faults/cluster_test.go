package faults

import (
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

const (
	// writeTimeout is every node's --write-timeout. With 500 ms heartbeat
	// and election timeouts, followers notice a lost leader after 0.5-1 s
	// and usually elect within another 0.5-1 s (0.76-1.75 s measured), but
	// a split vote costs one more round: 2 s was exceeded once in about 30
	// isolations on a loaded machine, 3 s covers two rounds.
	writeTimeout = 3 * time.Second
	// requestTimeout is the client's bound per request: a little above
	// writeTimeout, so a node's own 503 arrives before the client gives up.
	requestTimeout = writeTimeout + time.Second
	// formTimeout bounds cluster formation and every wait for a leader.
	formTimeout = 30 * time.Second
)

// cluster is the nodes of one run and the client that talks to them.
type cluster struct {
	t       *testing.T
	env     *netEnv
	cfg     nodeConfig // what a node added later shares with the others
	dir     string     // every node's data dir and log
	members memberList
	cl      *client
}

// nodes returns the current members (a snapshot: membership changes
// while the workload runs).
func (c *cluster) nodes() []*fnode { return c.members.snapshot() }

// startCluster builds the binary, creates the network and starts size
// nodes that bootstrap one cluster; every process is killed in cleanup.
func startCluster(t *testing.T, size int, rng *mrand.Rand) *cluster {
	t.Helper()
	return startClusterOf(t, buildBinary(t), size, rng)
}

// startClusterOf is startCluster with a given linkraft binary.
func startClusterOf(t *testing.T, bin string, size int, rng *mrand.Rand) *cluster {
	t.Helper()
	key, err := keygen(bin)
	if err != nil {
		t.Fatal(err)
	}
	env := newNetEnv(t, size, rng)
	// Before the cleanup that kills the nodes, so it runs after it.
	c := &cluster{t: t, env: env, dir: t.TempDir()}
	c.cl = &client{hc: newHTTPClient(), timeout: requestTimeout, token: fmt.Sprintf("tok%x", rng.Uint64()), start: time.Now(), hist: &History{}}
	cfg := nodeConfig{bin: bin, key: key, token: c.cl.token, writeTimeout: writeTimeout}
	ports := make([][3]string, size)
	for i := range size {
		if ports[i], err = nodePorts(env, i); err != nil {
			t.Fatal(err)
		}
		cfg.gossip = append(cfg.gossip, ports[i][2])
	}
	c.cfg = cfg
	for i := range size {
		n := newFnode(c.dir, env, i, ports[i], cfg, size, cfg.gossip)
		if err := c.members.register(n); err != nil {
			t.Fatal(err)
		}
		if err := c.members.join(n); err != nil {
			t.Fatal(err)
		}
	}
	// Registered after the network's cleanups, so it runs before them.
	t.Cleanup(c.killAll)
	for _, n := range c.nodes() {
		if err := n.launch(); err != nil {
			t.Fatal(err)
		}
	}
	leader, err := c.waitLeader(formTimeout)
	if err != nil {
		t.Fatalf("cluster did not form: %v", err)
	}
	if c.cl.key, err = c.workloadKey(leader); err != nil {
		t.Fatal(err)
	}
	return c
}

// workloadKey makes the API key the workload's link calls carry: the
// operator's token only makes the key, as an operator would.
func (c *cluster) workloadKey(leader *fnode) (string, error) {
	body := []byte(`{"name":"fault workload","scopes":["links:read","links:write","stats:read"],"workspaces":["*"]}`)
	a := c.cl.do(fasthttp.MethodPost, leader.httpAddr, "/admin/keys", body, requestTimeout)
	var k struct{ Key string }
	if a.err != nil || a.status != fasthttp.StatusCreated || json.Unmarshal(a.body, &k) != nil || k.Key == "" {
		return "", fmt.Errorf("create the workload's API key: %v %d %s", a.err, a.status, a.body)
	}
	return k.Key, nil
}

func (c *cluster) killAll() {
	for _, n := range c.members.everyNode() {
		if err := n.kill(); err != nil {
			c.t.Errorf("cleanup: %v", err)
		}
	}
	c.cl.hc.CloseIdleConnections()
}

// nodeHealth is the part of /health the harness uses.
type nodeHealth struct {
	NodeID       string `json:"node_id"`
	Role         string `json:"role"`
	Leader       string `json:"leader"`
	AppliedIndex uint64 `json:"applied_index"`
	Links        int64  `json:"links"`
}

func (c *cluster) health(n *fnode) (nodeHealth, error) {
	a := c.cl.do(fasthttp.MethodGet, n.httpAddr, "/health", nil, time.Second)
	var h nodeHealth
	if a.err != nil {
		return h, fmt.Errorf("/health on %s: %w", n.id, a.err)
	}
	if a.status != 200 {
		return h, fmt.Errorf("/health on %s: %d %s", n.id, a.status, a.body)
	}
	if err := json.Unmarshal(a.body, &h); err != nil {
		return h, fmt.Errorf("/health on %s: %w", n.id, err)
	}
	return h, nil
}

// leaderNow returns the one of nodes that says it leads and that every
// other one of them names, or nil and what each said.
func (c *cluster) leaderNow(nodes []*fnode) (*fnode, string) {
	var leader *fnode
	named := map[string]bool{}
	var seen []string
	for _, n := range nodes {
		h, err := c.health(n)
		if err != nil {
			return nil, err.Error()
		}
		seen = append(seen, fmt.Sprintf("%s:%s/%s", n.id, h.Role, h.Leader))
		named[h.Leader] = true
		if h.Role == "leader" {
			leader = n
		}
	}
	if leader == nil || len(named) != 1 || !named[leader.id] {
		return nil, strings.Join(seen, " ")
	}
	return leader, ""
}

// waitLeader polls until every running member names one leader.
func (c *cluster) waitLeader(timeout time.Duration) (*fnode, error) {
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		var l *fnode
		if l, last = c.leaderNow(c.running()); l != nil {
			return l, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("no single leader within %v; last: %s", timeout, last)
}

// running returns the members whose process is alive.
func (c *cluster) running() []*fnode {
	var out []*fnode
	for _, n := range c.nodes() {
		if n.running() {
			out = append(out, n)
		}
	}
	return out
}

// indexOf returns n's index in nodes, or -1.
func indexOf(nodes []*fnode, n *fnode) int {
	for i, m := range nodes {
		if m == n {
			return i
		}
	}
	return -1
}

// waitConverged waits until every node runs, names one leader and has
// applied the same index as the leader.
func (c *cluster) waitConverged(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		if ok, why := c.converged(); ok {
			return nil
		} else {
			last = why
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not converged within %v: %s", timeout, last)
}

func (c *cluster) converged() (bool, string) {
	nodes := c.nodes()
	for _, n := range nodes {
		if !n.running() {
			return false, n.id + " is down"
		}
	}
	if l, why := c.leaderNow(nodes); l == nil {
		return false, why
	}
	indexes := map[uint64]bool{}
	var seen []string
	for _, n := range nodes {
		h, err := c.health(n)
		if err != nil {
			return false, err.Error()
		}
		indexes[h.AppliedIndex] = true
		seen = append(seen, fmt.Sprintf("%s@%d", n.id, h.AppliedIndex))
	}
	return len(indexes) == 1, "applied " + strings.Join(seen, " ")
}

// finalReads sends HEAD /{code} for every code to every member (a few
// workers, bounded by the number of codes).
func (c *cluster) finalReads(codes []string) {
	type job struct {
		n    *fnode
		code string
	}
	nodes := c.nodes()
	jobs := make([]job, 0, len(codes)*len(nodes))
	for _, n := range nodes {
		for _, code := range codes {
			jobs = append(jobs, job{n, code})
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(jobs)); i = next.Add(1) - 1 {
				// A read that never reached the node says nothing about
				// the code: try again (the checkers judge the last read).
				for try := 0; try < 3; try++ {
					if op := c.cl.readOp(1000+w, Final, jobs[i].n, jobs[i].code); op.Status != 0 {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
}

// exports reads GET /admin/export from every member.
func (c *cluster) exports() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, n := range c.nodes() {
		a := c.cl.do(fasthttp.MethodGet, n.httpAddr, "/admin/export", nil, 20*time.Second)
		if a.err != nil || a.status != 200 {
			return nil, fmt.Errorf("export from %s: %d %v %.200s", n.id, a.status, a.err, a.body)
		}
		out[n.id] = a.body
	}
	return out, nil
}

// convergedExports retries until the exports agree (click counts flush
// asynchronously), bounded, and returns the last exports and their
// anomalies.
func (c *cluster) convergedExports(timeout time.Duration) (map[string][]byte, []Anomaly) {
	deadline := time.Now().Add(timeout)
	for {
		ex, err := c.exports()
		var anomalies []Anomaly
		if err != nil {
			anomalies = []Anomaly{{Checker: "exports", Detail: err.Error()}}
		} else {
			anomalies = CheckExports(ex)
		}
		if len(anomalies) == 0 || time.Now().After(deadline) {
			return ex, anomalies
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// processAnomalies reports unexpected exits, panics in the logs and members
// that are not running at the end, for every node the run started: a node
// removed from the cluster was stopped on purpose (its exit is expected
// and it is not running at the end), but what it did before, and a panic
// in its log, count.
func (c *cluster) processAnomalies() []Anomaly {
	var out []Anomaly
	for _, n := range c.members.everyNode() {
		for _, e := range n.unexpectedExits() {
			out = append(out, Anomaly{Checker: "process", Node: n.id, Detail: e})
		}
		if !n.running() && c.members.isMember(n) {
			out = append(out, Anomaly{Checker: "process", Node: n.id, Detail: "not running at the end of the run"})
		}
		log, err := os.ReadFile(n.logPath)
		if err != nil {
			out = append(out, Anomaly{Checker: "process", Node: n.id, Detail: fmt.Sprintf("read log: %v", err)})
		}
		for _, marker := range []string{"panic:", "fatal error:", "DATA RACE"} {
			if i := strings.Index(string(log), marker); i >= 0 {
				out = append(out, Anomaly{Checker: "process", Node: n.id, Detail: fmt.Sprintf("log contains %q: %.300s", marker, log[i:])})
			}
		}
	}
	return out
}

// resume sends SIGCONT to every running node (harmless when not paused).
func (c *cluster) resume() {
	for _, n := range c.running() {
		_ = n.signal(syscall.SIGCONT)
	}
}

// saveArtifacts writes the history, the schedule and every node's log.
func (c *cluster) saveArtifacts(dir string, ops []Op, extra map[string]any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("artifacts dir: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return fmt.Errorf("history file: %w", err)
	}
	if err := WriteJSONL(f, ops); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close history: %w", err)
	}
	for name, v := range extra {
		data, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	for _, n := range c.members.everyNode() {
		data, err := os.ReadFile(n.logPath)
		if err != nil {
			return fmt.Errorf("read log of %s: %w", n.id, err)
		}
		if err := os.WriteFile(filepath.Join(dir, n.id+".log"), data, 0o644); err != nil {
			return fmt.Errorf("copy log of %s: %w", n.id, err)
		}
	}
	return nil
}

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binPath is the linkraft binary that TestMain builds once for all tests.
var binPath string

const (
	// leaderWaitTimeout bounds how long a node may take from exec to
	// answering /health as leader; elections take ~1-2 s, the rest is slack
	// for a loaded CI box.
	leaderWaitTimeout = 20 * time.Second
	// stopTimeout bounds a graceful SIGTERM shutdown before the harness
	// gives up and kills the process.
	stopTimeout = 20 * time.Second
	// clickWaitTimeout bounds polling for click counts to show up in stats.
	// docs/API.md promises about 2 s; the extra margin keeps a busy
	// machine from turning this liveness check into a timing assertion.
	clickWaitTimeout = 5 * time.Second
	// fastFlush is the click flush interval most tests run with, so clicks
	// reach stats quickly.
	fastFlush = 200 * time.Millisecond
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

// runTests builds the binary, runs the tests and removes the binary; it is
// separate from TestMain so the deferred cleanup runs before os.Exit.
func runTests(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		// Every test skips itself in short mode; building the server would
		// only slow the unit-test run down (or fail it while the server is
		// half written).
		return m.Run()
	}
	// LINKRAFT_E2E_BINARY runs the suite against a binary built elsewhere
	// (a release artefact, a -race build) instead of building one.
	if prebuilt := os.Getenv("LINKRAFT_E2E_BINARY"); prebuilt != "" {
		binPath = prebuilt
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "linkraft-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: module root:", err)
		return 1
	}
	binPath = filepath.Join(dir, "linkraft")
	build := exec.Command(goTool(), "build", "-o", binPath, "./cmd/linkraft")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build ./cmd/linkraft failed: %v\n%s\n", err, out)
		return 1
	}
	return m.Run()
}

// goTool finds the go command that runs this test, so the binary is built by
// the same toolchain.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}

// moduleRoot asks `go env GOMOD` for the module root and falls back to walking
// up from the working directory to the first go.mod.
func moduleRoot() (string, error) {
	if out, err := exec.Command(goTool(), "env", "GOMOD").Output(); err == nil {
		gomod := strings.TrimSpace(string(out))
		if gomod != "" && gomod != os.DevNull {
			return filepath.Dir(gomod), nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// realPartMissing fails the test for want of a real part it drives (a
// client library, a tool, a server), saying how to get it, or skips it
// where LINKRAFT_SKIP_REAL_PARTS=1 asks: a skip that a plain
// `go test ./...` would not show is no check at all.
func realPartMissing(t *testing.T, what, fix string) {
	t.Helper()
	if os.Getenv("LINKRAFT_SKIP_REAL_PARTS") == "1" {
		t.Skipf("%s: skipped as asked", what)
	}
	t.Fatalf("%s: %s; or set LINKRAFT_SKIP_REAL_PARTS=1 to skip the tests against real parts", what, fix)
}

func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped in -short mode")
	}
}

// lockedBuffer collects a process's stdout and stderr; the exec copier
// goroutines write while the test may read, hence the lock.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// portRegistry remembers every port handed out in this test process, so two
// parallel tests never get the same port between "listen :0, close" and the
// node binding it.
var portRegistry = struct {
	mu   sync.Mutex
	used map[int]bool
}{used: map[int]bool{}}

// freePort returns a port of 127.0.0.1 that is free for TCP and, when
// udpToo is set, also for UDP (memberlist binds both on the gossip port).
func freePort(t *testing.T, udpToo bool) int {
	t.Helper()
	return freePortOn(t, "127.0.0.1", udpToo)
}

// freePortOn returns a port of the loopback address ip that is free for
// TCP and, when udpToo is set, also for UDP; no port is handed out twice
// in one test run. The ports are drawn from outside the kernel's
// ephemeral range (testPorts): a port a listener on :0 was given can be
// taken, between its close and the node's bind, as the source port of an
// outgoing connection (the tests make thousands), and the node then fails
// to listen.
func freePortOn(t *testing.T, ip string, udpToo bool) int {
	t.Helper()
	first, end := testPorts()
	for range 500 {
		port := first + rand.IntN(end-first)
		portRegistry.mu.Lock()
		taken := portRegistry.used[port]
		portRegistry.used[port] = true
		portRegistry.mu.Unlock()
		if !taken && portFree(ip, port, udpToo) {
			return port
		}
	}
	t.Fatalf("no free port on %s in [%d, %d) found in 500 attempts", ip, first, end)
	return 0
}

// portFree reports whether ip:port can be listened on for TCP and, with
// udpToo, for UDP.
func portFree(ip string, port int, udpToo bool) bool {
	addr := net.JoinHostPort(ip, itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	l.Close()
	if udpToo {
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		u.Close()
	}
	return true
}

// testPorts is the range test ports are drawn from, end excluded: below
// the kernel's ephemeral range, or above it when it starts too low to
// leave room (Linux's defaults when it cannot be read).
func testPorts() (first, end int) {
	low, high := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, errL := strconv.Atoi(f[0])
			h, errH := strconv.Atoi(f[1])
			if errL == nil && errH == nil && l <= h {
				low, high = l, h
			}
		}
	}
	switch {
	case low > 11000:
		return 10000, low
	case high < 64000:
		return high + 1, 65536
	}
	return 10000, 32768 // no room outside the range: a bind may still race
}

// nodeOptions configures one linkraft serve process.
type nodeOptions struct {
	// ID is the --id of the node; "node1" when empty.
	ID string
	// Settings are extra flags by name without dashes ("admin-token": "x").
	// They override the harness defaults (create-rate 0, click flush 200ms).
	Settings map[string]string
	// ViaEnv passes every setting as a LINKRAFT_* environment variable
	// instead of a command-line flag.
	ViaEnv bool
}

// node is one running (or stopped) linkraft serve process.
type node struct {
	t          *testing.T
	id         string
	dataDir    string
	httpAddr   string
	raftAddr   string
	gossipAddr string
	args       []string
	env        []string
	out        *lockedBuffer
	transport  *http.Transport
	client     *http.Client
	// credential is sent with every request that names none (see
	// tryRequest): the node's --admin-token.
	credential string
	// clusterKey is the node's --cluster-key, which every node of its
	// cluster shares; empty: none given, the node makes its own.
	clusterKey string
	// bin is the binary to run; empty: the one built from this tree.
	bin string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current process has exited
	waitErr error         // exit status of the current process, valid after done
}

// startNode starts a single-node cluster and waits until it is leader. The
// process is killed and its output logged (on failure) when the test ends.
func startNode(t *testing.T, opts nodeOptions) *node {
	t.Helper()
	n := newNode(t, opts.ID)
	if err := n.launchUntil(t, opts, nil, n.waitLeader); err != nil {
		t.Fatalf("node %s did not become leader: %v", n.id, err)
	}
	return n
}

// launchUntil starts n with opts and extra environment variables and
// returns what ready returns. A port picked by "listen :0" can still be
// grabbed by another process before the node binds it; then it retries
// with fresh ports, at most three times in all.
func (n *node) launchUntil(t *testing.T, opts nodeOptions, env []string, ready func() error) error {
	t.Helper()
	for attempt := 1; ; attempt++ {
		n.args, n.env = n.commandLine(opts)
		n.env = append(n.env, env...)
		n.launch()
		err := ready()
		if err == nil || attempt == 3 || !strings.Contains(n.out.String(), "address already in use") {
			return err
		}
		n.kill()
		fmt.Fprintf(n.out, "\n=== harness: port clash, retrying with new ports ===\n")
		n.pickPorts(t)
	}
}

// startCluster starts size nodes that find each other over gossip and
// bootstrap one Raft cluster (--bootstrap-expect size), then waits until
// every node knows the leader. settings apply to every node; unless they
// give a key, the nodes share a new --cluster-key.
func startCluster(t *testing.T, size int, settings map[string]string) []*node {
	t.Helper()
	return startClusterEnv(t, size, settings, nil)
}

// startClusterEnv is startCluster with extra environment for every node
// (S3 credentials, say).
func startClusterEnv(t *testing.T, size int, settings map[string]string, env []string) []*node {
	t.Helper()
	key := sharedKey(t, settings)
	nodes := make([]*node, size)
	var gossip []string
	for i := range nodes {
		nodes[i] = newNode(t, "node"+itoa(i+1))
		nodes[i].clusterKey = key
		gossip = append(gossip, nodes[i].gossipAddr)
	}
	for _, n := range nodes {
		all := map[string]string{"bootstrap-expect": itoa(size), "join": strings.Join(gossip, ",")}
		for k, v := range settings {
			all[k] = v
		}
		n.args, n.env = n.commandLine(nodeOptions{Settings: all})
		n.env = append(n.env, env...)
		n.launch()
	}
	for _, n := range nodes {
		if err := n.waitReady(leaderKnown); err != nil {
			t.Fatalf("cluster node %s: %v", n.id, err)
		}
	}
	return nodes
}

// startJoinedCluster builds a cluster of size nodes with POST /admin/join
// instead of gossip: node1 bootstraps alone, the others start without
// bootstrapping (--bootstrap-expect size, no --join seeds, so they wait) and
// are joined through node1, which promotes each to voter once it caught up. Unless settings give a key, the nodes
// share a new --cluster-key.
func startJoinedCluster(t *testing.T, size int, settings map[string]string) []*node {
	t.Helper()
	key := sharedKey(t, settings)
	first := newNode(t, "node1")
	first.clusterKey = key
	if err := first.launchUntil(t, nodeOptions{ID: "node1", Settings: settings}, nil, first.waitLeader); err != nil {
		t.Fatalf("node %s did not become leader: %v", first.id, err)
	}
	nodes := []*node{first}
	for i := 2; i <= size; i++ {
		n := newNode(t, "node"+itoa(i))
		n.clusterKey = key
		all := map[string]string{"bootstrap-expect": itoa(size)}
		for k, v := range settings {
			all[k] = v
		}
		n.args, n.env = n.commandLine(nodeOptions{Settings: all})
		n.launch()
		nodes = append(nodes, n)
	}
	for _, n := range nodes[1:] {
		// The joiner's HTTP port answers once it listens; join only then so
		// the leader can reach it.
		if err := n.waitLive(); err != nil {
			t.Fatalf("node %s: %v", n.id, err)
		}
		r := first.postJSON(t, "/admin/join", map[string]any{"id": n.id, "raft_addr": n.raftAddr, "http_addr": n.httpAddr})
		if r.status < 200 || r.status > 299 {
			t.Fatalf("POST /admin/join %s: want 2xx, got %v", n.id, r)
		}
	}
	for _, n := range nodes {
		if err := n.waitReady(leaderKnown); err != nil {
			t.Fatalf("cluster node %s: %v", n.id, err)
		}
	}
	// A join adds a learner that the leader promotes once it caught up:
	// the cluster has size voters only then.
	var view clusterView
	if !eventually(30*time.Second, func() bool {
		view = first.clusterView(t)
		voters := 0
		for _, s := range view.Servers {
			if strings.EqualFold(s.Suffrage, "voter") {
				voters++
			}
		}
		return voters == size
	}) {
		t.Fatalf("joined nodes not all voters within 30 s: %+v", view.Servers)
	}
	return nodes
}

// sharedKey is the --cluster-key for the nodes of a new cluster: a new
// one, or none when settings give the key themselves.
func sharedKey(t *testing.T, settings map[string]string) string {
	t.Helper()
	if _, ok := settings["cluster-key"]; ok {
		return ""
	}
	if _, ok := settings["cluster-key-file"]; ok {
		return ""
	}
	return newClusterKey(t)
}

// newNode prepares a node (ports, data dir, client, cleanup) without
// starting it.
func newNode(t *testing.T, id string) *node {
	t.Helper()
	if id == "" {
		id = "node1"
	}
	n := &node{t: t, id: id, dataDir: t.TempDir(), out: &lockedBuffer{}}
	n.transport = http.DefaultTransport.(*http.Transport).Clone()
	n.transport.MaxIdleConnsPerHost = 128
	n.client = &http.Client{
		Transport: n.transport,
		Timeout:   20 * time.Second,
		// Redirects are what we test: never follow them.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	t.Cleanup(func() {
		n.kill()
		n.transport.CloseIdleConnections()
		if t.Failed() {
			t.Logf("output of node %s (%s):\n%s", n.id, strings.Join(n.args, " "), n.out.String())
		}
	})
	n.pickPorts(t)
	return n
}

func (n *node) pickPorts(t *testing.T) {
	t.Helper()
	n.httpAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t, false))
	n.raftAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t, false))
	n.gossipAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t, true))
}

// commandLine turns the options into serve arguments and environment.
func (n *node) commandLine(opts nodeOptions) (args, env []string) {
	settings := map[string]string{
		"id":                   n.id,
		"data-dir":             n.dataDir,
		"http-addr":            n.httpAddr,
		"raft-addr":            n.raftAddr,
		"gossip-addr":          n.gossipAddr,
		"create-rate":          "0",
		"click-flush-interval": fastFlush.String(),
		"admin-token":          e2eToken,
	}
	if n.bin == "" {
		// No drain unless a test asks for one: a test that stops a node
		// waits for its exit, and no load balancer here needs the time.
		// (An older release, which TestRollingUpgrade starts, has no
		// such flag.)
		settings["shutdown-drain"] = "0"
	}
	if n.clusterKey != "" {
		settings["cluster-key"] = n.clusterKey
	}
	if _, ok := opts.Settings["cluster-key-file"]; ok {
		delete(settings, "cluster-key") // it would win over the file
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	n.credential = settings["admin-token"]
	n.clusterKey = settings["cluster-key"]
	names := make([]string, 0, len(settings))
	for k := range settings {
		names = append(names, k)
	}
	sort.Strings(names)
	args = []string{"serve"}
	for _, name := range names {
		if opts.ViaEnv {
			env = append(env, "LINKRAFT_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))+"="+settings[name])
		} else {
			args = append(args, "--"+name+"="+settings[name])
		}
	}
	return args, env
}

// hermeticEnv is the test's environment without LINKRAFT_* variables and
// NOTIFY_SOCKET, so a developer's shell settings cannot change what the
// node does and a service manager running the tests never hears from it.
func hermeticEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LINKRAFT_") && !strings.HasPrefix(kv, "NOTIFY_SOCKET=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// launch execs the binary with the node's arguments.
func (n *node) launch() {
	n.t.Helper()
	bin := binPath
	if n.bin != "" {
		bin = n.bin
	}
	cmd := exec.Command(bin, n.args...)
	cmd.Env = hermeticEnv(n.env)
	cmd.Dir = n.dataDir
	cmd.Stdout = n.out
	cmd.Stderr = n.out
	setChildAttributes(cmd)
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("start linkraft: %v", err)
	}
	done := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	go func() {
		err := cmd.Wait()
		n.mu.Lock()
		n.waitErr = err
		n.mu.Unlock()
		close(done)
	}()
}

// isLeader, leaderKnown and writable are readiness conditions on a /health
// answer. /health is 200 on a node that serves redirects, with or without a
// leader: a test that writes next waits for writable.
func isLeader(h health) bool    { return h.Role == "leader" }
func leaderKnown(h health) bool { return h.Leader != "" }
func writable(h health) bool    { return h.Writes == "ok" }

// waitLeader waits until the node reports itself as leader.
func (n *node) waitLeader() error { return n.waitReady(isLeader) }

// waitReady polls /health (readiness) until it answers 200 and ready
// accepts the answer, the process exits, or leaderWaitTimeout passes.
func (n *node) waitReady(ready func(health) bool) error { return n.waitHealth("/health", ready) }

// waitLive polls /health/live until it answers 200: the process serves
// HTTP, whether or not it is a member of a cluster yet. For a node that
// waits to be added, /health stays 503 until it is.
func (n *node) waitLive() error {
	return n.waitHealth("/health/live", func(health) bool { return true })
}

func (n *node) waitHealth(path string, ready func(health) bool) error {
	probe := &http.Client{Transport: n.transport, Timeout: time.Second}
	deadline := time.Now().Add(leaderWaitTimeout)
	last := "no answer yet"
	for time.Now().Before(deadline) {
		n.mu.Lock()
		done := n.done
		n.mu.Unlock()
		select {
		case <-done:
			return fmt.Errorf("process exited (%v) before it was ready", n.exitErr())
		default:
		}
		resp, err := probe.Get("http://" + n.httpAddr + path)
		if err != nil {
			last = err.Error()
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var h health
			if resp.StatusCode == http.StatusOK && json.Unmarshal(body, &h) == nil && ready(h) {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v; last %s: %s", leaderWaitTimeout, path, last)
}

func (n *node) exitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.waitErr
}

// kill sends SIGKILL to a running process and waits for it; it does nothing
// when the process has already exited.
func (n *node) kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		n.t.Errorf("node %s pid %d still running 10 s after SIGKILL", n.id, cmd.Process.Pid)
	}
}

// kill9 simulates a crash: SIGKILL, no chance to flush anything.
func (n *node) kill9() {
	n.t.Helper()
	n.kill()
	n.transport.CloseIdleConnections()
	fmt.Fprintf(n.out, "\n=== harness: SIGKILL ===\n")
}

// stop sends SIGTERM and waits (bounded) for a graceful exit; it returns the
// process's exit error (nil for exit status 0).
func (n *node) stop() error {
	n.t.Helper()
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		n.t.Fatalf("SIGTERM node %s: %v", n.id, err)
	}
	select {
	case <-done:
	case <-time.After(stopTimeout):
		n.kill()
		n.t.Fatalf("node %s did not exit within %v of SIGTERM; killed it", n.id, stopTimeout)
	}
	n.transport.CloseIdleConnections()
	fmt.Fprintf(n.out, "\n=== harness: stopped with SIGTERM (%v) ===\n", n.exitErr())
	return n.exitErr()
}

// restart starts the node again with the same flags and data dir and waits
// until it is leader.
func (n *node) restart() {
	n.t.Helper()
	n.restartUntil(isLeader)
}

// restartUntil restarts the node and waits until its /health satisfies
// ready (cluster members wait for a known leader, not for leading).
func (n *node) restartUntil(ready func(health) bool) {
	n.t.Helper()
	n.kill()
	fmt.Fprintf(n.out, "\n=== harness: restart ===\n")
	n.launch()
	if err := n.waitReady(ready); err != nil {
		n.t.Fatalf("node %s after restart: %v", n.id, err)
	}
}

// restartLive kills and relaunches the process and waits only until it
// serves HTTP (/health/live), not until it is ready.
func (n *node) restartLive() {
	n.t.Helper()
	n.kill()
	fmt.Fprintf(n.out, "\n=== harness: restart ===\n")
	n.launch()
	if err := n.waitLive(); err != nil {
		n.t.Fatalf("node %s after restart: %v", n.id, err)
	}
}

// response is an HTTP answer with its body already read.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string {
	body := string(r.body)
	if len(body) > 600 {
		body = body[:600] + "..."
	}
	return fmt.Sprintf("%d %s %q", r.status, r.header.Get("Content-Type"), body)
}

// request sends one HTTP request to the node and reads the whole answer; a
// transport error fails the test.
func (n *node) request(t *testing.T, method, path string, header http.Header, body []byte) response {
	t.Helper()
	r, err := n.tryRequest(t, method, path, header, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// e2eToken is the --admin-token every node starts with unless a test
// says otherwise; requests carry it unless they name a credential.
const e2eToken = "e2e-root-token-3b7d"

// noCredential is a header that makes a request carry no credential.
func noCredential() http.Header { return http.Header{"Authorization": nil} }

// tryRequest is request for the cases where the connection may legitimately
// be cut (a server refusing a huge body before reading it). A request whose
// header has no Authorization or X-Api-Key key carries the node's
// credential; one that has the key carries what it says (nil: nothing).
func (n *node) tryRequest(t *testing.T, method, path string, header http.Header, body []byte) (response, error) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+n.httpAddr+path, rd)
	if err != nil {
		t.Fatalf("build request %s %s: %v", method, path, err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if host := header.Get("Host"); host != "" { // net/http sends req.Host, never the header
		req.Host = host
	}
	n.authorize(req, header)
	resp, err := n.client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("read body: %w", err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

// authorize adds the node's credential to req unless header names one.
func (n *node) authorize(req *http.Request, header http.Header) {
	_, auth := header["Authorization"]
	_, apiKey := header["X-Api-Key"]
	if !auth && !apiKey && n.credential != "" {
		req.Header.Set("Authorization", "Bearer "+n.credential)
	}
}

func (n *node) get(t *testing.T, path string) response {
	t.Helper()
	return n.request(t, http.MethodGet, path, nil, nil)
}

// postJSON posts v as JSON; a string or []byte is sent as is, so tests can
// send malformed JSON.
func (n *node) postJSON(t *testing.T, path string, v any) response {
	t.Helper()
	var body []byte
	switch b := v.(type) {
	case []byte:
		body = b
	case string:
		body = []byte(b)
	default:
		var err error
		if body, err = json.Marshal(v); err != nil {
			t.Fatalf("marshal request body: %v", err)
		}
	}
	return n.request(t, http.MethodPost, path, http.Header{"Content-Type": {"application/json"}}, body)
}

// link is the JSON shape of a link in create, read and list answers.
type link struct {
	ID             int64   `json:"id"`
	ShortCode      string  `json:"short_code"`
	ShortURL       string  `json:"short_url"`
	OriginalURL    string  `json:"original_url"`
	Workspace      string  `json:"workspace"`
	CreatedAt      string  `json:"created_at"`
	ExpiresAt      *string `json:"expires_at"`
	Existing       bool    `json:"existing"`
	ClickCount     int64   `json:"click_count"`
	LastAccessedAt *string `json:"last_accessed_at"`
}

var (
	createFields = []string{"id", "short_code", "short_url", "original_url", "workspace", "created_at", "expires_at"}
	readFields   = append(append([]string{}, createFields...), "click_count", "last_accessed_at")
)

// counterCodePattern is what the default counter strategy hands out at the
// default --code-length.
var counterCodePattern = regexp.MustCompile(`^[0-9A-Za-z]{7}$`)

// decodeObject decodes a JSON object answer and checks it has every field in
// want (null counts as present).
func decodeObject(t *testing.T, r response, want []string, v any) {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &fields); err != nil {
		t.Fatalf("answer is not a JSON object: %v; got %v", err, r)
	}
	for _, f := range want {
		if _, ok := fields[f]; !ok {
			t.Errorf("answer lacks field %q: %v", f, r)
		}
	}
	if v != nil {
		if err := json.Unmarshal(r.body, v); err != nil {
			t.Fatalf("answer fields have the wrong types: %v; got %v", err, r)
		}
	}
}

// checkLinkFields checks the values every link answer must have.
func checkLinkFields(t *testing.T, l link) {
	t.Helper()
	if l.ID <= 0 {
		t.Errorf("link %s: id = %d, want a positive integer", l.ShortCode, l.ID)
	}
	if l.ShortCode == "" {
		t.Errorf("link has an empty short_code")
	}
	checkTimestamp(t, "created_at", l.CreatedAt)
	if l.ExpiresAt != nil {
		checkTimestamp(t, "expires_at", *l.ExpiresAt)
	}
	if l.LastAccessedAt != nil {
		checkTimestamp(t, "last_accessed_at", *l.LastAccessedAt)
	}
}

// checkTimestamp checks an RFC 3339 UTC timestamp and returns it parsed.
func checkTimestamp(t *testing.T, field, value string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		t.Errorf("%s = %q is not RFC 3339: %v", field, value, err)
		return time.Time{}
	}
	if _, offset := ts.Zone(); offset != 0 || !strings.HasSuffix(value, "Z") {
		t.Errorf("%s = %q is not UTC", field, value)
	}
	return ts
}

// createLink posts fields to /api/v1/urls and requires a 201 with a
// well-formed link.
func (n *node) createLink(t *testing.T, fields map[string]any) link {
	t.Helper()
	r := n.postJSON(t, "/api/v1/urls", fields)
	if r.status != http.StatusCreated {
		t.Fatalf("create %v: want 201, got %v", fields, r)
	}
	var l link
	decodeObject(t, r, createFields, &l)
	checkLinkFields(t, l)
	return l
}

// createURL creates a plain counter-strategy link for target.
func (n *node) createURL(t *testing.T, target string) link {
	t.Helper()
	return n.createLink(t, map[string]any{"original_url": target})
}

// problem is an RFC 7807 error body.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Error  string `json:"error"`
}

// requireProblem checks that r is a problem+json answer with status want and
// a message a user can act on.
func requireProblem(t *testing.T, r response, want int) problem {
	t.Helper()
	if r.status != want {
		t.Errorf("status = %d, want %d; answer %v", r.status, want, r)
		return problem{}
	}
	return checkProblemBody(t, r)
}

// checkProblemBody checks the problem+json body of an error answer whatever
// its status.
func checkProblemBody(t *testing.T, r response) problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("Content-Type = %q, want application/problem+json; answer %v", ct, r)
	}
	var p problem
	decodeObject(t, r, []string{"type", "title", "status", "detail", "error"}, &p)
	if p.Status != r.status {
		t.Errorf("problem status = %d, HTTP status = %d", p.Status, r.status)
	}
	if strings.TrimSpace(p.Detail) == "" || strings.TrimSpace(p.Title) == "" {
		t.Errorf("problem has an empty title or detail: %v", r)
	}
	if p.Error != p.Detail {
		t.Errorf("problem error = %q, want it equal to detail %q", p.Error, p.Detail)
	}
	return p
}

// health is the /health answer.
type health struct {
	Status       string `json:"status"`
	Reason       string `json:"reason"`
	Writes       string `json:"writes"`
	WritesReason string `json:"writes_reason"`
	NodeID       string `json:"node_id"`
	Role         string `json:"role"`
	Leader       string `json:"leader"`
	Links        int64  `json:"links"`
	AppliedIndex uint64 `json:"applied_index"`
	Version      string `json:"version"`
}

func (n *node) health(t *testing.T) health {
	t.Helper()
	return n.healthAt(t, "/health")
}

// liveHealth reads /health/live, which has /health's body and is 200 on a
// node that is not (yet) a member of any cluster.
func (n *node) liveHealth(t *testing.T) health {
	t.Helper()
	return n.healthAt(t, "/health/live")
}

func (n *node) healthAt(t *testing.T, path string) health {
	t.Helper()
	r := n.get(t, path)
	if r.status != http.StatusOK {
		t.Fatalf("GET %s: want 200, got %v", path, r)
	}
	var h health
	decodeObject(t, r, []string{"status", "node_id", "role", "leader", "links", "applied_index", "version"}, &h)
	return h
}

// linkCount is the number of links the node reports in /health.
func (n *node) linkCount(t *testing.T) int64 {
	t.Helper()
	return n.health(t).Links
}

// clicks reads the click count of code from /api/v1/urls/{code}/stats.
func (n *node) clicks(t *testing.T, code string) int64 {
	t.Helper()
	r := n.get(t, "/api/v1/urls/"+code+"/stats")
	if r.status != http.StatusOK {
		t.Fatalf("stats of %s: want 200, got %v", code, r)
	}
	var s struct {
		Clicks int64 `json:"clicks"`
	}
	decodeObject(t, r, []string{"clicks"}, &s)
	return s.Clicks
}

// waitClicks polls stats until code shows want clicks (bounded), then
// returns the last count seen.
func (n *node) waitClicks(t *testing.T, code string, want int64) int64 {
	t.Helper()
	deadline := time.Now().Add(clickWaitTimeout)
	for {
		got := n.clicks(t, code)
		if got >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// requireRedirect checks that GET /{code} redirects to target with the
// default 302.
func (n *node) requireRedirect(t *testing.T, code, target string) {
	t.Helper()
	r := n.get(t, "/"+code)
	if r.status != http.StatusFound || r.header.Get("Location") != target {
		t.Errorf("GET /%s: want 302 to %q, got %v Location %q", code, target, r, r.header.Get("Location"))
	}
}

// eventually polls cond every 50 ms until it returns true or timeout passes;
// it returns cond's last verdict.
func eventually(timeout time.Duration, cond func() bool) bool {
	return eventuallyEvery(timeout, 50*time.Millisecond, cond)
}

// eventuallyEvery is eventually, asking every interval.
func eventuallyEvery(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}

// runCommand runs the binary with args (bounded by timeout) and returns its
// combined output and exit error.
func runCommand(t *testing.T, timeout time.Duration, env []string, args ...string) (string, error) {
	t.Helper()
	out := &lockedBuffer{}
	err := runBinary(t, timeout, env, out, out, args...)
	return out.String(), err
}

// runBinary runs the binary with args, bounded by timeout, writing its
// output to stdout and stderr, and returns its exit error.
func runBinary(t *testing.T, timeout time.Duration, env []string, stdout, stderr io.Writer, args ...string) error {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = hermeticEnv(env)
	cmd.Dir = t.TempDir()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	setChildAttributes(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start linkraft %v: %v", args, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		return fmt.Errorf("still running after %v; killed", timeout)
	}
}

// itoa keeps table literals short.
func itoa(i int) string { return strconv.Itoa(i) }

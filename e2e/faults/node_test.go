package faults

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fnode is one linkraft serve process (and its restarts).
type fnode struct {
	id         string
	slot       int // its place in the network (namespace, address)
	ip         string
	httpAddr   string
	gossipAddr string
	argv       []string
	logPath    string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current process exits
	expect  bool          // the harness stopped it on purpose
	crashes []string      // exits the harness did not cause
	exit    error         // the last exit's status
}

// nodeConfig is what every node of a cluster shares.
type nodeConfig struct {
	bin, key, token string
	writeTimeout    time.Duration
	gossip          []string
}

// nodePorts returns HTTP, Raft and gossip addresses for node i: the fixed
// ports on its own namespace address, or free ports on 127.0.0.x.
func nodePorts(env *netEnv, i int) ([3]string, error) {
	var addrs [3]string
	for p := range addrs {
		port := 8080 + p
		if !env.isolated {
			var err error
			if port, err = freePort(env.ips[i]); err != nil {
				return addrs, err
			}
		}
		addrs[p] = net.JoinHostPort(env.ips[i], fmt.Sprint(port))
	}
	return addrs, nil
}

// freePort finds a port free for TCP and UDP on ip.
func freePort(ip string) (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", ip+":0")
		if err != nil {
			return 0, fmt.Errorf("listen on %s: %w", ip, err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		u, err := net.ListenPacket("udp", fmt.Sprintf("%s:%d", ip, port))
		if err == nil {
			u.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port on %s in 50 tries", ip)
}

// newFnode prepares the command line of the node in network slot i (id
// n<i+1>), with its data and log under dir/<id>. It joins the gossip
// addresses in join; expect > 0 passes --bootstrap-expect, 0 leaves the
// default (1), with which a node that has --join never bootstraps: it
// waits for a leader to add it.
func newFnode(dir string, env *netEnv, i int, addrs [3]string, cfg nodeConfig, expect int, join []string) *fnode {
	n := &fnode{id: fmt.Sprintf("n%d", i+1), slot: i, ip: env.ips[i], httpAddr: addrs[0], gossipAddr: addrs[2]}
	dir = filepath.Join(dir, n.id)
	n.logPath = filepath.Join(dir, "node.log")
	args := []string{"serve",
		"--id=" + n.id, "--data-dir=" + filepath.Join(dir, "data"),
		"--http-addr=" + addrs[0], "--raft-addr=" + addrs[1], "--gossip-addr=" + addrs[2],
		"--advertise=" + n.ip, "--join=" + strings.Join(join, ","),
	}
	if expect > 0 {
		args = append(args, fmt.Sprintf("--bootstrap-expect=%d", expect))
	}
	args = append(args, "--create-rate=0",
		"--cluster-key="+cfg.key, "--admin-token="+cfg.token,
		"--write-timeout="+cfg.writeTimeout.String(), "--click-flush-interval=200ms",
		// No load balancer takes the node out here: a stop waits for nothing.
		"--shutdown-drain=0",
	)
	n.argv = env.command(i, cfg.bin, args...)
	return n
}

// launch starts the process; its output is appended to the node's log.
func (n *fnode) launch() error {
	if err := os.MkdirAll(filepath.Dir(n.logPath), 0o755); err != nil {
		return fmt.Errorf("node %s dir: %w", n.id, err)
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("node %s log: %w", n.id, err)
	}
	fmt.Fprintf(logf, "\n=== harness %s: start %s ===\n", time.Now().Format("15:04:05.000"), strings.Join(n.argv, " "))
	cmd := exec.Command(n.argv[0], n.argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The kernel kills the node if the test binary dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start node %s: %w", n.id, err)
	}
	done := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.done, n.expect = cmd, done, false
	n.mu.Unlock()
	go n.wait(cmd, done, logf)
	return nil
}

func (n *fnode) wait(cmd *exec.Cmd, done chan struct{}, logf *os.File) {
	err := cmd.Wait()
	n.mu.Lock()
	if !n.expect {
		n.crashes = append(n.crashes, fmt.Sprintf("%s exited unexpectedly: %v", time.Now().Format("15:04:05.000"), err))
	}
	n.exit = err
	n.mu.Unlock()
	fmt.Fprintf(logf, "\n=== harness %s: exited: %v ===\n", time.Now().Format("15:04:05.000"), err)
	logf.Close()
	close(done)
}

// running reports whether the current process is alive.
func (n *fnode) running() bool {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// signal sends sig to the current process.
func (n *fnode) signal(sig syscall.Signal) error {
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("node %s never started", n.id)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%v to node %s: %w", sig, n.id, err)
	}
	return nil
}

// kill sends SIGKILL (after SIGCONT, in case it is paused) and waits for
// the exit; it does nothing when the process is not running.
func (n *fnode) kill() error {
	n.mu.Lock()
	n.expect = true
	done := n.done
	n.mu.Unlock()
	if !n.running() {
		return nil
	}
	if err := n.signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("node %s still running 10s after SIGKILL", n.id)
	}
}

// stop sends SIGTERM (after SIGCONT, in case it is paused) and waits up
// to timeout for the exit, then kills it. It returns the exit status, or
// an error when the process needed SIGKILL.
func (n *fnode) stop(timeout time.Duration) (string, error) {
	n.mu.Lock()
	n.expect = true
	done := n.done
	n.mu.Unlock()
	if !n.running() {
		return "not running", nil
	}
	_ = n.signal(syscall.SIGCONT)
	if err := n.signal(syscall.SIGTERM); err != nil {
		return "", err
	}
	select {
	case <-done:
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.exit == nil {
			return "exit 0", nil
		}
		return n.exit.Error(), nil
	case <-time.After(timeout):
		err := fmt.Errorf("node %s still running %v after SIGTERM", n.id, timeout)
		if kerr := n.kill(); kerr != nil {
			err = fmt.Errorf("%w; %v", err, kerr)
		}
		return "", err
	}
}

// unexpectedExits returns the exits the harness did not cause.
func (n *fnode) unexpectedExits() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.crashes...)
}

// buildBinary builds cmd/linkraft into a temp dir, or returns
// LINKRAFT_E2E_BINARY when set.
func buildBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("LINKRAFT_E2E_BINARY"); bin != "" {
		return bin
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("module root: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "linkraft")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/linkraft")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/linkraft: %v\n%s", err, out)
	}
	return bin
}

// moduleRoot walks up from the working directory to go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// keygen runs `linkraft keygen`.
func keygen(bin string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "keygen").Output()
	if err != nil {
		return "", fmt.Errorf("linkraft keygen: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

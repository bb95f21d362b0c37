package e2e

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A node run by systemd with Type=notify (deploy/linkraft.service) tells
// the service manager through NOTIFY_SOCKET when it serves and when it
// stops. These tests stand in for systemd: they own the unixgram socket and
// read what the node sends.

// notifyWaitTimeout bounds how long STOPPING=1 may take to show up after
// the process has exited: it was sent before the exit, so it is already in
// the socket's queue and only the reader goroutine has to pick it up.
const notifyWaitTimeout = 5 * time.Second

// notifySocket is a unixgram socket collecting sd_notify messages.
type notifySocket struct {
	path string
	msgs chan string
	seen []string // every message taken from msgs, for failure reports
}

// listenNotify creates the socket in a fresh temporary directory; it is
// closed when the test ends, which also ends its reader.
func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen on notify socket %s: %v", path, err)
	}
	s := &notifySocket{path: path, msgs: make(chan string, 64)}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil { // closed at cleanup
				close(s.msgs)
				return
			}
			select {
			case s.msgs <- string(buf[:n]):
			default: // a test that stopped reading has failed already
			}
		}
	}()
	return s
}

// await returns the first message with the line want (READY=1,
// STOPPING=1). It fails when n's process exits first (unless exitOK) or
// timeout passes.
func (s *notifySocket) await(n *node, want string, timeout time.Duration, exitOK bool) (string, error) {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if exitOK {
		done = nil // a nil channel never fires
	}
	deadline := time.After(timeout)
	for {
		select {
		case msg, ok := <-s.msgs:
			if !ok {
				return "", fmt.Errorf("notify socket closed before %s; got %q", want, s.seen)
			}
			s.seen = append(s.seen, msg)
			if hasLine(msg, want) {
				return msg, nil
			}
		case <-done:
			return "", fmt.Errorf("process exited (%v) before it sent %s; got %q", n.exitErr(), want, s.seen)
		case <-deadline:
			return "", fmt.Errorf("no %s within %v; got %q", want, timeout, s.seen)
		}
	}
}

// hasLine reports whether the newline-separated sd_notify message holds
// the assignment line.
func hasLine(msg, line string) bool {
	for _, l := range strings.Split(msg, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// startNotifying launches a node with NOTIFY_SOCKET set and waits for
// READY=1, retrying with fresh ports when another process took one.
func startNotifying(t *testing.T, s *notifySocket, settings map[string]string) (*node, string) {
	t.Helper()
	n := newNode(t, "node1")
	var ready string
	err := n.launchUntil(t, nodeOptions{Settings: settings}, []string{"NOTIFY_SOCKET=" + s.path}, func() (err error) {
		ready, err = s.await(n, "READY=1", leaderWaitTimeout, false)
		return err
	})
	if err != nil {
		t.Fatalf("node %s: %v", n.id, err)
	}
	return n, ready
}

// requireServingAtReady checks what "systemctl start" relies on: the first
// liveness request after READY=1 succeeds, without a retry, and the status
// line names the HTTP address. READY=1 means the process serves; /health
// (readiness) follows once the node is in a cluster with a leader.
func requireServingAtReady(t *testing.T, n *node, ready string) health {
	t.Helper()
	h, err := n.tryLive()
	if err != nil {
		t.Fatalf("GET /health/live right after READY=1: want 200, got %v", err)
	}
	if h.Status != "alive" || h.NodeID != n.id {
		t.Errorf("GET /health/live right after READY=1: status %q node %q, want alive %s", h.Status, h.NodeID, n.id)
	}
	if !strings.Contains(ready, "\nSTATUS=") || !strings.Contains(ready, n.httpAddr) {
		t.Errorf("READY=1 message %q: want a STATUS= line naming the HTTP address %s", ready, n.httpAddr)
	}
	return h
}

// requireStopping sends SIGTERM and checks that the node announced the
// shutdown and exited cleanly.
func requireStopping(t *testing.T, n *node, s *notifySocket) {
	t.Helper()
	if err := n.stop(); err != nil {
		t.Errorf("exit after SIGTERM: %v, want status 0", err)
	}
	if _, err := s.await(n, "STOPPING=1", notifyWaitTimeout, true); err != nil {
		t.Errorf("after SIGTERM: %v", err)
	}
}

func TestSystemdNotify(t *testing.T) {
	skipIfShort(t)
	t.Parallel()

	t.Run("single", func(t *testing.T) {
		t.Parallel()
		s := listenNotify(t)
		n, ready := startNotifying(t, s, nil)
		requireServingAtReady(t, n, ready)

		// A restart ("systemctl restart") is ready the same way, with its
		// data.
		l := n.createURL(t, "https://example.com/systemd")
		requireStopping(t, n, s)
		n.launch()
		ready, err := s.await(n, "READY=1", leaderWaitTimeout, false)
		if err != nil {
			t.Fatalf("after restart: %v", err)
		}
		requireServingAtReady(t, n, ready)
		if err := n.waitLeader(); err != nil {
			t.Fatalf("after restart: %v", err)
		}
		n.requireRedirect(t, l.ShortCode, "https://example.com/systemd")
		requireStopping(t, n, s)
	})

	// The first VM of a new cluster must not hold "systemctl start" until
	// its peers are up: it serves /health/live (no leader yet) and is ready.
	t.Run("awaiting_peers", func(t *testing.T) {
		t.Parallel()
		s := listenNotify(t)
		n, ready := startNotifying(t, s, map[string]string{
			"bootstrap-expect": "3",
			"join":             fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", freePort(t, true), freePort(t, true)),
		})
		if h := requireServingAtReady(t, n, ready); h.Leader != "" {
			t.Errorf("a node waiting for 2 more peers reports leader %q", h.Leader)
		}
		requireStopping(t, n, s)
	})
}

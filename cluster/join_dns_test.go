package cluster

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// TestJoinFollowsADNSName: a node whose --join seed is a host name joins
// nobody while the name points at a dead address, and once it points at
// two live nodes (and at the node itself) joins both of them: each round
// resolves the name again.
func TestJoinFollowsADNSName(t *testing.T) {
	t.Parallel()
	port := sharedGossipPort(t, "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
	at := func(ip string) string { return net.JoinHostPort(ip, port) }
	r := newFakeResolver()
	r.set("linkraft.test", "127.0.0.4", "127.0.0.5") // nothing listens at .4; .5 is the joining node itself

	a := openGossipNode(t, "a", at("127.0.0.2"), func(c *Config) {}) // a cluster of one
	waitFor(t, a.IsLeader)
	c := openGossipNode(t, "c", at("127.0.0.3"), func(c *Config) { c.Discovery.BootstrapExpect = 2 }) // waits, alone
	b := openGossipNode(t, "b", at("127.0.0.5"), func(c *Config) {
		c.Discovery.Seeds = []string{"linkraft.test:" + port}
		c.Discovery.Resolver = r
	})

	// Two rounds have tried the dead address: still alone.
	waitWithin(t, 30*time.Second, func() bool { return r.count("linkraft.test") >= 2 })
	if got := memberNames(b); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("b's gossip members while the name points at a dead address: %v, want only b", got)
	}

	r.set("linkraft.test", "127.0.0.2", "127.0.0.3", "127.0.0.2", "127.0.0.5")
	// c has no seeds and a knows nobody: b sees both only by joining both.
	all := []string{"a", "b", "c"}
	waitWithin(t, 30*time.Second, func() bool { return slices.Equal(memberNames(b), all) })
	waitWithin(t, 30*time.Second, func() bool { return slices.Equal(memberNames(c), all) })
	// And a's leader adds the servers it now sees.
	waitWithin(t, 30*time.Second, func() bool {
		servers, err := configuration(a.raft)
		return err == nil && len(servers) == 3
	})
}

// failureLog is a node's logger whose lines, debug included, are shown
// only when the test fails: a cluster test's failure then says what each
// node did.
func failureLog(t *testing.T, id string) *slog.Logger {
	var mu sync.Mutex
	var buf bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("log of %s:\n%s", id, buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// openGossipNode starts a node with gossip on gossipAddr.
func openGossipNode(t *testing.T, id, gossipAddr string, tweak func(*Config)) *Node {
	t.Helper()
	host, _, err := net.SplitHostPort(gossipAddr)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := ln.Addr().String()
	ln.Close()
	cfg := Config{
		ID:         id,
		DataDir:    t.TempDir(),
		RaftAddr:   raftAddr,
		GossipAddr: gossipAddr,
		HTTPAddr:   raftAddr,
		Key:        testKey(t),
		Logger:     failureLog(t, id),
		Raft:       RaftConfig{LogLevel: "off"},
		Writes:     WriteConfig{ClickFlushInterval: time.Hour},
	}
	tweak(&cfg)
	n, err := Open(cfg, fsm.New())
	if err != nil {
		t.Fatalf("open %s: %v", id, err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// sharedGossipPort finds a port free for TCP and UDP on every one of ips: a
// DNS name gives addresses, and its --join entry one port for all of them.
func sharedGossipPort(t *testing.T, ips ...string) string {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
		if err != nil {
			t.Fatal(err)
		}
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		if err := portFree(ips, port); err == nil {
			return port
		}
	}
	t.Fatalf("no port free on all of %v", ips)
	return ""
}

func portFree(ips []string, port string) error {
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	for _, ip := range ips {
		addr := net.JoinHostPort(ip, port)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("tcp %s: %w", addr, err)
		}
		closers = append(closers, ln)
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return fmt.Errorf("udp %s: %w", addr, err)
		}
		closers = append(closers, pc)
	}
	return nil
}

// memberNames are the names of n's live gossip members, sorted.
func memberNames(n *Node) []string {
	var names []string
	for _, m := range n.gossip.liveMembers() {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

// waitWithin polls cond for up to d.
func waitWithin(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not reached in %v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

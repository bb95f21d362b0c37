package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// TestQuickStartNodeIsClosed: a node started as the README's quick start
// starts it, with no key flag, makes a cluster key at its first start, so
// another process on the same host is no more a peer than one across the
// network. Each attack worked against such a node when it ran keyless on
// loopback: the cluster port answered internal requests in clear (a
// link's bcrypt hash included), a forged AppendEntries unseated the
// leader, and a keyless gossip member joined.
func TestQuickStartNodeIsClosed(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{ID: "quickstart"})
	l := n.createURL(t, "https://example.com/quickstart/kept")

	t.Run("an internal request in clear on the cluster port gets no answer", func(t *testing.T) {
		for _, path := range []string{"/internal/v1/node", "/internal/v1/links/" + l.ShortCode} {
			if line := clearInternalRequest(t, n.raftAddr, path); strings.HasPrefix(line, "HTTP/") {
				t.Errorf("GET %s in clear on the cluster port was answered: %q", path, line)
			}
		}
	})

	t.Run("a forged AppendEntries over plain TCP does not unseat it", func(t *testing.T) {
		before := n.clusterView(t)
		if err := forgeAppendEntries(n.raftAddr, n.id, before.Term+100); err == nil {
			t.Error("the forged AppendEntries was answered")
		}
		if after := n.clusterView(t); after.Role != "leader" || after.Term != before.Term {
			t.Fatalf("after the forged RPC the node is %s in term %d (was leader in %d)", after.Role, after.Term, before.Term)
		}
	})

	t.Run("a gossip member without the key cannot join", func(t *testing.T) {
		rogue := keylessGossipMember(t)
		if joined, err := rogue.Join([]string{n.gossipAddr}); err == nil || joined != 0 {
			t.Fatalf("a keyless memberlist joined the node's gossip (%d contacted, err %v)", joined, err)
		} else {
			t.Logf("keyless join: %v", err)
		}
		if members := rogue.NumMembers(); members != 1 {
			t.Fatalf("the keyless member knows %d members, want only itself", members)
		}
	})

	keyFile := filepath.Join(n.dataDir, "cluster.key")
	key := readClusterKey(t, keyFile)
	t.Run("the key is in the data dir, owner-only, and the log names the file, never the key", func(t *testing.T) {
		requireOwnerOnly(t, keyFile)
		out := n.out.String()
		if !strings.Contains(out, keyFile) {
			t.Errorf("the log does not name %s:\n%s", keyFile, out)
		}
		if strings.Contains(out, key) {
			t.Errorf("the log shows the cluster key")
		}
	})

	t.Run("a restart keeps the key and the cluster", func(t *testing.T) {
		n.restart()
		if got := readClusterKey(t, keyFile); got != key {
			t.Fatal("the restart made a new cluster key")
		}
		n.requireRedirect(t, l.ShortCode, l.OriginalURL)
		n.createURL(t, "https://example.com/quickstart/after-restart")
		if strings.Contains(n.out.String(), key) {
			t.Errorf("the log shows the cluster key after the restart")
		}
	})
}

// TestNodesShareOneKeyFile: three nodes started together with the same
// --cluster-key-file that does not exist yet (the Procfile) agree on one
// key: the first makes the file, the others read it, and they form one
// cluster.
func TestNodesShareOneKeyFile(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	keyFile := filepath.Join(t.TempDir(), "shared", "cluster.key")
	nodes := startCluster(t, 3, map[string]string{"cluster-key-file": keyFile})
	leader, _ := waitOneLeader(t, leaderWaitTimeout, nodes...)
	leader.waitServers(t, membershipWait, nodeIDs(nodes...)...)
	requireOwnerOnly(t, keyFile)
	key := readClusterKey(t, keyFile)
	for _, n := range nodes {
		if strings.Contains(n.out.String(), key) {
			t.Errorf("%s's log shows the cluster key", n.id)
		}
		n.createURL(t, "https://example.com/shared-key/"+n.id)
	}
	entries, err := os.ReadDir(filepath.Dir(keyFile))
	if err != nil || len(entries) != 1 {
		t.Errorf("the key file's directory holds %d entries (%v), want the key alone: no temporary file left", len(entries), err)
	}
}

// clearInternalRequest sends GET path with the internal marker, in clear,
// to a cluster port and returns the first line of whatever comes back.
func clearInternalRequest(t *testing.T, raftAddr, path string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", raftAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprintf(conn, "\xf1GET %s HTTP/1.1\r\nHost: x\r\nX-Linkraft-Forwarded: n2\r\n\r\n", path)
	line, _ := bufio.NewReader(conn).ReadString('\n')
	return line
}

// forgeAppendEntries sends one AppendEntries over hashicorp/raft's plain
// TCP transport, as a leader "rogue" in term.
func forgeAppendEntries(raftAddr, id string, term uint64) error {
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 2*time.Second, io.Discard)
	if err != nil {
		return fmt.Errorf("plain transport: %w", err)
	}
	defer trans.Close()
	var resp raft.AppendEntriesResponse
	return trans.AppendEntries(raft.ServerID(id), raft.ServerAddress(raftAddr), &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ID: []byte("rogue"), Addr: []byte(trans.LocalAddr())},
		Term:      term,
		Leader:    []byte(trans.LocalAddr()),
	}, &resp)
}

// keylessGossipMember is a memberlist on loopback without a secret key.
func keylessGossipMember(t *testing.T) *memberlist.Memberlist {
	t.Helper()
	conf := memberlist.DefaultLocalConfig()
	conf.Name = "rogue"
	conf.BindAddr = "127.0.0.1"
	conf.BindPort = freePort(t, true)
	conf.AdvertisePort = conf.BindPort
	conf.LogOutput = io.Discard
	list, err := memberlist.Create(conf)
	if err != nil {
		t.Fatalf("keyless memberlist: %v", err)
	}
	t.Cleanup(func() { list.Shutdown() })
	return list
}

// readClusterKey returns the key a node keeps in path, once it is there.
func readClusterKey(t *testing.T, path string) string {
	t.Helper()
	var key []byte
	if !eventually(10*time.Second, func() bool {
		b, err := os.ReadFile(path)
		key = bytes.TrimSpace(b)
		return err == nil && len(key) > 0
	}) {
		t.Fatalf("no cluster key in %s", path)
	}
	return string(key)
}

// requireOwnerOnly fails the test unless path is readable by its owner only.
func requireOwnerOnly(t *testing.T, path string) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Errorf("%s has mode %o, want 600", path, mode)
	}
}

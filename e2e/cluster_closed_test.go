package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestClosedCluster: with a cluster key, nothing but key holders takes
// part in the cluster, and the node-to-node protocol is not on the public
// port. Each attack was tried against earlier versions and worked there.
func TestClosedCluster(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, map[string]string{"cluster-key": newClusterKey(t)})
	leader, _ := waitOneLeader(t, leaderWaitTimeout, nodes...)
	l := nodes[1].createURL(t, "https://example.com/closed/existing")
	want := strings.Join(nodeIDs(nodes...), ",")

	t.Run("the public port answers 404 under /internal/v1/", func(t *testing.T) {
		header := http.Header{"X-Linkraft-Forwarded": {"n2"}, "Content-Type": {"application/json"}}
		body := []byte(`{"v":1,"items":[{"url":"javascript:alert(document.domain)","workspace":"default","custom_code":"jsx","code_length":7}]}`)
		for _, n := range nodes {
			for _, path := range []string{"/internal/v1/node", "/internal/v1/read-index", "/internal/v1/applied?index=0"} {
				if r := n.request(t, "GET", path, header, nil); r.status != http.StatusNotFound {
					t.Errorf("%s GET %s: %v, want 404", n.id, path, r)
				}
			}
			if r := n.request(t, "POST", "/internal/v1/creates", header, body); r.status != http.StatusNotFound {
				t.Errorf("%s POST /internal/v1/creates: %v, want 404", n.id, r)
			}
		}
		if r := leader.get(t, "/jsx"); r.status != http.StatusNotFound {
			t.Errorf("GET /jsx after the injection attempts: %v, want 404", r)
		}
	})

	t.Run("a forged AppendEntries over plain TCP does not unseat the leader", func(t *testing.T) {
		before := leader.clusterView(t)
		trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 2*time.Second, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		defer trans.Close()
		var resp raft.AppendEntriesResponse
		err = trans.AppendEntries(raft.ServerID(leader.id), raft.ServerAddress(leader.raftAddr), &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ID: []byte("rogue"), Addr: []byte(trans.LocalAddr())},
			Term:      before.Term + 100,
			Leader:    []byte(trans.LocalAddr()),
		}, &resp)
		if err == nil {
			t.Fatalf("the forged AppendEntries was answered: %+v", resp)
		}
		t.Logf("forged AppendEntries: %v", err)
		// The RPC has failed: had the leader read it, it would have
		// stepped down before answering.
		after := leader.clusterView(t)
		if after.Role != "leader" || after.Term != before.Term {
			t.Fatalf("after the forged RPC the leader is %s in term %d (was leader in %d)", after.Role, after.Term, before.Term)
		}
	})

	t.Run("an internal request sent in clear to the cluster port gets no answer", func(t *testing.T) {
		// What an old, signed request looked like on the wire; with TLS
		// there is nothing to capture, and clear text is not spoken.
		for _, first := range []string{"", "\xf1"} {
			conn, err := net.DialTimeout("tcp", leader.raftAddr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			conn.SetDeadline(time.Now().Add(15 * time.Second))
			fmt.Fprintf(conn, "%sGET /internal/v1/read-index HTTP/1.1\r\nHost: x\r\nX-Linkraft-Forwarded: n2\r\n\r\n", first)
			if line, _ := bufio.NewReader(conn).ReadString('\n'); strings.HasPrefix(line, "HTTP/") {
				t.Errorf("the cluster port answered a clear-text request: %q", line)
			}
			conn.Close()
		}
	})

	t.Run("a gossip member without the key is never added and gets no links", func(t *testing.T) {
		var seeds []string
		for _, n := range nodes {
			seeds = append(seeds, n.gossipAddr)
		}
		// Given no key, the rogue makes its own: it holds no key of the
		// cluster's.
		rogue := launchNode(t, "rogue", "", map[string]string{"join": strings.Join(seeds, ","), "write-timeout": "2s"})
		if err := rogue.waitLive(); err != nil {
			t.Fatalf("rogue: %v", err)
		}
		// A negative can only be watched for a while: several of the
		// leader's reconciliation passes (every 2 s) and gossip rounds.
		deadline := time.Now().Add(6 * time.Second)
		for time.Now().Before(deadline) {
			if got := strings.Join(leader.clusterView(t).ids(), ","); got != want {
				t.Fatalf("the cluster lists %s, want exactly %s", got, want)
			}
			if h := rogue.liveHealth(t); h.Leader != "" || h.Links != 0 {
				t.Fatalf("the rogue learnt leader %q and %d links", h.Leader, h.Links)
			}
			time.Sleep(250 * time.Millisecond)
		}
		if r := rogue.get(t, "/"+l.ShortCode); r.status != http.StatusNotFound {
			t.Fatalf("the rogue answers %s: %v, want 404", l.ShortCode, r)
		}
	})

	for _, n := range nodes {
		n.requireRedirect(t, l.ShortCode, l.OriginalURL)
		n.createURL(t, "https://example.com/closed/after/"+n.id)
	}
}

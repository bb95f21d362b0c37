package cluster

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
)

// TestAdvertiseIP: memberlist takes only an IP, so a host name given as
// --advertise (a container's service name) is resolved first.
func TestAdvertiseIP(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"10.0.0.7":    "10.0.0.7",
		"[fd00::1]":   "fd00::1",
		"fd00::1":     "fd00::1",
		"localhost":   "127.0.0.1",
		"127.0.0.1":   "127.0.0.1",
		"192.168.1.1": "192.168.1.1",
	} {
		got, err := advertiseIP(in)
		if err != nil || got != want {
			t.Errorf("advertiseIP(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got, err := advertiseIP("no-such-host.invalid"); err == nil {
		t.Errorf("advertiseIP of an unresolvable name = %q, want an error", got)
	}
}

// TestNodeInfoWhileTheNodeOpens: a peer asks a node who it is (GET node,
// which names its gossip address) from the moment its cluster port
// accepts, while it is still opening; every answer names the node, and
// once open, its gossip address. Under the race detector it fails when
// the port answers before the node's gossip is in place.
func TestNodeInfoWhileTheNodeOpens(t *testing.T) {
	t.Parallel()
	asker := openNode(t, t.TempDir())
	raftAddr := freeAddr(t)
	stop := make(chan struct{})
	answered := make(chan int, 1)
	go func() {
		n := 0
		defer func() { answered <- n }()
		for range 5000 { // bounded: the node opens in well under 5000 round trips
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			var info wire.NodeInfo
			err := asker.peers.Call(ctx, raftAddr, fasthttp.MethodGet, wire.PathNode, nil, &info)
			cancel()
			if err == nil {
				if info.ID != "opening" {
					t.Errorf("the opening node answered as %q", info.ID)
				}
				n++
			}
		}
	}()
	// Asking stops before the test ends, even when opening fails.
	stopAsking := sync.OnceValue(func() int { close(stop); return <-answered })
	t.Cleanup(func() { stopAsking() })
	gossipAddr := net.JoinHostPort("127.0.0.1", sharedGossipPort(t, "127.0.0.1"))
	n := openGossipNode(t, "opening", gossipAddr, func(c *Config) { c.RaftAddr = raftAddr })
	t.Logf("answered %d times while opening", stopAsking())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var info wire.NodeInfo
	if err := asker.peers.Call(ctx, raftAddr, fasthttp.MethodGet, wire.PathNode, nil, &info); err != nil {
		t.Fatal(err)
	}
	if info.ID != "opening" || info.GossipAddr != n.gossip.advertised() {
		t.Fatalf("the open node answered %+v, want its id and gossip address %s", info, n.gossip.advertised())
	}
}

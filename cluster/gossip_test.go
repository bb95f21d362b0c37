package cluster

import (
	"context"
	"errors"
	"log/slog"
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

// TestNodeInfoWhileTheNodeOpens: a peer that asks a node who it is (GET
// node, which names its gossip address) while the node is still opening,
// its cluster port accepting but Open not returned, is answered with the
// node's id and its gossip address: the port serves only once gossip is in
// place. Open is held, through its logger, at its bootstrap (the port
// listens, neither gossip nor the service runs yet) until the peer's
// connection is in, so the question is asked during Open on every run.
// Under the race detector it also fails when the port serves before the
// node's gossip is in place.
func TestNodeInfoWhileTheNodeOpens(t *testing.T) {
	t.Parallel()
	asker := openNode(t, t.TempDir())
	raftAddr := freeAddr(t)
	hold := &holdingHandler{at: "bootstrapped a single-voter cluster", held: make(chan struct{}), release: make(chan struct{})}
	opened := make(chan struct{})
	type answer struct {
		info wire.NodeInfo
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		select {
		case <-hold.held:
		case <-opened:
			answered <- answer{err: errors.New("the node opened without logging its bootstrap: nothing held it open to be asked")}
			return
		}
		// Open goes on once the connection is in (or could not be made).
		defer hold.let()
		peer := wire.NewClient("asker", func(addr string, timeout time.Duration) (net.Conn, error) {
			conn, err := asker.layer.DialInternal(addr, timeout)
			hold.let()
			return conn, err
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var info wire.NodeInfo
		err := peer.Call(ctx, raftAddr, fasthttp.MethodGet, wire.PathNode, nil, &info)
		answered <- answer{info, err}
	}()
	gossipAddr := net.JoinHostPort("127.0.0.1", sharedGossipPort(t, "127.0.0.1"))
	n := openGossipNode(t, "opening", gossipAddr, func(c *Config) {
		c.RaftAddr = raftAddr
		c.Logger = slog.New(hold)
	})
	close(opened)
	var during answer
	select {
	case during = <-answered:
	case <-time.After(15 * time.Second):
		t.Fatal("the question asked while the node opened got no answer nor error in 15 s")
	}
	if during.err != nil {
		t.Fatalf("asked while the node opened: %v", during.err)
	}
	if during.info.ID != "opening" || during.info.GossipAddr != n.gossip.advertised() {
		t.Errorf("asked while the node opened, it answered %+v; want its id and gossip address %s", during.info, n.gossip.advertised())
	}

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

// holdingHandler is a node's logger that discards every record and holds
// the one whose message is at (held closes) until let is called, or for
// 10 s at most: a way to stop Open at a known point without a hook in it.
type holdingHandler struct {
	at      string
	held    chan struct{}
	release chan struct{}
	once    sync.Once
	letOnce sync.Once
}

func (h *holdingHandler) let() { h.letOnce.Do(func() { close(h.release) }) }

func (h *holdingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *holdingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != h.at {
		return nil
	}
	h.once.Do(func() {
		close(h.held)
		select {
		case <-h.release:
		case <-time.After(10 * time.Second):
		}
	})
	return nil
}

func (h *holdingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *holdingHandler) WithGroup(string) slog.Handler { return h }

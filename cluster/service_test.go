package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
)

// serveInternal runs one request through a node's internal handler as if
// it came from remote.
func serveInternal(n *Node, remote net.IP, method, uri string, body []byte, forwardedBy string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: remote, Port: 4000}, nil)
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(uri)
	ctx.Request.SetBody(body)
	if forwardedBy != "" {
		ctx.Request.Header.Set(wire.ForwardedHeader, forwardedBy)
	}
	n.service.protocol(&ctx)
	return &ctx
}

func TestInternalHandler(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir())
	l := createURL(t, n, "https://example.com/internal")
	stranger, peer := net.IPv4(10, 9, 8, 7), net.IPv4(127, 0, 0, 1) // peer: the host of a configured server

	clicks := fsm.ClickBatch{Node: "n9", Seq: 1, Now: 1, Counts: []fsm.ClickCount{{Code: l.Code, Count: 3}}}.Encode()
	leave, _ := json.Marshal(wire.LeaveRequest{V: wire.Version, ID: "n9"})
	tests := []struct {
		name        string
		remote      net.IP
		forwardedBy string
		method, uri string
		body        []byte
		status      int
		answer      string // a fragment of the body
	}{
		{"anyone may ask who a node is", stranger, "", "GET", wire.PathNode, nil, 200, `"id":"n1"`},
		{"read index from a peer", peer, "n2", "GET", wire.PathReadIndex, nil, 200, `"index":`},
		{"link from a peer", peer, "n2", "GET", wire.PathLinks + l.Code, nil, 200, `"url":"https://example.com/internal"`},
		{"unknown link", peer, "n2", "GET", wire.PathLinks + "nope", nil, 200, `"found":false`},
		{"clicks from a peer", peer, "n2", "POST", wire.PathClicks, clicks, 200, `"applied":true`},
		{"clicks not a batch", peer, "n2", "POST", wire.PathClicks, fsm.DeleteCommand{Code: l.Code}.Encode(), 400, "not a click batch"},
		{"leave for another node", peer, "n2", "POST", wire.PathLeave, leave, 403, "its own removal"},
		{"leave of an unknown server", peer, "n9", "POST", wire.PathLeave, leave, 404, ""},
		{"leave with a newer protocol", peer, "n9", "POST", wire.PathLeave, []byte(`{"v":2,"id":"n9"}`), 400, "protocol version 2"},
		{"wrong method", peer, "n2", "POST", wire.PathReadIndex, nil, 405, ""},
		{"unknown endpoint", peer, "n2", "GET", wire.Prefix + "nothing", nil, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := serveInternal(n, tt.remote, tt.method, tt.uri, tt.body, tt.forwardedBy)
			if got := ctx.Response.StatusCode(); got != tt.status || !strings.Contains(string(ctx.Response.Body()), tt.answer) {
				t.Fatalf("got %d %s, want %d with %q", got, ctx.Response.Body(), tt.status, tt.answer)
			}
		})
	}
	if got, _ := n.FSM().Get(l.Code); got.Clicks != 3 {
		t.Fatalf("clicks after the peer's batch: %d, want 3", got.Clicks)
	}
}

func TestLookupConfirmsMisses(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir())
	l := createURL(t, n, "https://example.com/looked-up")
	ctx := context.Background()
	if got, err := n.Lookup(ctx, l.Code); err != nil || got.URL != l.URL {
		t.Fatalf("lookup of an existing code: %+v, %v", got, err)
	}
	if _, err := n.Lookup(ctx, "missing"); !errors.Is(err, fsm.ErrNotFound) {
		t.Fatalf("lookup of a missing code: %v, want a confirmed not-found", err)
	}
	if _, err := n.Propose(ctx, fsm.DeleteCommand{Code: l.Code, Now: time.Now().UnixMilli()}, ProposeOptions{Visible: true}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := n.Lookup(ctx, l.Code); !errors.Is(err, fsm.ErrNotFound) {
		t.Fatalf("lookup right after delete: %v, want not-found", err)
	}
}

func TestBroadcastWakesEveryWaiter(t *testing.T) {
	t.Parallel()
	var b broadcast
	waiters := []<-chan struct{}{b.wait(), b.wait(), b.wait()}
	b.notify()
	for i, w := range waiters {
		select {
		case <-w:
		default:
			t.Fatalf("waiter %d not woken", i)
		}
	}
	select {
	case <-b.wait():
		t.Fatal("a wait that started after the notify is already over")
	default:
	}
}

func TestWaitAppliedFollowsTheFSM(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir())
	createURL(t, n, "https://example.com/first")
	next := n.machine.appliedIndex() + 1
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- n.machine.waitApplied(ctx, next)
	}()
	createURL(t, n, "https://example.com/second")
	if err := <-done; err != nil {
		t.Fatalf("wait for index %d: %v (applied %d)", next, err, n.machine.appliedIndex())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := n.machine.waitApplied(ctx, n.machine.appliedIndex()+100); err == nil {
		t.Fatal("waitApplied returned for an index nothing applied")
	}
}

// TestClusterPortLimitsProtocolBodies: the cluster port's server streams
// bodies and does not measure streamed ones, so the protocol's limit is
// its handler's: a body over wire.MaxBodyBytes, announced or chunked, is
// refused and applies nothing (a 413, or the connection cut while the
// sender still writes what the node will not read), and one longer than
// what fasthttp reads with the header is read whole and applied.
func TestClusterPortLimitsProtocolBodies(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir())
	l := createURL(t, n, "https://example.com/port")
	counts := []fsm.ClickCount{{Code: l.Code, Count: 2}}
	for i := range 2000 {
		counts = append(counts, fsm.ClickCount{Code: fmt.Sprintf("absent%05d", i), Count: 1})
	}
	batch := fsm.ClickBatch{Node: "n9", Seq: 1, Now: 1, Counts: counts}.Encode()
	if len(batch) <= 8<<10 {
		t.Fatalf("a batch of %d bytes is read with the header; the test needs a longer one", len(batch))
	}
	oversized := append(append([]byte{}, batch...), make([]byte, wire.MaxBodyBytes)...)
	send := func(body []byte, chunked bool) (int, string, error) {
		t.Helper()
		var req fasthttp.Request
		var resp fasthttp.Response
		req.Header.SetMethod("POST")
		req.SetRequestURI("http://" + n.cfg.RaftAddr + wire.PathClicks)
		if chunked {
			req.SetBodyStream(bytes.NewReader(body), -1)
		} else {
			req.SetBody(body)
		}
		err := n.peers.Do(n.cfg.RaftAddr, &req, &resp, time.Now().Add(10*time.Second))
		return resp.StatusCode(), string(resp.Body()), err
	}
	for _, chunked := range []bool{false, true} {
		if status, answer, err := send(oversized, chunked); err == nil && status != fasthttp.StatusRequestEntityTooLarge {
			t.Fatalf("a body of %d bytes (chunked %v): %d %s, want 413", len(oversized), chunked, status, answer)
		}
	}
	if got, _ := n.FSM().Get(l.Code); got.Clicks != 0 {
		t.Fatalf("an oversized batch applied %d clicks", got.Clicks)
	}
	if status, answer, err := send(batch, true); err != nil || status != fasthttp.StatusOK || !strings.Contains(answer, `"applied":true`) {
		t.Fatalf("a batch of %d bytes: %d %s %v", len(batch), status, answer, err)
	}
	if got, _ := n.FSM().Get(l.Code); got.Clicks != 2 {
		t.Fatalf("clicks after the batch: %d, want 2", got.Clicks)
	}
}

// fakeProtocolNode stands in for the node behind a peerService: a leader
// or not, which records what the service asked of it.
type fakeProtocolNode struct {
	leader      bool
	applied     [][]byte // entries given to applyEntry
	removed     []string // ids given to removeServer
	leaderIndex uint64   // the last index given to noteLeaderIndex
	// givenRequest: a handler handed the node its RequestCtx as a context.
	givenRequest bool
}

// waited notes what a handler handed the node to wait with.
func (f *fakeProtocolNode) waited(ctx context.Context) {
	if _, ok := ctx.(*fasthttp.RequestCtx); ok {
		f.givenRequest = true
	}
}

func (f *fakeProtocolNode) protocolNode() protocolNode {
	return protocolNode{
		info: func() wire.NodeInfo {
			return wire.NodeInfo{V: wire.Version, ID: "n1", Cluster: "c1", EntryLevel: fsm.EntryLevel}
		},
		readIndex: func(ctx context.Context) (uint64, error) { f.waited(ctx); return 7, nil },
		link:      func(string) (fsm.Link, bool) { return fsm.Link{}, false },
		isLeader:  func() bool { return f.leader },
		applyEntry: func(entry []byte) (any, uint64, error) {
			f.applied = append(f.applied, entry)
			return true, 8, nil
		},
		removeServer:    func(id string) error { f.removed = append(f.removed, id); return nil },
		appliedIndex:    func() uint64 { return 7 },
		waitApplied:     func(ctx context.Context, _ uint64) error { f.waited(ctx); return nil },
		noteLeaderIndex: func(index uint64) { f.leaderIndex = index },
		creates:         func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("creates") },
	}
}

// TestPeerService: the cluster port's handlers answer from what the node
// gives them, and refuse what they must before asking it for anything.
func TestPeerService(t *testing.T) {
	t.Parallel()
	clicks := fsm.ClickBatch{Node: "n2", Seq: 1, Now: 1, Counts: []fsm.ClickCount{{Code: "abc", Count: 3}}}.Encode()
	leave, _ := json.Marshal(wire.LeaveRequest{V: wire.Version, ID: "n9"})
	tests := []struct {
		name         string
		leader       bool
		method, uri  string
		body         []byte
		forwardedBy  string
		status       int
		answer       string // a fragment of the body
		applied      int    // entries the node was given
		removed      int    // servers the node was asked to remove
		leaderIndex  uint64 // what the node was told the leader applied
		forwardedSet bool   // whether ServeForwarded registered a handler
	}{
		{name: "node info", method: "GET", uri: wire.PathNode, status: 200, answer: `"id":"n1","cluster_id":"c1"`},
		{name: "read index", method: "GET", uri: wire.PathReadIndex, status: 200, answer: `"index":7`},
		{name: "unknown link", method: "GET", uri: wire.PathLinks + "a/b", status: 200, answer: `"found":false`},
		{name: "clicks on the leader", leader: true, method: "POST", uri: wire.PathClicks, body: clicks, status: 200, answer: `"applied":true`, applied: 1},
		{name: "clicks not a batch", leader: true, method: "POST", uri: wire.PathClicks, body: fsm.DeleteCommand{Code: "abc"}.Encode(), status: 400, answer: "not a click batch"},
		{name: "clicks on a follower", method: "POST", uri: wire.PathClicks, body: clicks, status: 503, answer: ErrNoLeader.Error()},
		{name: "leave for another node", leader: true, method: "POST", uri: wire.PathLeave, body: leave, forwardedBy: "n2", status: 403, answer: "its own removal"},
		{name: "leave", leader: true, method: "POST", uri: wire.PathLeave, body: leave, forwardedBy: "n9", status: 200, removed: 1},
		{name: "applied of no index", method: "GET", uri: wire.PathApplied + "?index=x", status: 400, answer: "log index"},
		{name: "applied", method: "GET", uri: wire.PathApplied + "?index=9", status: 200, answer: `"index":7`, leaderIndex: 9},
		{name: "creates", method: "POST", uri: wire.PathCreates, status: 200, answer: "creates"},
		{name: "forwarded before ServeForwarded", method: "DELETE", uri: "/abc", status: 503, answer: "forwarded requests"},
		{name: "forwarded", method: "DELETE", uri: "/abc", status: 200, answer: "forwarded by a peer", forwardedSet: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &fakeProtocolNode{leader: tt.leader}
			s := newPeerService(node.protocolNode(), slog.New(slog.DiscardHandler))
			if tt.forwardedSet {
				h := fasthttp.RequestHandler(func(ctx *fasthttp.RequestCtx) {
					ctx.SetBodyString(fmt.Sprintf("forwarded by a peer: %v", FromPeer(ctx)))
				})
				s.forwarded.Store(&h)
			}
			var ctx fasthttp.RequestCtx
			ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000}, nil)
			ctx.Request.Header.SetMethod(tt.method)
			ctx.Request.SetRequestURI(tt.uri)
			ctx.Request.SetBody(tt.body)
			if tt.forwardedBy != "" {
				ctx.Request.Header.Set(wire.ForwardedHeader, tt.forwardedBy)
			}
			s.server.Handler(&ctx)
			if got := ctx.Response.StatusCode(); got != tt.status || !strings.Contains(string(ctx.Response.Body()), tt.answer) {
				t.Fatalf("got %d %s, want %d with %q", got, ctx.Response.Body(), tt.status, tt.answer)
			}
			if len(node.applied) != tt.applied || len(node.removed) != tt.removed || node.leaderIndex != tt.leaderIndex {
				t.Fatalf("the node applied %d entries, removed %v, was told index %d; want %d, %d servers, %d",
					len(node.applied), node.removed, node.leaderIndex, tt.applied, tt.removed, tt.leaderIndex)
			}
			if node.givenRequest {
				t.Fatal("the handler handed the node its request as the context to wait with")
			}
			if tt.forwardedSet && !strings.HasSuffix(string(ctx.Response.Body()), "true") {
				t.Fatalf("a forwarded request is not a peer's: %s", ctx.Response.Body())
			}
		})
	}
}

// TestPeerServiceCopiesClicks: the entry applied is the batch's bytes in a
// buffer of its own, since Raft keeps it while fasthttp reuses the body's.
func TestPeerServiceCopiesClicks(t *testing.T) {
	t.Parallel()
	node := &fakeProtocolNode{leader: true}
	s := newPeerService(node.protocolNode(), slog.New(slog.DiscardHandler))
	batch := fsm.ClickBatch{Node: "n2", Seq: 1, Now: 1, Counts: []fsm.ClickCount{{Code: "abc", Count: 1}}}.Encode()
	if applied, err := s.applyClicks(batch); err != nil || !applied {
		t.Fatalf("applyClicks: %v, %v", applied, err)
	}
	if len(node.applied) != 1 || !bytes.Equal(node.applied[0], batch) || &node.applied[0][0] == &batch[0] {
		t.Fatalf("applied %q, want a copy of %q", node.applied, batch)
	}
}

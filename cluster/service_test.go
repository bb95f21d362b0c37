package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	n.internalHandler()(&ctx)
	return &ctx
}

func TestInternalHandler(t *testing.T) {
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

package cluster

import (
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// TestAddressBook: a live member's claim is where a server is dialled;
// this node is where it listens itself; a claim two members make, one
// from another cluster or one that is not host:port is not believed; a
// forgotten member falls back to the configuration.
func TestAddressBook(t *testing.T) {
	t.Parallel()
	cluster := "c1"
	b := newAddressBook(func() string { return cluster })
	b.self, b.selfAddr = "n1", "127.0.0.1:7001"

	if addr, err := b.ServerAddr("n2"); !errors.Is(err, errNoAddress) {
		t.Errorf("unknown server without a configuration: %q, %v; want errNoAddress", addr, err)
	}
	if got := b.resolve("n2", "127.0.0.1:7002"); got != "127.0.0.1:7002" {
		t.Errorf("resolve without a claim = %q, want the configuration's address", got)
	}

	b.claim("n2", "127.0.0.2:7002", "c1")
	if addr, err := b.ServerAddr("n2"); err != nil || addr != "127.0.0.2:7002" {
		t.Errorf("claimed server: %q, %v; want its claim", addr, err)
	}
	if got := b.resolve("n2", "127.0.0.1:7002"); got != "127.0.0.2:7002" {
		t.Errorf("resolve with a claim = %q, want the claim", got)
	}

	// This node is where its own transport listens, whatever gossip or the
	// configuration say: Raft stamps that address on its requests.
	b.claim("n1", "127.0.0.9:1", "c1")
	if addr, err := b.ServerAddr("n1"); err != nil || addr != "127.0.0.1:7001" {
		t.Errorf("self: %q, %v; want its own address", addr, err)
	}

	// Two members claiming one address: neither is believed, until one
	// claims another.
	b.claim("n3", "127.0.0.2:7002", "c1")
	for _, id := range []raft.ServerID{"n2", "n3"} {
		if addr, ok := b.claimed(id); ok {
			t.Errorf("%s believed at a shared address %q", id, addr)
		}
	}
	b.claim("n3", "127.0.0.3:7003", "c1")
	if addr, ok := b.claimed("n2"); !ok || addr != "127.0.0.2:7002" {
		t.Errorf("n2 after n3 moved on: %q, %v", addr, ok)
	}

	// Another cluster's member of the same name is not believed; one that
	// does not know its cluster yet (a fresh node) is.
	b.claim("n4", "127.0.0.4:7004", "c2")
	if _, ok := b.claimed("n4"); ok {
		t.Error("a member of another cluster was believed")
	}
	b.claim("n4", "127.0.0.4:7004", "")
	if _, ok := b.claimed("n4"); !ok {
		t.Error("a member that knows no cluster yet was not believed")
	}

	b.claim("n5", "no-port", "c1")
	if _, ok := b.claimed("n5"); ok {
		t.Error("an address without a port was believed")
	}

	b.forget("n2")
	if got := b.resolve("n2", "127.0.0.1:7002"); got != "127.0.0.1:7002" {
		t.Errorf("resolve after forget = %q, want the configuration's address", got)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if len(b.claims) != 3 {
		t.Errorf("claims left: %v", b.claims)
	}
}

// TestAddressBookFallsBackToTheConfiguration: with Raft running, a server
// gossip knows nothing of is dialled at the configuration's address,
// without an error (an error would make the transport log every RPC).
func TestAddressBookFallsBackToTheConfiguration(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir())
	waitFor(t, func() bool { return n.IsLeader() })
	if addr, err := n.addrs.ServerAddr("n1"); err != nil || string(addr) != n.cfg.RaftAddr {
		t.Errorf("own address: %q, %v; want %s", addr, err, n.cfg.RaftAddr)
	}
	// As another node without gossip sees n1: from the configuration.
	other := newAddressBook(func() string { return "" })
	other.raft.Store(n.raft)
	if addr, err := other.ServerAddr("n1"); err != nil || string(addr) != n.cfg.RaftAddr {
		t.Errorf("configuration's address: %q, %v; want %s", addr, err, n.cfg.RaftAddr)
	}
	if _, err := other.ServerAddr("nobody"); !errors.Is(err, errNoAddress) {
		t.Errorf("a server outside the configuration: %v, want errNoAddress", err)
	}
}

// answerAs serves Raft RPCs on a transport of its own, answering every one
// as server id (granted, successful), until the test ends.
func answerAs(t *testing.T, id string) *raft.NetworkTransport {
	t.Helper()
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(trans.LocalAddr())}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case rpc := <-trans.Consumer():
				switch rpc.Command.(type) {
				case *raft.RequestVoteRequest:
					rpc.Respond(&raft.RequestVoteResponse{RPCHeader: header, Term: 1, Granted: true}, nil)
				case *raft.RequestPreVoteRequest:
					rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: header, Term: 1, Granted: true}, nil)
				case *raft.AppendEntriesRequest:
					rpc.Respond(&raft.AppendEntriesResponse{RPCHeader: header, Term: 1, Success: true}, nil)
				case *raft.TimeoutNowRequest:
					rpc.Respond(&raft.TimeoutNowResponse{RPCHeader: header}, nil)
				default:
					rpc.Respond(nil, errors.New("not served here"))
				}
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		trans.Close()
	})
	return trans
}

// TestCheckedTransportCountsOnlyTheServerAsked: an answer from another
// server than the one Raft asked is an error (single RPCs) or an empty,
// unsuccessful answer (pipelined appends), never a vote or an append.
func TestCheckedTransportCountsOnlyTheServerAsked(t *testing.T) {
	t.Parallel()
	far := answerAs(t, "n2")
	inner, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	tr := checkedTransport{inner}
	addr := far.LocalAddr()

	var vote raft.RequestVoteResponse
	if err := tr.RequestVote("n2", addr, &raft.RequestVoteRequest{Term: 1}, &vote); err != nil || !vote.Granted {
		t.Fatalf("vote from the server asked: %+v, %v", vote, err)
	}
	var wrong errWrongServer
	if err := tr.RequestVote("n3", addr, &raft.RequestVoteRequest{Term: 1}, &vote); !errors.As(err, &wrong) || wrong.want != "n3" || wrong.got != "n2" {
		t.Errorf("vote for n3 answered by n2: %v, want errWrongServer", err)
	}
	var pre raft.RequestPreVoteResponse
	if err := tr.RequestPreVote("n3", addr, &raft.RequestPreVoteRequest{Term: 1}, &pre); !errors.As(err, &wrong) {
		t.Errorf("pre-vote for n3 answered by n2: %v, want errWrongServer", err)
	}
	var app raft.AppendEntriesResponse
	if err := tr.AppendEntries("n3", addr, &raft.AppendEntriesRequest{Term: 1}, &app); !errors.As(err, &wrong) {
		t.Errorf("append for n3 answered by n2: %v, want errWrongServer", err)
	}
	var tn raft.TimeoutNowResponse
	if err := tr.TimeoutNow("n3", addr, &raft.TimeoutNowRequest{}, &tn); !errors.As(err, &wrong) {
		t.Errorf("timeout-now for n3 answered by n2: %v, want errWrongServer", err)
	}

	for _, tc := range []struct {
		id      raft.ServerID
		success bool
	}{{"n2", true}, {"n3", false}} {
		p, err := tr.AppendEntriesPipeline(tc.id, addr)
		if err != nil {
			t.Fatalf("pipeline: %v", err)
		}
		if _, err := p.AppendEntries(&raft.AppendEntriesRequest{Term: 1}, &raft.AppendEntriesResponse{}); err != nil {
			t.Fatalf("pipelined append: %v", err)
		}
		select {
		case f := <-p.Consumer():
			if got := f.Response().Success; got != tc.success {
				t.Errorf("pipelined append for %s answered by n2: success %v, want %v", tc.id, got, tc.success)
			}
			if err := f.Error(); (err == nil) != tc.success {
				t.Errorf("pipelined append for %s answered by n2: error %v", tc.id, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no pipelined answer for %s", tc.id)
		}
		if err := p.Close(); err != nil {
			t.Errorf("close pipeline: %v", err)
		}
	}
}

// TestGossipClaimsOnlyItsOwnName: a live member's Raft address is believed
// for the id memberlist knows it by, not for whatever id its metadata
// names, and is dropped when the member dies or leaves.
func TestGossipClaimsOnlyItsOwnName(t *testing.T) {
	t.Parallel()
	n := &Node{addrs: newAddressBook(func() string { return "" }), levels: &entryLevels{known: map[raft.ServerID]levelSeen{}}}
	g := &gossip{n: n, left: map[string]struct{}{}, gone: map[string]goneMember{}, live: map[string]memberlist.Node{}}
	member := func(name, id, addr string) *memberlist.Node {
		meta, err := json.Marshal(memberMeta{ID: id, RaftAddr: addr})
		if err != nil {
			t.Fatal(err)
		}
		return &memberlist.Node{Name: name, Meta: meta}
	}

	g.NotifyJoin(member("n2", "n2", "127.0.0.2:7002"))
	if got, ok := n.addrs.claimed("n2"); !ok || got != "127.0.0.2:7002" {
		t.Errorf("n2's own claim: %q, %v", got, ok)
	}
	g.NotifyJoin(member("n3", "n2", "127.0.0.3:7003"))
	if got, _ := n.addrs.claimed("n2"); got != "127.0.0.2:7002" {
		t.Errorf("n3 claiming to be n2 moved n2 to %q", got)
	}
	if _, ok := n.addrs.claimed("n3"); ok {
		t.Error("a member whose metadata names another id was believed for its own name")
	}
	g.NotifyUpdate(member("n2", "n2", "127.0.0.22:7002"))
	if got, _ := n.addrs.claimed("n2"); got != "127.0.0.22:7002" {
		t.Errorf("after n2's update: %q", got)
	}
	g.NotifyLeave(member("n2", "n2", "127.0.0.22:7002"))
	if got, ok := n.addrs.claimed("n2"); ok {
		t.Errorf("a dead member still believed at %q", got)
	}
}

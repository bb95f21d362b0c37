package cluster

import (
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// checkedTransport is Raft's network transport with one rule added: an
// answer counts only if it comes from the server it was meant for. Every
// Raft answer names the server that sent it (its RPC header), and Raft
// itself never looks: it credits a vote or an append to the server it
// asked. An address can lead elsewhere — a configuration address that a
// recreated pod of another server now holds, or a gossip claim that is
// wrong — and one server answering for two would be counted twice towards
// a majority: a leader elected, or an entry committed, without one. With
// the check such an answer is an error, so Raft treats that server as
// unreachable, which is the truth.
//
// The request still reached the wrong server, which handles it as the
// leader's or candidate's request to itself: entries of the same log, a
// vote for the same candidate in the same term, a snapshot of the same
// state. None of that is unsafe; only the counting was.
type checkedTransport struct {
	*raft.NetworkTransport
}

// errWrongServer means an address led to another server than the one Raft
// meant to reach.
type errWrongServer struct {
	want raft.ServerID
	got  string
}

func (e errWrongServer) Error() string {
	return fmt.Sprintf("the address of server %s is served by %s; not counting its answer", e.want, e.got)
}

// answeredBy checks that header came from id. Builds of hashicorp/raft
// before protocol 3 send no id; they cannot be checked.
func answeredBy(id raft.ServerID, header raft.RPCHeader) error {
	if len(header.ID) == 0 || raft.ServerID(header.ID) == id {
		return nil
	}
	return errWrongServer{want: id, got: string(header.ID)}
}

// answered is an RPC's outcome: its error, or else whether header, its
// answer's, came from id.
func answered(id raft.ServerID, err error, header *raft.RPCHeader) error {
	if err != nil {
		return err
	}
	return answeredBy(id, *header)
}

// AppendEntries implements raft.Transport.
func (t checkedTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return answered(id, t.NetworkTransport.AppendEntries(id, target, args, resp), &resp.RPCHeader)
}

// RequestVote implements raft.Transport.
func (t checkedTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return answered(id, t.NetworkTransport.RequestVote(id, target, args, resp), &resp.RPCHeader)
}

// RequestPreVote implements raft.WithPreVote.
func (t checkedTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return answered(id, t.NetworkTransport.RequestPreVote(id, target, args, resp), &resp.RPCHeader)
}

// InstallSnapshot implements raft.Transport.
func (t checkedTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return answered(id, t.NetworkTransport.InstallSnapshot(id, target, args, resp, data), &resp.RPCHeader)
}

// TimeoutNow implements raft.Transport.
func (t checkedTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return answered(id, t.NetworkTransport.TimeoutNow(id, target, args, resp), &resp.RPCHeader)
}

// AppendEntriesPipeline implements raft.Transport. Raft reads a pipelined
// answer without asking for its error, so an answer from another server
// is replaced by an empty one: not successful, which ends the pipeline
// (Raft goes back to single appends, which the check above refuses).
func (t checkedTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	c := &checkedPipeline{AppendPipeline: p, id: id, out: make(chan raft.AppendFuture), stop: make(chan struct{})}
	go c.relay()
	return c, nil
}

// checkedPipeline hands on the pipeline's answers, each checked.
type checkedPipeline struct {
	raft.AppendPipeline
	id        raft.ServerID
	out       chan raft.AppendFuture
	stop      chan struct{}
	closeOnce sync.Once
}

// relay runs until Close: the inner pipeline never closes its channel.
func (p *checkedPipeline) relay() {
	in := p.AppendPipeline.Consumer()
	for {
		select {
		case f := <-in:
			select {
			case p.out <- checkedFuture{AppendFuture: f, id: p.id}:
			case <-p.stop:
				return
			}
		case <-p.stop:
			return
		}
	}
}

// Consumer implements raft.AppendPipeline.
func (p *checkedPipeline) Consumer() <-chan raft.AppendFuture { return p.out }

// Close implements raft.AppendPipeline.
func (p *checkedPipeline) Close() error {
	p.closeOnce.Do(func() { close(p.stop) })
	return p.AppendPipeline.Close()
}

// checkedFuture is a pipelined answer that counts only if it came from id.
type checkedFuture struct {
	raft.AppendFuture
	id raft.ServerID
}

// Error implements raft.Future.
func (f checkedFuture) Error() error {
	if err := f.AppendFuture.Error(); err != nil {
		return err
	}
	return answeredBy(f.id, f.AppendFuture.Response().RPCHeader)
}

// Response implements raft.AppendFuture.
func (f checkedFuture) Response() *raft.AppendEntriesResponse {
	resp := f.AppendFuture.Response()
	if answeredBy(f.id, resp.RPCHeader) != nil {
		return &raft.AppendEntriesResponse{}
	}
	return resp
}

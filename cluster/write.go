package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/linkraft/linkraft/cluster/queue"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/codes"
)

// maxCreateBatch bounds how many creates share one log entry (and one
// relayed request, see relay.go), and maxInflightBatches how many entries
// the proposer keeps in Raft at once, and separately how many requests
// the relay keeps in flight to the leader.
//
// Four, not more: a batch is taken once a slot is free, so under load the
// answers of one large batch come back together, their clients' next
// creates arrive one by one, and every free slot takes the one queued
// alone. With 16 slots 88 % of the entries held one create (5.4 an entry
// on average, 128 clients through a follower); with 4, 17.5 an entry, and
// over 14 rounds alternated with 16 a follower answered 11 % more creates
// at 12 % less CPU a create (docs/BENCHMARKS.md, "creates in flight"). A
// lone create still waits for nothing.
const (
	maxCreateBatch     = 256
	maxInflightBatches = 4
)

// relayRetryBackoff is how long a create waits before it tries a leader
// again after a failed attempt, unless Raft reports another leader first.
const relayRetryBackoff = 50 * time.Millisecond

// createCall is one create waiting in a queue: the proposer's, which
// proposes it here, or the relay's, which sends it to the leader.
type createCall struct {
	// ctx is the caller's: a call for the leader whose caller left is not
	// sent.
	ctx context.Context
	req fsm.CreateRequest
	// leader is the Raft address of the leader the relay sends this
	// attempt to, as Create decided it (relay.go).
	leader string
	// fromFollower: a follower relayed this create here and waits until it
	// has applied it too (see commitpush.go).
	fromFollower bool
	done         chan createReply // buffered: a queue never blocks on a gone caller
}

type createReply struct {
	res fsm.CreateResult
	// index is the log entry that decided the create; a relayed create is
	// answered once this node has applied it.
	index uint64
	err   error
	// retry: the attempt did not decide the create and may be made again,
	// at whichever node leads then (it was not applied, or it carries a
	// request id, which makes a second attempt return the first outcome).
	retry bool
}

// Create applies one create through Raft and returns what the FSM decided.
// Errors from the FSM (code taken, ...) come back in the result's Err;
// the returned error is for the write path itself (no leader, timeout).
//
// On the leader the create joins this node's proposer queue. On a follower it is
// relayed to the leader together with the other creates queued here (see
// relay.go), and answered once this node has applied it, so its caller
// reads its own write here. An attempt that did not decide the create —
// the leader changed, froze or was cut off — is made again at the next
// leader, or here when this node wins the election, as long as that
// cannot apply it twice: it was not applied, or it carries a RequestID.
// A create without one gets one before it is first relayed, so every
// relayed create may be sent again. Each attempt decides once where the
// leader is, and the relay sends it to that node. ctx and the write
// timeout bound the whole; on a node that has gone longer than an election
// takes without a leader it fails (ErrNoLeader) at once instead
// (withLeaderWhileElecting).
func (n *Node) Create(ctx context.Context, req fsm.CreateRequest) (fsm.CreateResult, error) {
	return n.creates.create(ctx, req)
}

// create is Create's body.
func (p *createPath) create(ctx context.Context, req fsm.CreateRequest) (fsm.CreateResult, error) {
	if err := checkCreate(req); err != nil {
		return fsm.CreateResult{Err: err}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	// Before it is queued or relayed: a batch is one entry, and one item an
	// old server cannot apply must not hold back the others. It also keeps
	// a create from a leader whose build cannot receive it, but for one
	// case relayBatch refuses: a creation time or click total, which
	// servers of LevelImport apply but only LevelWire's relay carries.
	if err := p.levels.require(ctx, req.Level()); err != nil {
		return fsm.CreateResult{}, err
	}
	var reply createReply
	remote := false // the attempt that decided it was the leader's, elsewhere
	err := p.leadership.withLeaderWhileElecting(ctx, relayRetryBackoff, func(to leaderTarget) (bool, error) {
		remote = !to.self
		if to.self {
			reply = p.here(ctx, req)
		} else {
			if req.RequestID == "" {
				req.RequestID = newRequestID()
			}
			reply = p.submit(ctx, req, to.addr)
		}
		return !reply.retry, reply.err
	})
	if err != nil {
		return fsm.CreateResult{}, err
	}
	if remote {
		if err := p.machine.waitApplied(ctx, reply.index); err != nil {
			return fsm.CreateResult{}, fmt.Errorf("%w: the leader applied it at index %d, this node has not yet", ErrTimeout, reply.index)
		}
	}
	return reply.res, nil
}

// checkCreate refuses a create the log's encoding cannot carry. Every
// replica refuses to decode such an entry, so it would fail every create
// that shares the entry, not just itself.
func checkCreate(req fsm.CreateRequest) error {
	switch {
	case req.CodeLength < 0 || req.CodeLength > codes.MaxCounterLength:
		return fmt.Errorf("%w: code length %d", fsm.ErrInvalidRequest, req.CodeLength)
	case req.Strategy > fsm.StrategyHash:
		return fmt.Errorf("%w: unknown strategy %d", fsm.ErrInvalidRequest, req.Strategy)
	}
	return nil
}

// here proposes a create through this node's proposer, once it is an
// established leader. Lost leadership (before or during the proposal) asks
// for another attempt when that is safe.
func (p *createPath) here(ctx context.Context, req fsm.CreateRequest) createReply {
	if err := p.leadership.waitReady(ctx, true); err != nil {
		return createReply{err: err, retry: true}
	}
	r := p.submit(ctx, req, "")
	switch {
	case errors.Is(r.err, ErrNoLeader): // not applied
		r.retry = true
	case errors.Is(r.err, ErrTimeout) && req.RequestID != "" && ctx.Err() == nil:
		r.retry = true // maybe applied: the request id returns that outcome
	}
	return r
}

// newRequestID is the request id a relaying node gives a create its
// client sent without one: an attempt whose answer was lost is made again
// under it and returns the first outcome, also at another leader or here
// when this node wins the election.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// submit queues one create and waits for its reply: relayed to the
// leader at leader, or proposed here when leader is empty.
func (p *createPath) submit(ctx context.Context, req fsm.CreateRequest, leader string) createReply {
	call := &createCall{ctx: ctx, req: req, leader: leader, done: make(chan createReply, 1)}
	q := p.proposer
	if leader != "" {
		q = p.relay
	}
	if err := q.Put(ctx, call); errors.Is(err, queue.ErrStopped) {
		return createReply{err: ErrClosed}
	} else if err != nil {
		return createReply{err: ErrTimeout}
	}
	select {
	case r := <-call.done:
		return r
	case <-ctx.Done():
		return createReply{err: ErrTimeout}
	}
}

// createPath is everything a create goes through besides the state
// machine: the proposer queue, whose batches this node proposes as log
// entries while it leads; the relay queue, whose batches a follower sends
// to the leader (relay.go); the leader's end of the relay; and the commit
// pusher (commitpush.go).
type createPath struct {
	timeout      time.Duration // the write timeout
	allowPrivate bool          // Config.Writes.AllowPrivateTargets, for relayed creates
	closing      <-chan struct{}
	metrics      *metrics

	leadership *leaderWatch
	levels     *entryLevels
	peers      *peerClient
	machine    *appliedFSM
	apply      func(fsm.Command) (any, uint64, error)

	proposer *queue.Queue[*createCall]
	relay    *queue.Queue[*createCall]
	push     *commitPusher
}

// newQueues makes the proposer's queue, whose batches become log entries
// here, and the relay's, whose batches become requests to the leader, each
// batch one leader's (relay.go). Open runs them.
func (p *createPath) newQueues() {
	closed := func(batch []*createCall) { replyAll(batch, createReply{err: ErrClosed}) }
	p.proposer = queue.New(queue.Config[*createCall]{
		MaxBatch: maxCreateBatch, InFlight: maxInflightBatches, Capacity: 4 * maxCreateBatch,
		Handle: p.propose, Drop: closed,
	})
	p.relay = queue.New(queue.Config[*createCall]{
		MaxBatch: maxCreateBatch, InFlight: maxInflightBatches, Capacity: 4 * maxCreateBatch,
		Split: relayBatches, Handle: p.relayBatch, Drop: closed,
	})
	p.push = newCommitPusher()
}

// propose proposes a batch as one entry and hands every caller its
// result. When a create in it came from another node, the commit pusher
// sees that the followers learn soon that the entry committed
// (commitpush.go).
func (p *createPath) propose(batch []*createCall) {
	cmd := fsm.CreateBatch{Now: time.Now().UnixMilli(), Items: make([]fsm.CreateRequest, len(batch))}
	fromFollower := false
	for i, c := range batch {
		cmd.Items[i] = c.req
		fromFollower = fromFollower || c.fromFollower
	}
	p.metrics.createBatch.Observe(float64(len(batch)))
	p.push.proposing()
	resp, index, err := p.apply(cmd)
	results, ok := resp.([]fsm.CreateResult)
	if err == nil && (!ok || len(results) != len(batch)) {
		err = fmt.Errorf("apply create: unexpected response %T", resp)
	}
	if err == nil && fromFollower {
		p.push.applied()
	}
	for i, c := range batch {
		if err != nil {
			c.done <- createReply{err: err}
		} else {
			c.done <- createReply{res: results[i], index: index}
		}
	}
}

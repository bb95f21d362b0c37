package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// maxCreateBatch bounds how many creates share one log entry, and
// maxInflightBatches how many entries the batcher keeps in Raft at once.
// Concurrency is what makes Raft fast (it group-commits queued entries into
// one fsync); batching multiplies that by the creates in each entry.
const (
	maxCreateBatch     = 256
	maxInflightBatches = 16
)

type createCall struct {
	req  fsm.CreateRequest
	done chan createReply // buffered: the batcher never blocks on a gone caller
}

type createReply struct {
	res fsm.CreateResult
	err error
}

// Create applies one create through Raft and returns what the FSM decided.
// Errors from the FSM (code taken, ...) come back in the result's Err;
// the returned error is for the write path itself (no leader, timeout).
func (n *Node) Create(ctx context.Context, req fsm.CreateRequest) (fsm.CreateResult, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.WriteTimeout)
	defer cancel()
	if err := n.waitReady(ctx, false); err != nil {
		return fsm.CreateResult{}, err
	}
	call := &createCall{req: req, done: make(chan createReply, 1)}
	select {
	case n.creates <- call:
	case <-ctx.Done():
		return fsm.CreateResult{}, ErrTimeout
	case <-n.closing:
		return fsm.CreateResult{}, ErrClosed
	}
	select {
	case r := <-call.done:
		return r.res, r.err
	case <-ctx.Done():
		return fsm.CreateResult{}, ErrTimeout
	}
}

// runCreateBatcher takes whatever creates are queued (at least one, at most
// maxCreateBatch) and proposes them as one entry. Under light load a batch
// is a single create and waits for nothing; under heavy load batches fill
// while earlier ones are being committed.
func (n *Node) runCreateBatcher() {
	defer n.wg.Done()
	inflight := make(chan struct{}, maxInflightBatches)
	for {
		var batch []*createCall
		select {
		case c := <-n.creates:
			batch = append(batch, c)
		case <-n.closing:
			n.failQueuedCreates()
			return
		}
	drain:
		for len(batch) < maxCreateBatch {
			select {
			case c := <-n.creates:
				batch = append(batch, c)
			default:
				break drain
			}
		}
		inflight <- struct{}{}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			defer func() { <-inflight }()
			n.applyCreates(batch)
		}()
	}
}

func (n *Node) applyCreates(batch []*createCall) {
	cmd := fsm.CreateBatch{Now: time.Now().UnixMilli(), Items: make([]fsm.CreateRequest, len(batch))}
	for i, c := range batch {
		cmd.Items[i] = c.req
	}
	resp, err := n.apply(fsm.EncodeCreate(cmd))
	results, ok := resp.([]fsm.CreateResult)
	if err == nil && (!ok || len(results) != len(batch)) {
		err = fmt.Errorf("apply create: unexpected response %T", resp)
	}
	for i, c := range batch {
		if err != nil {
			c.done <- createReply{err: err}
		} else {
			c.done <- createReply{res: results[i]}
		}
	}
}

func (n *Node) failQueuedCreates() {
	for {
		select {
		case c := <-n.creates:
			c.done <- createReply{err: ErrClosed}
		default:
			return
		}
	}
}

// Delete removes a link through Raft. fsm.ErrNotFound when there is none.
// It returns once every voter that answers within visibilityWait has
// applied the delete too (see visibility.go), with the delete's log index.
func (n *Node) Delete(ctx context.Context, code string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.WriteTimeout)
	defer cancel()
	if err := n.waitReady(ctx, false); err != nil {
		return 0, err
	}
	resp, index, err := n.applyAt(fsm.EncodeDelete(fsm.DeleteCommand{Code: code, Now: time.Now().UnixMilli()}))
	if err != nil {
		return 0, err
	}
	if err, ok := resp.(error); ok {
		return 0, err
	}
	n.awaitVoters(index)
	return index, nil
}

// apply proposes one entry and waits for the FSM's response.
func (n *Node) apply(cmd []byte) (any, error) {
	resp, _, err := n.applyAt(cmd)
	return resp, err
}

// applyAt is apply, also returning the entry's log index.
func (n *Node) applyAt(cmd []byte) (any, uint64, error) {
	f := n.raft.Apply(cmd, n.cfg.WriteTimeout)
	if err := f.Error(); err != nil {
		return nil, 0, raftError(err)
	}
	return f.Response(), f.Index(), nil
}

// raftError turns Raft's errors into this package's: ErrNoLeader (not
// applied: safe to retry), ErrTimeout (outcome unknown: only an idempotent
// retry is safe) or ErrClosed.
func raftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return ErrNoLeader
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	case errors.Is(err, raft.ErrEnqueueTimeout), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrAbortedByRestore):
		return ErrTimeout
	}
	return fmt.Errorf("raft: %w", err)
}

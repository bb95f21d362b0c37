package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

// ReadIndex returns an index that covers every write acknowledged before
// the call, following the ReadIndex recipe of the Raft thesis (as rqlite
// does): this node makes sure it has committed an entry of its own term (a
// barrier, once per term, so every earlier leader's writes are applied
// here), takes the index, and confirms with a heartbeat round that it is
// still the leader in the same term.
//
// The index is this FSM's applied index rather than the commit index: Raft
// never hands its own no-op and barrier entries to the FSM, so a commit
// index that ends on one is an index no FSM ever reports. Every write this
// leader acknowledged was applied here before it was acknowledged.
func (n *Node) ReadIndex() (uint64, error) {
	if !n.IsLeader() {
		return 0, ErrNoLeader
	}
	term := n.raft.CurrentTerm()
	if n.readyTerm.Load() != term {
		if err := n.raft.Barrier(n.readTimeout()).Error(); err != nil {
			return 0, fmt.Errorf("read index barrier: %w", ErrNoLeader)
		}
		n.readyTerm.Store(term)
	}
	index := n.appliedIndex()
	if err := n.raft.VerifyLeader().Error(); err != nil || n.raft.CurrentTerm() != term {
		return 0, ErrNoLeader
	}
	return index, nil
}

// readTimeout bounds how long a miss waits for a leader to confirm it: as
// long as a write waits, so a miss during an election waits for the next
// leader instead of answering 404 for a code that exists.
func (n *Node) readTimeout() time.Duration { return n.cfg.WriteTimeout }

// fetchReadIndex asks the leader (possibly this node) for a read index. It
// keeps trying until the read timeout: during an election there is no
// leader for a moment, and a miss must wait for the next one rather than
// answer 404 for a code that exists.
func (n *Node) fetchReadIndex() (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), n.readTimeout())
	defer cancel()
	var index uint64
	err := n.retry(ctx, 20*time.Millisecond, func() (bool, error) {
		var err error
		index, err = n.readIndexOnce(ctx)
		return err == nil, err
	})
	return index, err
}

func (n *Node) readIndexOnce(ctx context.Context) (uint64, error) {
	if n.IsLeader() {
		return n.ReadIndex()
	}
	var answer struct {
		Index uint64 `json:"index"`
	}
	if err := n.callLeader(ctx, fasthttp.MethodGet, ReadIndexPath, nil, &answer); err != nil {
		return 0, err
	}
	return answer.Index, nil
}

// CatchUp returns once this node has applied every write acknowledged
// before the call anywhere in the cluster. Callers use it to confirm a
// local miss before answering 404. Concurrent callers share one request to
// the leader per round trip, so a flood of unknown codes costs the leader
// one request per node at a time.
//
// It returns ErrBehind when the leader answered but this node has not
// applied that far within catchUpWait: a node that was down can wait up to
// ~10 s for the leader's replication to retry it (hashicorp/raft backs off
// up to 10.24 s towards a failed peer), so callers then ask the leader for
// what they need (LeaderLink) instead of answering from stale state.
func (n *Node) CatchUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.readTimeout())
	defer cancel()
	index, err := n.readRounds.do(ctx)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(catchUpWait)
	for n.appliedIndex() < index {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%w: applied %d, leader confirmed %d", ErrBehind, n.appliedIndex(), index)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// catchUpWait is how long CatchUp waits for local apply before reporting
// ErrBehind; replication normally takes milliseconds.
const catchUpWait = 300 * time.Millisecond

// ErrBehind means the leader confirmed writes this node has not applied yet.
var ErrBehind = errors.New("this node is behind the leader")

// LeaderLink finds a link for a node that is behind: in its own state once
// it has caught up, otherwise at the leader. It keeps trying until the
// read timeout, since the leader that confirmed the index may be gone and
// its successor not yet elected.
func (n *Node) LeaderLink(code string) (fsm.Link, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), n.readTimeout())
	defer cancel()
	var answer struct {
		Found bool     `json:"found"`
		Link  fsm.Link `json:"link"`
	}
	err := n.retry(ctx, 20*time.Millisecond, func() (bool, error) {
		if l, ok := n.fsm.Get(code); ok {
			answer.Found, answer.Link = true, l
			return true, nil
		}
		err := n.callLeader(ctx, fasthttp.MethodGet, LinkPath+url.PathEscape(code), nil, &answer)
		if errors.Is(err, ErrLeaderIsSelf) {
			if _, err = n.ReadIndex(); err == nil {
				answer.Link, answer.Found = n.fsm.Get(code)
			}
		}
		return err == nil, err
	})
	if err != nil {
		return fsm.Link{}, false, err
	}
	return answer.Link, answer.Found, nil
}

// appliedIndex is the index of the last entry the FSM has applied. Raft's
// own applied index is used only when the FSM has applied nothing since it
// started or was restored; then it is the restored snapshot's index.
func (n *Node) appliedIndex() uint64 {
	if i, ok := n.fsm.Applied(); ok {
		return i
	}
	return n.raft.AppliedIndex()
}

// roundBatcher shares one call of fn among concurrent callers. A caller
// always waits for a round that starts after it arrived, so the result
// reflects everything that happened before the call.
type roundBatcher struct {
	fn func() (uint64, error)

	mu      sync.Mutex
	next    *round
	running bool
}

type round struct {
	done  chan struct{}
	value uint64
	err   error
}

func (b *roundBatcher) do(ctx context.Context) (uint64, error) {
	b.mu.Lock()
	if b.next == nil {
		b.next = &round{done: make(chan struct{})}
	}
	r := b.next
	if !b.running {
		b.running = true
		go b.run()
	}
	b.mu.Unlock()
	select {
	case <-r.done:
		return r.value, r.err
	case <-ctx.Done():
		return 0, fmt.Errorf("read index: %w", ErrTimeout)
	}
}

func (b *roundBatcher) run() {
	for {
		b.mu.Lock()
		r := b.next
		b.next = nil
		if r == nil {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		r.value, r.err = b.fn()
		close(r.done)
	}
}

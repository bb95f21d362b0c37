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

	"github.com/linkraft/linkraft/cluster/wire"
)

// catchUpWait is how long a miss waits for this node to apply what the
// leader confirmed before it asks the leader for the link instead;
// replication normally takes milliseconds.
const catchUpWait = 300 * time.Millisecond

// Lookup returns the link with code, or an error wrapping fsm.ErrNotFound
// when no write acknowledged anywhere before the call created it. A local
// miss is confirmed with one read-index round (shared with concurrent
// misses) and, when this node cannot apply that far within catchUpWait, one
// fetch of the link from the leader.
//
// When no leader answers within the read timeout the local state's answer
// is returned, with an error that does not wrap fsm.ErrNotFound: a node cut
// off from the leader keeps serving what it has. A node that has gone
// longer than an election takes without a leader does not wait for one:
// it answers so at once (withLeaderWhileElecting), a miss with an error
// wrapping ErrNoLeader.
//
// A node that knows it is behind the leader (Behind) does not trust a local
// hit either: the link may have been deleted. It asks the leader.
func (n *Node) Lookup(ctx context.Context, code string) (fsm.Link, error) {
	l, ok := n.fsm.Get(code)
	if ok && !n.Behind() {
		return l, nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Writes.Timeout)
	defer cancel()
	var err error
	if ok {
		l, err = n.leaderLink(ctx, code)
	} else {
		l, err = n.confirmMiss(ctx, code)
	}
	n.metrics.confirmedMisses.WithLabelValues(confirmResult(err)).Inc()
	if err != nil && !errors.Is(err, fsm.ErrNotFound) {
		if l, ok := n.fsm.Get(code); ok {
			return l, nil
		}
	}
	return l, err
}

// confirmResult names the outcome of asking the leader about a code for
// linkraft_confirmed_misses_total.
func confirmResult(err error) string {
	switch {
	case err == nil:
		return "found"
	case errors.Is(err, fsm.ErrNotFound):
		return "not_found"
	}
	return "unconfirmed" // no leader answered in time
}

func (n *Node) confirmMiss(ctx context.Context, code string) (fsm.Link, error) {
	index, err := n.readRounds.do(ctx)
	if err != nil {
		return fsm.Link{}, fmt.Errorf("confirm miss of %s: %w", code, err)
	}
	caughtUp, cancel := context.WithTimeout(ctx, catchUpWait)
	err = n.machine.waitApplied(caughtUp, index)
	cancel()
	if err == nil {
		if l, ok := n.fsm.Get(code); ok {
			return l, nil
		}
		return fsm.Link{}, fsm.ErrNotFound
	}
	// This node is behind: hashicorp/raft backs off replication towards a
	// peer that failed (up to ~10 s), so a node that was down or cut off
	// may receive nothing for a while. Ask the leader for the one link.
	n.machine.noteLeaderIndex(index)
	return n.leaderLink(ctx, code)
}

// Behind reports whether the leader has confirmed an index this node has
// not applied yet. Until it has, its local hits may be stale (a delete it
// has not seen), so reads ask the leader. Cheap enough for the redirect
// path: two atomic loads.
//
// Reads wait for a leader as long as a write does (the write timeout, or
// as long as an election takes), so a miss during an election waits for
// the next leader instead of answering 404 for a code that exists.
func (n *Node) Behind() bool { return n.machine.behind() }

// ReadIndex returns an index that covers every write acknowledged before
// the call, following the ReadIndex recipe of the Raft thesis (as rqlite
// does). This node must lead in a term it has established (one barrier on
// gaining leadership, so every earlier leader's writes are applied here);
// it takes the index and confirms with a heartbeat round that it still
// leads in the same term.
//
// The index is this FSM's applied index rather than the commit index: Raft
// never hands its own no-op and barrier entries to the FSM, so a commit
// index that ends on one is an index no FSM ever reports. Every write this
// leader acknowledged was applied here before it was acknowledged.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Writes.Timeout)
	defer cancel()
	if err := n.leadership.waitReady(ctx, true); err != nil {
		return 0, err
	}
	term := n.leadership.readyTerm.Load() // 0 once leadership was revoked meanwhile
	index := n.machine.appliedIndex()
	if err := n.raft.VerifyLeader().Error(); err != nil || n.raft.CurrentTerm() != term {
		return 0, ErrNoLeader
	}
	return index, nil
}

// fetchReadIndex gets a read index from the leader, this node included,
// waiting through an election until the read timeout: a miss must wait for
// the next leader rather than answer 404 for a code that exists. A node
// that has gone longer than an election takes without a leader has no
// next leader coming soon: it gives up at once.
func (n *Node) fetchReadIndex() (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Writes.Timeout)
	defer cancel()
	var index uint64
	err := n.leadership.withLeaderWhileElecting(ctx, 20*time.Millisecond, func(to leaderTarget) (bool, error) {
		var err error
		if to.self {
			index, err = n.ReadIndex(ctx)
			return err == nil, err
		}
		var answer wire.ReadIndexAnswer
		err = n.peers.call(ctx, to.addr, fasthttp.MethodGet, wire.PathReadIndex, nil, &answer)
		index = answer.Index
		return err == nil, err
	})
	return index, err
}

// leaderLink fetches one link from the leader, this node included, for a
// node that is behind. It asks for the link in the state machine's own
// encoding; a leader of a build before fsm.LevelWire ignores that and
// answers in the legacy fields, which FSMLink reads too.
func (n *Node) leaderLink(ctx context.Context, code string) (fsm.Link, error) {
	var answer wire.LinkAnswer
	err := n.leadership.withLeaderWhileElecting(ctx, 20*time.Millisecond, func(to leaderTarget) (bool, error) {
		if to.self {
			if _, err := n.ReadIndex(ctx); err != nil {
				return false, err
			}
			l, ok := n.fsm.Get(code)
			answer = linkAnswer(l, ok, true)
			return true, nil
		}
		path := wire.PathLinks + url.PathEscape(code) + "?" + wire.LinkBytesParam + "=1"
		err := n.peers.call(ctx, to.addr, fasthttp.MethodGet, path, nil, &answer)
		return err == nil, err
	})
	switch {
	case err != nil:
		return fsm.Link{}, fmt.Errorf("ask the leader for %s: %w", code, err)
	case !answer.Found:
		return fsm.Link{}, fsm.ErrNotFound
	}
	l, err := answer.FSMLink()
	if err != nil {
		return fsm.Link{}, fmt.Errorf("the leader's answer for %s: %w", code, err)
	}
	return l, nil
}

// linkAnswer answers GET links/{code}: a found link as fsm.EncodeLink's
// bytes when the asker asked for them (wire.LinkBytesParam), in the legacy
// fields for an asker of a build before fsm.LevelWire, which does not.
func linkAnswer(l fsm.Link, found, asBytes bool) wire.LinkAnswer {
	answer := wire.LinkAnswer{V: wire.Version, Found: found}
	switch {
	case found && asBytes:
		answer.LinkBytes = fsm.EncodeLink(l)
	case found:
		answer.Link = wire.FromLink(l)
	}
	return answer
}

// roundBatcher shares one call of fn among concurrent callers, so a flood
// of misses costs the leader one request per node at a time. A caller
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

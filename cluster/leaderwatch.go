package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// leaderWatch is what this node knows of who leads: the leader Raft
// reports, and whether this node leads in a term it has established
// (establish, in leadership.go, marks it). Everything that waits for a
// leader to exist, to change or to be ready waits on changed, which is
// notified on every leader observation and when this node's leadership
// becomes ready or ends.
type leaderWatch struct {
	raft    *raft.Raft
	self    raft.ServerID
	closing <-chan struct{}
	changed broadcast
	// readyTerm is the term this node established its leadership in, 0
	// when it does not lead.
	readyTerm atomic.Uint64
}

// errLeaderUnknown means Raft knows no leader: an election is under way or
// this node is cut off. Callers wait for a leader change, not a timer.
var errLeaderUnknown = fmt.Errorf("%w: none known", ErrNoLeader)

// leaderTarget says where the leader is: this node, or another node's
// Raft address, whose port also serves the node-to-node protocol.
type leaderTarget struct {
	self bool
	addr string
}

// run turns Raft's leader observations into notifications until the node
// closes.
func (w *leaderWatch) run() {
	observations := make(chan raft.Observation, 16)
	observer := raft.NewObserver(observations, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	w.raft.RegisterObserver(observer)
	defer w.raft.DeregisterObserver(observer)
	w.changed.notify() // for anyone who looked before the observer was in place
	for {
		select {
		case <-w.closing:
			return
		case <-observations:
			w.changed.notify()
		}
	}
}

// established marks term as the one this node leads in, ready.
func (w *leaderWatch) established(term uint64) {
	w.readyTerm.Store(term)
	w.changed.notify()
}

// revoke marks this node as not leading.
func (w *leaderWatch) revoke() {
	w.readyTerm.Store(0)
	w.changed.notify()
}

// ready reports whether this node leads in a term it has established.
func (w *leaderWatch) ready() bool {
	return w.raft.State() == raft.Leader && w.readyTerm.Load() == w.raft.CurrentTerm()
}

// waitReady returns once this node is an established leader. It waits
// through elections until ctx ends (ErrNoLeader) or the node closes; with
// failFast it gives up (ErrNoLeader) as soon as this node does not lead.
func (w *leaderWatch) waitReady(ctx context.Context, failFast bool) error {
	for {
		changed := w.changed.wait()
		switch {
		case w.ready():
			return nil
		case failFast && w.raft.State() != raft.Leader:
			return ErrNoLeader
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ErrNoLeader
		case <-w.closing:
			return ErrClosed
		}
	}
}

// leader says where the leader is now.
func (w *leaderWatch) leader() (leaderTarget, error) {
	addr, id := w.raft.LeaderWithID()
	switch {
	case id == "" || addr == "":
		return leaderTarget{}, errLeaderUnknown
	case id == w.self:
		return leaderTarget{self: true, addr: string(addr)}, nil
	}
	return leaderTarget{addr: string(addr)}, nil
}

// withLeader calls try with the current leader until try reports done, ctx
// ends (try's last error) or the node closes (ErrClosed). While no leader
// is known it waits for Raft to report one; after a failed attempt at a
// known leader it waits for a leader change or backoff, whichever is first.
func (w *leaderWatch) withLeader(ctx context.Context, backoff time.Duration, try func(leaderTarget) (done bool, err error)) error {
	for {
		changed := w.changed.wait()
		target, err := w.leader()
		var retryAfter <-chan time.Time
		if err == nil {
			var done bool
			if done, err = try(target); done {
				return err
			}
		}
		if !errors.Is(err, errLeaderUnknown) {
			retryAfter = time.After(backoff)
		}
		select {
		case <-changed:
		case <-retryAfter:
		case <-ctx.Done():
			return err
		case <-w.closing:
			return ErrClosed
		}
	}
}

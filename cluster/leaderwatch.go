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
// reports, whether this node leads in a term it has established
// (establish, in leadership.go, marks it), and since when it has known no
// leader. Everything that waits for a leader to exist, to change or to be
// ready waits on changed, which is notified on every leader and state
// observation and when this node's leadership becomes ready or ends.
type leaderWatch struct {
	raft    *raft.Raft
	self    raft.ServerID
	closing <-chan struct{}
	changed broadcast
	// readyTerm is the term this node established its leadership in, 0
	// when it does not lead.
	readyTerm atomic.Uint64
	// leaderless is when this node began to go without a leader, in Unix
	// nanoseconds (leaderlessSince): a client's request waits for a leader
	// only as long as an election takes (patience). Only run writes it
	// (and tests, to age it).
	leaderless atomic.Int64
	// knewLeader: run has seen a leader since the node started. Only run
	// reads and writes it.
	knewLeader bool
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

// run turns Raft's leader and state observations into notifications
// until the node closes, keeping leaderless up to date before each.
func (w *leaderWatch) run() {
	observations := make(chan raft.Observation, 16)
	observer := raft.NewObserver(observations, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			// A state change matters too: a node that never knew a leader
			// begins to go without one when it starts an election.
			return true
		}
		return false
	})
	w.raft.RegisterObserver(observer)
	defer w.raft.DeregisterObserver(observer)
	w.observe(time.Now())
	w.changed.notify() // for anyone who looked before the observer was in place
	for {
		select {
		case <-w.closing:
			return
		case <-observations:
			// Raft's state now, not the observation's: an observation the
			// full channel dropped is then made up by the next one.
			w.observe(time.Now())
			w.changed.notify()
		}
	}
}

// observe brings leaderless up to date with what Raft reports at now.
func (w *leaderWatch) observe(now time.Time) {
	_, id := w.raft.LeaderWithID()
	w.knewLeader = w.knewLeader || id != ""
	looking := w.knewLeader || w.raft.State() == raft.Candidate
	prev := w.leaderless.Load()
	if next := leaderlessSince(prev, id != "", looking, now); next != prev {
		w.leaderless.Store(next)
	}
}

// leaderlessSince is what leaderWatch.leaderless becomes at now, from what
// it was (since): 0 while a leader is known; while none is, since, or now
// if this is the first look without one. A node that has neither known a
// leader nor begun an election (looking false) stays at 0: it has just
// started and not yet had the time to hear from a leader, so a node's
// first election is never cut short.
func leaderlessSince(since int64, leader, looking bool, now time.Time) int64 {
	switch {
	case leader || !looking:
		return 0
	case since != 0:
		return since
	}
	return now.UnixNano()
}

// electionPatience is how long a node may go without a leader in an
// election that ends: its own heartbeat timeout has expired (that is when
// it stops knowing the leader), the other voters' expire within another
// heartbeat timeout (each draws one from [heartbeat, 2×heartbeat)), and a
// round of voting that splits is tried again after at most 2×election.
// With linkraft's 500 ms timeouts that is 1.5 s. An election leaves a
// follower without a leader for less: a create after kill -9 of the
// leader answers 0.9-1.4 s later (docs/BENCHMARKS.md, fault tests
// measured 0.76-1.75 s), and for the first 0.5-1 s of that the follower
// still knows the dead leader. It also keeps the promise that a node
// which has gone an election timeout without a leader answers a write
// within 1.5 s: it waits at most 1 s more.
func electionPatience(heartbeat, election time.Duration) time.Duration {
	return heartbeat + 2*election
}

// patience is electionPatience for Raft's timeouts as configured.
func (w *leaderWatch) patience() time.Duration {
	c := w.raft.ReloadableConfig()
	return electionPatience(c.HeartbeatTimeout, c.ElectionTimeout)
}

// patienceLeft is how much longer, at now, a client's request may wait for
// a leader on a node leaderless since since (leaderWatch.leaderless):
// patience less the time the node has already gone without one, and 0 or
// less once that is longer. bounded is false when only the request's own
// deadline bounds its wait: a leader is known, or the node has not begun
// to look for one.
func patienceLeft(since int64, patience time.Duration, now time.Time) (left time.Duration, bounded bool) {
	if since == 0 {
		return 0, false
	}
	return patience - now.Sub(time.Unix(0, since)), true
}

// errElectionOverdue means a client's request gave up waiting for a
// leader: this node has gone longer than an election takes without one.
var errElectionOverdue = fmt.Errorf("%w: none for longer than an election takes", ErrNoLeader)

// errLeaderless is errElectionOverdue after none without a leader, with
// what it means.
func errLeaderless(none time.Duration) error {
	return fmt.Errorf("%w (%v): the cluster has lost its majority, or this node is cut off from it",
		errElectionOverdue, none.Round(100*time.Millisecond))
}

// giveUp says, for a client's request that finds no leader at now, whether
// to stop waiting for one (with the error to return) or else when to look
// again (nil: only on a leader change or the request's deadline).
func (w *leaderWatch) giveUp(now time.Time) (<-chan time.Time, error) {
	since := w.leaderless.Load()
	patience := w.patience()
	left, bounded := patienceLeft(since, patience, now)
	switch {
	case !bounded:
		return nil, nil
	case left <= 0:
		return nil, errLeaderless(patience - left)
	}
	return time.After(left), nil
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
	return w.awaitReady(ctx, failFast, false)
}

// waitReadyWhileElecting is waitReady without failFast for a client's
// request: it waits through an election, but gives up (ErrNoLeader) once
// the node has gone longer than an election takes without a leader
// (giveUp).
func (w *leaderWatch) waitReadyWhileElecting(ctx context.Context) error {
	return w.awaitReady(ctx, false, true)
}

func (w *leaderWatch) awaitReady(ctx context.Context, failFast, impatient bool) error {
	for {
		changed := w.changed.wait()
		switch {
		case w.ready():
			return nil
		case failFast && w.raft.State() != raft.Leader:
			return ErrNoLeader
		}
		var lookAgain <-chan time.Time
		if _, id := w.raft.LeaderWithID(); impatient && id == "" {
			var err error
			if lookAgain, err = w.giveUp(time.Now()); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case <-lookAgain:
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
// It is for the node's own work, which waits through anything its context
// allows (clicks, leaving); a client's request uses withLeaderWhileElecting.
func (w *leaderWatch) withLeader(ctx context.Context, backoff time.Duration, try func(leaderTarget) (done bool, err error)) error {
	return w.tryLeaders(ctx, backoff, false, try)
}

// withLeaderWhileElecting is withLeader for a client's request (a write,
// a miss confirmed with the leader, a forwarded request). It waits through
// an election, as withLeader does: a write sent as the leader dies goes to
// the next leader, about a second later. But a node that has gone longer
// than an election takes without a leader (giveUp) has lost its majority
// or is cut off from it: the request gives up then, at once if it came
// later, with an error wrapping ErrNoLeader that says so, rather than hold
// its client until the write timeout and then say the same.
func (w *leaderWatch) withLeaderWhileElecting(ctx context.Context, backoff time.Duration, try func(leaderTarget) (done bool, err error)) error {
	return w.tryLeaders(ctx, backoff, true, try)
}

func (w *leaderWatch) tryLeaders(ctx context.Context, backoff time.Duration, impatient bool, try func(leaderTarget) (done bool, err error)) error {
	for {
		changed := w.changed.wait()
		target, err := w.leader()
		var retryAfter, lookAgain <-chan time.Time
		if err == nil {
			var done bool
			if done, err = try(target); done {
				return err
			}
		}
		switch {
		case !errors.Is(err, errLeaderUnknown):
			retryAfter = time.After(backoff)
		case impatient:
			var none error
			if lookAgain, none = w.giveUp(time.Now()); none != nil {
				return none
			}
		}
		select {
		case <-changed:
		case <-retryAfter:
		case <-lookAgain:
		case <-ctx.Done():
			return err
		case <-w.closing:
			return ErrClosed
		}
	}
}

package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// ProposeOptions say what a proposal waits for besides its commit.
type ProposeOptions struct {
	// Visible: return only once every other server (voters and read
	// replicas) that answers within visibilityWait has applied the entry
	// too, so that no node that reaches the leader still serves what the
	// write changed: deletes, edits, domains, key revocations.
	Visible bool
}

// Proposed is what a proposal's entry decided.
type Proposed struct {
	Index uint64 // the entry's log index
	// Response is what the state machine answered besides an error: the
	// link an edit left, the webhook as stored, or nil.
	Response any
}

// Proposer is what proposes commands: a *Node, or a test's fake.
type Proposer interface {
	Propose(ctx context.Context, cmd fsm.Command, opts ProposeOptions) (Proposed, error)
}

// Propose applies one command through Raft on this node, which must lead
// (httpd forwards the requests that propose to the leader). Every rule of
// a replicated write is here, once:
//   - the level: a command some server's build cannot apply is written as
//     its downgrade when it has one, and refused (ErrUpgrading) otherwise;
//   - readiness: it waits through an election, up to ctx and the write
//     timeout, for this node to lead in an established term, but not on a
//     node that has gone longer than an election takes without a leader
//     (ErrNoLeader at once);
//   - visibility, with opts.Visible.
//
// The state machine's refusal (fsm.ErrNotFound, ...) is the returned
// error, as are the write path's (ErrNoLeader, ErrTimeout, ErrClosed).
// Creates have their own path (Create, ProposeCreates): they are batched.
func (n *Node) Propose(ctx context.Context, cmd fsm.Command, opts ProposeOptions) (Proposed, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Writes.Timeout)
	defer cancel()
	cmd, err := n.Fit(ctx, cmd)
	if err != nil {
		return Proposed{}, err
	}
	if err := n.leadership.waitReadyWhileElecting(ctx); err != nil {
		return Proposed{}, err
	}
	resp, index, err := n.apply(cmd)
	if err != nil {
		return Proposed{}, err
	}
	if err, ok := resp.(error); ok {
		return Proposed{}, err
	}
	if opts.Visible {
		n.awaitServers(index)
	}
	return Proposed{Index: index, Response: resp}, nil
}

// ProposeFor is Propose for a command the state machine answers with a T.
func ProposeFor[T any](ctx context.Context, p Proposer, cmd fsm.Command, opts ProposeOptions) (T, uint64, error) {
	var zero T
	res, err := p.Propose(ctx, cmd, opts)
	if err != nil {
		return zero, 0, err
	}
	v, ok := res.Response.(T)
	if !ok {
		return zero, 0, fmt.Errorf("propose %T: the state machine answered %T", cmd, res.Response)
	}
	return v, res.Index, nil
}

// Fit is cmd as every server of the cluster can apply it: cmd itself, its
// downgrade (fsm.Downgrader) while some server's build is older, or
// ErrUpgrading when there is none.
func (n *Node) Fit(ctx context.Context, cmd fsm.Command) (fsm.Command, error) {
	err := n.levels.require(ctx, cmd.Level())
	if d, ok := cmd.(fsm.Downgrader); ok && errors.Is(err, ErrUpgrading) {
		if lower := d.Downgrade(); lower.Level() < cmd.Level() {
			return lower, n.levels.require(ctx, lower.Level())
		}
	}
	return cmd, err
}

// apply proposes one command and waits for the state machine's answer and
// the entry's index. It checks neither level nor readiness: it is for the
// leader's own entries (establish, purge, the registry) and for what
// Propose and the click path checked already.
func (n *Node) apply(cmd fsm.Command) (any, uint64, error) {
	return n.applyEntry(cmd.Encode())
}

// applyOwn applies one of the leader's own commands (what) and returns
// the state machine's refusal as an error.
func (n *Node) applyOwn(cmd fsm.Command, what string) error {
	resp, _, err := n.apply(cmd)
	if err == nil {
		err, _ = resp.(error)
	}
	if err != nil {
		return fmt.Errorf("apply %s: %w", what, err)
	}
	return nil
}

// applyEntry is apply for an entry already encoded.
func (n *Node) applyEntry(entry []byte) (any, uint64, error) {
	f := n.handOff(entry)
	if err := f.Error(); err != nil {
		return nil, 0, raftError(err)
	}
	return f.Response(), f.Index(), nil
}

// handOff hands one entry to Raft, unless a restore is under way: then it
// waits for the restore, which needs every entry proposed before it applied
// and none proposed until it is installed (see Restore). Only the hand-off
// is held, not the wait for the outcome.
func (n *Node) handOff(entry []byte) raft.ApplyFuture {
	n.proposals.RLock()
	defer n.proposals.RUnlock()
	return n.raft.Apply(entry, n.cfg.Writes.Timeout)
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

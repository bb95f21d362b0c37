package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/clicks"
	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
)

// newClickCounter counts this node's clicks and sends them through
// clickSender; it takes back what the last stop saved in the data dir.
func newClickCounter(n *Node) *clicks.Counter {
	return clicks.New(clicks.Config{
		Node: n.cfg.ID, Dir: n.cfg.DataDir, Applied: n.fsm, Sender: clickSender{n},
		FlushTimeout: n.cfg.Writes.Timeout, Logger: n.log,
	})
}

// Clicks is this node's click counter: the redirect records, the metrics
// read what waits for a flush.
func (n *Node) Clicks() *clicks.Counter { return n.clicks }

// clickSender puts this node's click batches in the log (clicks.Sender):
// applied here when this node leads, handed to the leader otherwise.
type clickSender struct{ n *Node }

// Send writes a batch as every server of the cluster applies it (Fit): with
// its visitors once every server applies them (see levels.go), and without
// them before, so that a cluster being upgraded counts clicks, and leaves
// bots out, as the previous release does. It waits up to ctx for a leader
// to exist. Only a failure to reach a leader is retried here; an unknown
// outcome is left to the next flush, which sends the same batch again. A
// leader's refusal is clicks.ErrRefused.
func (s clickSender) Send(ctx context.Context, b fsm.ClickBatch) error {
	n := s.n
	cmd, err := n.Fit(ctx, b)
	if err != nil {
		return fmt.Errorf("send click batch: %w", err)
	}
	entry := cmd.Encode()
	if n.standing.leavingForGood() {
		err = s.toServers(ctx, entry)
	} else {
		err = n.leadership.withLeader(ctx, 50*time.Millisecond, func(to leaderTarget) (bool, error) {
			var err error
			if to.self {
				_, _, err = n.applyEntry(entry)
			} else {
				var answer wire.ClicksAnswer
				err = n.peers.call(ctx, to.addr, fasthttp.MethodPost, wire.PathClicks, entry, &answer)
			}
			return !errors.Is(err, ErrNoLeader), err
		})
	}
	if errors.Is(err, ErrRefused) {
		return fmt.Errorf("%w: %w", clicks.ErrRefused, err)
	}
	return err
}

// toServers hands a click batch to the cluster from a server an
// operator removed (removed.go): its Raft is shut down, or about to be,
// and knows no leader for long, yet until it is stopped it serves the
// clients that still reach it, and whatever it counts must be counted.
// The servers of its last configuration know the leader, which alone
// takes a batch (the others answer 503, nothing applied): each is asked in
// turn, the leader Raft last reported first, over the cluster port (its
// own listener is closed; dialling out needs none). A batch sent to two
// of them, or again by the next flush, is applied once: the state machine
// takes a node's batch only above its last sequence (clicks package).
func (s clickSender) toServers(ctx context.Context, entry []byte) error {
	n := s.n
	servers, err := configuration(n.raft)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoLeader, err)
	}
	self := raft.ServerID(n.cfg.ID)
	addr, leader := n.raft.LeaderWithID()
	var to []string
	if leader != "" && leader != self {
		to = append(to, string(n.addrs.resolve(leader, addr)))
	}
	for _, s := range servers {
		if s.ID != self && s.ID != leader {
			to = append(to, string(n.addrs.resolve(s.ID, s.Address)))
		}
	}
	last := errors.New("no other server in its last configuration")
	for _, addr := range to {
		var answer wire.ClicksAnswer
		err := n.peers.call(ctx, addr, fasthttp.MethodPost, wire.PathClicks, entry, &answer)
		if err == nil || errors.Is(err, ErrRefused) {
			return err
		}
		if last = err; ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("%w: no server of the cluster took the clicks of this removed server: %w", ErrNoLeader, last)
}

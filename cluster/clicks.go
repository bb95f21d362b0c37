package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

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
		FlushTimeout: n.cfg.WriteTimeout, Logger: n.log,
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
	if errors.Is(err, ErrRefused) {
		return fmt.Errorf("%w: %w", clicks.ErrRefused, err)
	}
	return err
}

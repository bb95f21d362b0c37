package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// ErrLeaderIsSelf tells Forward's caller to serve the request itself.
var ErrLeaderIsSelf = errors.New("this node is the leader")

// ForwardOptions say how long a forwarded request may take and whether it
// may be sent again once it might have reached the leader.
type ForwardOptions struct {
	Timeout time.Duration // 0: the write timeout
	// Idempotent requests (creates with an idempotency key) are sent again
	// after any error; others only when the connection was never made.
	Idempotent bool
}

// Forward relays a public request that must be served by the leader and
// fills resp with the leader's answer. It waits for a leader until the
// timeout. It returns ErrLeaderIsSelf when this node leads, ErrNoLeader
// when no leader could be reached in time, and ErrTimeout when a request
// that is not idempotent got no answer: it may have been applied.
//
// An idempotent request in flight to a leader that Raft reports gone (it
// died, froze or was cut off) is sent again to the next leader instead of
// waiting on the old one until the timeout: a frozen leader's sockets stay
// open, so nothing else would end the wait.
func (n *Node) Forward(req *fasthttp.Request, resp *fasthttp.Response, opts ForwardOptions) error {
	if opts.Timeout <= 0 {
		opts.Timeout = n.cfg.WriteTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	n.markForwarded(req)
	err := n.withLeader(ctx, 50*time.Millisecond, func(to leaderTarget) (bool, error) {
		if to.self {
			return true, ErrLeaderIsSelf
		}
		err := n.sendToLeader(ctx, to.addr, req, resp, opts.Idempotent)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, errLeaderChanged):
			return false, err
		case !opts.Idempotent && !neverSent(err):
			return true, fmt.Errorf("%w: %v", ErrTimeout, err)
		}
		return false, fmt.Errorf("%w: %v", ErrNoLeader, err)
	})
	if err != nil {
		return err
	}
	return n.applyLeaderIndex(ctx, resp)
}

// errLeaderChanged abandons an idempotent request whose leader Raft no
// longer reports.
var errLeaderChanged = fmt.Errorf("%w: the leader changed while the request was in flight", ErrNoLeader)

// sendToLeader sends req to addr. An idempotent request is abandoned
// (errLeaderChanged) as soon as addr is no longer the leader's address;
// its attempt runs out on its own copy of the request, which the leader
// may still apply: the idempotency key makes the next attempt return that
// outcome rather than apply it twice.
func (n *Node) sendToLeader(ctx context.Context, addr string, req *fasthttp.Request, resp *fasthttp.Response, idempotent bool) error {
	deadline, _ := ctx.Deadline()
	client := n.peers.client(addr)
	if !idempotent {
		return client.DoDeadline(req, resp, deadline)
	}
	attempt := &fasthttp.Request{}
	req.CopyTo(attempt)
	answer := &fasthttp.Response{}
	done := make(chan error, 1)
	go func() { done <- client.DoDeadline(attempt, answer, deadline) }()
	for {
		changed := n.leaderChanged.wait()
		if to, err := n.leader(); err != nil || to.addr != addr {
			return errLeaderChanged
		}
		select {
		case err := <-done:
			if err == nil {
				answer.CopyTo(resp)
			}
			return err
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// applyLeaderIndex waits, when the leader's answer names the index its
// write was applied at, until this node has applied it too, so the client
// that got the answer here reads its own write here. The header is the
// cluster's, not the client's: it is removed.
func (n *Node) applyLeaderIndex(ctx context.Context, resp *fasthttp.Response) error {
	raw := resp.Header.Peek(AppliedIndexHeader)
	if len(raw) == 0 {
		return nil
	}
	index, err := strconv.ParseUint(string(raw), 10, 64)
	resp.Header.Del(AppliedIndexHeader)
	if err != nil {
		return nil
	}
	if err := n.waitApplied(ctx, index); err != nil {
		return fmt.Errorf("%w: the leader applied it at index %d, this node has not yet", ErrTimeout, index)
	}
	return nil
}

// neverSent reports whether a client error happened before the request
// could reach the server, so sending it again cannot apply it twice.
func neverSent(err error) bool {
	var dial *fasthttp.ErrDialWithUpstream
	return errors.As(err, &dial) || errors.Is(err, fasthttp.ErrDialTimeout)
}

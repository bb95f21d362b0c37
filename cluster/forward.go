package cluster

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
)

// ForwardOptions say how long a forwarded request may take.
type ForwardOptions struct {
	Timeout time.Duration // 0: the write timeout
	// Kind names what is forwarded in linkraft_forwarded_requests_total
	// ("write", "admin"); empty: "request".
	Kind string
	// Level is the entry level the request's write needs (fsm.LevelKeys
	// when 0): a request that needs more than some server applies is not
	// sent, since a leader of an older build would not know it.
	Level int
}

// Forward relays a public request that must be served by the leader (a
// delete, an admin call, a visit to a limited link) and fills resp with
// the leader's answer, as Consul's ForwardRPC does: forwarded is false,
// with no error, when this node leads and its caller serves the request
// itself. It waits for a leader up to the write timeout, but not on a node
// that has gone longer than an election takes without one
// (withLeaderWhileElecting), and for the answer up to opts.Timeout. Its
// errors: ErrNoLeader when no leader could be reached in time (or none is
// known after an election's worth of time), ErrTimeout when the request
// got no answer (it may have been applied, so it is sent again only when
// the connection was never made), ErrUpgrading when a server cannot apply
// what it writes.
// Creates do not come here: they are relayed in batches (Create, relay.go).
func (n *Node) Forward(req *fasthttp.Request, resp *fasthttp.Response, opts ForwardOptions) (forwarded bool, err error) {
	if opts.Timeout <= 0 {
		opts.Timeout = n.cfg.Writes.Timeout
	}
	if opts.Kind == "" {
		opts.Kind = "request"
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	if err := n.levels.require(ctx, opts.Level); err != nil {
		return false, err
	}
	// Finding a leader takes at most the write timeout, however long the
	// request may take once sent (a restore): without a leader the client
	// gets its 503, or the local answer, in seconds, or at once on a node
	// that has been without one for longer than an election takes.
	find, cancelFind := context.WithTimeout(ctx, n.cfg.Writes.Timeout)
	defer cancelFind()
	deadline, _ := ctx.Deadline()
	here := false
	err = n.leadership.withLeaderWhileElecting(find, 50*time.Millisecond, func(to leaderTarget) (bool, error) {
		if here = to.self; here {
			return true, nil
		}
		resp.StreamBody = true // read by readAnswerBody
		err := n.peers.Do(to.addr, req, resp, deadline)
		if err == nil {
			err = readAnswerBody(resp)
		}
		switch {
		case err == nil:
			return true, nil
		case !wire.NeverSent(err):
			return true, fmt.Errorf("%w: %v", ErrTimeout, err)
		}
		return false, fmt.Errorf("%w: %v", ErrNoLeader, err)
	})
	if here {
		return false, nil
	}
	if err == nil {
		err = awaitLeaderIndex(ctx, n.machine, resp)
	}
	n.metrics.forwarded(opts.Kind, err)
	return true, err
}

// readAnswerBody reads the leader's answer, which fasthttp left streamed,
// with wire.ReadBody: read by fasthttp, a large answer (a backup, an
// export) would be cleared in one call the runtime cannot preempt. The
// connection's deadline is still the request's.
func readAnswerBody(resp *fasthttp.Response) error {
	stream := resp.BodyStream()
	if stream == nil {
		return nil
	}
	defer resp.CloseBodyStream()
	body, err := wire.ReadBody(stream, resp.Header.ContentLength())
	if err != nil {
		return fmt.Errorf("reading the leader's answer: %w", err)
	}
	resp.SetBodyRaw(body)
	return nil
}

// awaitLeaderIndex waits, when the leader's answer names the index its
// write was applied at, until this node's machine has applied it too, so
// the client that got the answer here reads its own write here. The
// header is the cluster's, not the client's: it is removed.
func awaitLeaderIndex(ctx context.Context, machine *appliedFSM, resp *fasthttp.Response) error {
	raw := resp.Header.Peek(wire.AppliedIndexHeader)
	if len(raw) == 0 {
		return nil
	}
	index, err := strconv.ParseUint(string(raw), 10, 64)
	resp.Header.Del(wire.AppliedIndexHeader)
	if err != nil {
		return nil
	}
	if err := machine.waitApplied(ctx, index); err != nil {
		return fmt.Errorf("%w: the leader applied it at index %d, this node has not yet", ErrTimeout, index)
	}
	return nil
}

package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
)

// ErrRefused is a leader's permanent refusal of an internal request (a 4xx
// other than 429): sending it again would be refused again.
var ErrRefused = errors.New("refused by the leader")

// peerClient is the node-to-node client with this package's meaning of
// its errors, and the write timeout as the bound of a call whose context
// has none.
type peerClient struct {
	*wire.Client
	timeout time.Duration
	// heard is told what a server answered to GET node (its entry level).
	heard func(wire.NodeInfo)
	// self is this node, addrs where the others are (appliedIndexes).
	self  raft.ServerID
	addrs *addressBook
	log   *slog.Logger
}

// call makes one exchange with the node at addr and decodes its JSON
// answer into out, bounded by ctx or else the write timeout. A 4xx other
// than 429 is ErrRefused; any other failure is ErrNoLeader, which callers
// may retry.
func (c *peerClient) call(ctx context.Context, addr, method, path string, body []byte, out wire.Message) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	err := c.Call(ctx, addr, method, path, body, out)
	var status *wire.StatusError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &status) && status.Refused():
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return fmt.Errorf("%w: %w", ErrNoLeader, err)
}

// nodeInfo asks the server at raftAddr who it is.
func (c *peerClient) nodeInfo(raftAddr string, timeout time.Duration) (wire.NodeInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var info wire.NodeInfo
	err := c.call(ctx, raftAddr, fasthttp.MethodGet, wire.PathNode, nil, &info)
	if err == nil && info.ID != "" {
		c.heard(info)
	}
	return info, err
}

// peerKey marks, in a request's user values, a request that arrived on
// the cluster's port (see peerService).
type peerKey struct{}

// FromPeer reports whether another node of this cluster sent the request:
// whether it arrived on the cluster's port, which only a connection that
// completed the mutual-TLS handshake with the cluster key reaches. Nothing
// in the request itself is believed: the public port never marks a request
// so, whatever its headers say. Such requests were already rate limited
// and authorised by the node that received them from the client.
func FromPeer(ctx *fasthttp.RequestCtx) bool {
	v, _ := ctx.UserValue(peerKey{}).(bool)
	return v
}

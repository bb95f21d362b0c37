package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
)

// ErrRefused is a leader's permanent refusal of an internal request (a 4xx
// other than 429): sending it again would be refused again.
var ErrRefused = errors.New("refused by the leader")

// ownIP is the IP of this node's Raft address, which its peers know it by.
func (n *Node) ownIP() net.IP {
	host, _, err := net.SplitHostPort(string(n.transport.LocalAddr()))
	if err != nil {
		return nil
	}
	return net.ParseIP(host)
}

// call makes one exchange with the node at addr and decodes its JSON
// answer into out, bounded by ctx or else the write timeout. A 4xx other
// than 429 is ErrRefused; any other failure is ErrNoLeader, which callers
// may retry.
func (n *Node) call(ctx context.Context, addr, method, path string, body []byte, out wire.Message) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.cfg.WriteTimeout)
		defer cancel()
	}
	err := n.peers.Call(ctx, addr, method, path, body, out)
	var status *wire.StatusError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &status) && status.Refused():
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return fmt.Errorf("%w: %w", ErrNoLeader, err)
}

// nodeInfoOf asks the server at httpAddr who it is.
func (n *Node) nodeInfoOf(httpAddr string, timeout time.Duration) (wire.NodeInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var info wire.NodeInfo
	err := n.call(ctx, httpAddr, fasthttp.MethodGet, wire.PathNode, nil, &info)
	return info, err
}

// FromPeer reports whether a request comes from another node of this
// cluster: it carries a sender's mark and, with a cluster key, a valid
// signature made within the last minute; without a key it must come from
// the host of a server in the Raft configuration (a trusted network is
// assumed then). Such requests were already rate limited and authorised by
// the node that received them from the client.
func (n *Node) FromPeer(req *fasthttp.Request, remote net.IP) bool {
	if !wire.Marked(req) {
		return false
	}
	if n.cfg.Key != nil {
		return wire.Verify(req, n.cfg.Key, time.Now())
	}
	servers, err := n.configuration()
	if err != nil {
		return false
	}
	for _, s := range servers {
		if host, _, err := net.SplitHostPort(string(s.Address)); err == nil && net.ParseIP(host).Equal(remote) {
			return true
		}
	}
	return false
}

package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Internal HTTP endpoints the leader serves to the other nodes, and the
// headers of node-to-node requests.
const (
	ReadIndexPath   = "/internal/v1/read-index"
	ClicksPath      = "/internal/v1/clicks"
	LinkPath        = "/internal/v1/links/" // + code
	SignatureHeader = "X-Linkraft-Signature"
	SignedAtHeader  = "X-Linkraft-Signed-At"
	// ForwardedHeader marks a request a node forwarded to the leader; the
	// receiver never forwards it again, so leadership changes cannot make
	// requests loop.
	ForwardedHeader = "X-Linkraft-Forwarded"
)

// ErrLeaderIsSelf tells Forward's caller to serve the request itself.
var ErrLeaderIsSelf = errors.New("this node is the leader")

// ErrRefused is a leader's permanent refusal of an internal request (a 4xx
// other than 429): sending it again would be refused again.
var ErrRefused = errors.New("refused by the leader")

// peers holds one fasthttp HostClient per peer HTTP address.
type peers struct {
	mu      sync.Mutex
	clients map[string]*fasthttp.HostClient
}

func (p *peers) client(addr string) *fasthttp.HostClient {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[addr]; ok {
		return c
	}
	c := &fasthttp.HostClient{
		Addr:                addr,
		Name:                "linkraft-forward",
		MaxConns:            1024,
		MaxIdleConnDuration: 30 * time.Second,
		// Forwarded requests are retried by Forward itself, idempotently.
		RetryIfErr: func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
	}
	if p.clients == nil {
		p.clients = map[string]*fasthttp.HostClient{}
	}
	p.clients[addr] = c
	return c
}

// leaderHTTP returns the leader's HTTP address, or self when this node leads.
func (n *Node) leaderHTTP() (addr string, self, ok bool) {
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return "", false, false
	}
	if string(id) == n.cfg.ID {
		return n.cfg.HTTPAddr, true, true
	}
	addr, ok = n.httpAddrOf(id)
	return addr, false, ok
}

// ForwardOptions say how long a forwarded request may take and whether it
// may be sent again once it might have reached the leader.
type ForwardOptions struct {
	Timeout time.Duration // 0: the write timeout
	// Idempotent requests (creates with an idempotency key) are sent again
	// after any error; others only when the connection was never made.
	Idempotent bool
}

// Forward sends req to the leader and fills resp. It waits for a leader
// until the timeout. It returns ErrLeaderIsSelf when this node leads,
// ErrNoLeader when no leader could be reached in time, and ErrTimeout when
// a request that is not idempotent got no answer: it may have been applied.
func (n *Node) Forward(req *fasthttp.Request, resp *fasthttp.Response, opts ForwardOptions) error {
	if opts.Timeout <= 0 {
		opts.Timeout = n.cfg.WriteTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	req.Header.Set(ForwardedHeader, n.cfg.ID)
	n.sign(req)
	return n.retry(ctx, 50*time.Millisecond, func() (bool, error) {
		addr, self, ok := n.leaderHTTP()
		switch {
		case ok && self:
			return true, ErrLeaderIsSelf
		case !ok:
			return false, ErrNoLeader
		}
		err := n.peers.client(addr).DoDeadline(req, resp, deadline)
		switch {
		case err == nil:
			return true, nil
		case !opts.Idempotent && !neverSent(err):
			return true, fmt.Errorf("%w: %v", ErrTimeout, err)
		}
		return false, fmt.Errorf("%w: %v", ErrNoLeader, err)
	})
}

// neverSent reports whether a client error happened before the request
// could reach the server, so sending it again cannot apply it twice.
func neverSent(err error) bool {
	var dial *fasthttp.ErrDialWithUpstream
	return errors.As(err, &dial) || errors.Is(err, fasthttp.ErrDialTimeout)
}

// callLeader makes a signed internal request to the leader and decodes its
// JSON answer into out.
func (n *Node) callLeader(ctx context.Context, method, path string, body []byte, out any) error {
	addr, self, ok := n.leaderHTTP()
	switch {
	case !ok:
		return ErrNoLeader
	case self:
		return ErrLeaderIsSelf
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI("http://" + addr + path)
	req.SetBody(body)
	req.Header.Set(ForwardedHeader, n.cfg.ID)
	n.sign(req)
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(n.cfg.WriteTimeout)
	}
	if err := n.peers.client(addr).DoDeadline(req, resp, deadline); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	switch status := resp.StatusCode(); {
	case status == fasthttp.StatusOK:
	case status >= 400 && status < 500 && status != fasthttp.StatusTooManyRequests:
		return fmt.Errorf("%s %s: leader answered %d %s: %w", method, path, status, resp.Body(), ErrRefused)
	default:
		return fmt.Errorf("%s %s: leader answered %d: %w", method, path, status, ErrNoLeader)
	}
	if err := json.Unmarshal(resp.Body(), out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// signedMessage is what a node-to-node request's signature covers: the
// sending node, the time it was signed, the method, URI, idempotency key
// and body. The time bounds how long a captured request could be replayed.
func signedMessage(req *fasthttp.Request) []byte {
	var msg []byte
	for _, part := range [][]byte{
		req.Header.Peek(ForwardedHeader), req.Header.Peek(SignedAtHeader), req.Header.Method(),
		req.URI().RequestURI(), req.Header.Peek("Idempotency-Key"),
	} {
		msg = append(append(msg, part...), '\n')
	}
	return append(msg, req.Body()...)
}

// signatureWindow is how far a signed request's time may be from the
// receiver's clock.
const signatureWindow = time.Minute

// sign adds the cluster key's signature to a node-to-node request.
func (n *Node) sign(req *fasthttp.Request) {
	if n.cfg.Key != nil {
		req.Header.Set(SignedAtHeader, strconv.FormatInt(time.Now().Unix(), 10))
		req.Header.Set(SignatureHeader, n.cfg.Key.Sign(signedMessage(req)))
	}
}

// FromPeer reports whether a request comes from another node of this
// cluster: it carries the forwarded mark and, with a cluster key, a valid
// signature made within the last minute; without a key it must come from
// the host of a server in the Raft configuration (a trusted network is
// assumed then). Such requests were already rate limited and authorised by
// the node that received them from the client.
func (n *Node) FromPeer(req *fasthttp.Request, remote net.IP) bool {
	if len(req.Header.Peek(ForwardedHeader)) == 0 {
		return false
	}
	if n.cfg.Key != nil {
		signedAt, err := strconv.ParseInt(string(req.Header.Peek(SignedAtHeader)), 10, 64)
		if err != nil || time.Since(time.Unix(signedAt, 0)).Abs() > signatureWindow {
			return false
		}
		return n.cfg.Key.Verify(signedMessage(req), string(req.Header.Peek(SignatureHeader)))
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

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

// ErrRefused is a leader's permanent refusal of an internal request (a 4xx
// other than 429): sending it again would be refused again.
var ErrRefused = errors.New("refused by the leader")

// peers holds one fasthttp HostClient per peer HTTP address.
type peers struct {
	mu      sync.Mutex
	clients map[string]*fasthttp.HostClient
}

// client returns the client for the peer at addr. local is the address
// this node is known by; see sourceAddr.
func (p *peers) client(addr string, local func() net.IP) *fasthttp.HostClient {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[addr]; ok {
		return c
	}
	c := &fasthttp.HostClient{
		Addr:                addr,
		Name:                "linkraft-peer",
		MaxConns:            1024,
		MaxIdleConnDuration: 30 * time.Second,
		// Callers decide what may be sent again (see Forward, relay.go).
		RetryIfErr: func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
	}
	if src := sourceAddr(addr, local()); src != nil {
		c.DialTimeout = (&fasthttp.TCPDialer{LocalAddr: src}).DialTimeout
	}
	if p.clients == nil {
		p.clients = map[string]*fasthttp.HostClient{}
	}
	p.clients[addr] = c
	return c
}

// sourceAddr is the address to dial the peer at addr from, or nil for the
// system's choice. Without a cluster key a peer is recognised by its IP
// (FromPeer), which must then be the one this node is known by. Across a
// network the system picks the interface's address, which is that IP; on
// one host's loopback (several nodes on 127.0.0.x) it would pick 127.0.0.1
// for every node, so there the node dials from its own address.
func sourceAddr(addr string, local net.IP) *net.TCPAddr {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() || local == nil || !local.IsLoopback() {
		return nil
	}
	return &net.TCPAddr{IP: local}
}

// peer is the client for the peer at addr.
func (n *Node) peer(addr string) *fasthttp.HostClient { return n.peers.client(addr, n.ownIP) }

// ownIP is the IP of this node's Raft address, which its peers know it by.
func (n *Node) ownIP() net.IP {
	host, _, err := net.SplitHostPort(string(n.transport.LocalAddr()))
	if err != nil {
		return nil
	}
	return net.ParseIP(host)
}

// call makes one signed protocol request to the node at addr and decodes
// its JSON answer into out. A 4xx other than 429 is ErrRefused; any other
// failure is ErrNoLeader, which callers may retry.
func (n *Node) call(ctx context.Context, addr, method, path string, body []byte, out versioned) error {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI("http://" + addr + path)
	req.SetBody(body)
	n.markForwarded(req)
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(n.cfg.WriteTimeout)
	}
	if err := n.peer(addr).DoDeadline(req, resp, deadline); err != nil {
		return fmt.Errorf("%s %s: %w: %v", method, path, ErrNoLeader, err)
	}
	switch status := resp.StatusCode(); {
	case status == fasthttp.StatusOK:
	case status >= 400 && status < 500 && status != fasthttp.StatusTooManyRequests:
		return fmt.Errorf("%s %s: %s answered %d %s: %w", method, path, addr, status, resp.Body(), ErrRefused)
	default:
		return fmt.Errorf("%s %s: %s answered %d: %w", method, path, addr, status, ErrNoLeader)
	}
	if err := decodeMessage(resp.Body(), out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// decodeMessage reads a protocol message and checks its version.
func decodeMessage(data []byte, out versioned) error {
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode message: %w", err)
	}
	if v := out.version(); v != protocolVersion {
		return fmt.Errorf("protocol version %d, this node speaks %d", v, protocolVersion)
	}
	return nil
}

// nodeInfoOf asks the server at httpAddr who it is.
func (n *Node) nodeInfoOf(httpAddr string, timeout time.Duration) (nodeInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var info nodeInfo
	err := n.call(ctx, httpAddr, fasthttp.MethodGet, nodePath, nil, &info)
	return info, err
}

// markForwarded names this node as the sender of a node-to-node request
// and, with a cluster key, signs it.
func (n *Node) markForwarded(req *fasthttp.Request) {
	req.Header.Set(ForwardedHeader, n.cfg.ID)
	if n.cfg.Key != nil {
		req.Header.Set(signedAtHeader, strconv.FormatInt(time.Now().Unix(), 10))
		req.Header.Set(signatureHeader, n.cfg.Key.Sign(signedMessage(req)))
	}
}

// signedMessage is what a node-to-node request's signature covers: the
// sending node, the time it was signed, the method, URI, idempotency key,
// the client's request time and body. The time bounds how long a captured request could be replayed.
func signedMessage(req *fasthttp.Request) []byte {
	var msg []byte
	for _, part := range [][]byte{
		req.Header.Peek(ForwardedHeader), req.Header.Peek(signedAtHeader), req.Header.Method(),
		req.URI().RequestURI(), req.Header.Peek("Idempotency-Key"), req.Header.Peek(RequestTimeHeader),
	} {
		msg = append(append(msg, part...), '\n')
	}
	return append(msg, req.Body()...)
}

// signatureWindow is how far a signed request's time may be from the
// receiver's clock.
const signatureWindow = time.Minute

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
		signedAt, err := strconv.ParseInt(string(req.Header.Peek(signedAtHeader)), 10, 64)
		if err != nil || time.Since(time.Unix(signedAt, 0)).Abs() > signatureWindow {
			return false
		}
		return n.cfg.Key.Verify(signedMessage(req), string(req.Header.Peek(signatureHeader)))
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

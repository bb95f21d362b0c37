package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/secure"
)

// StatusError is a peer's answer other than 200: the exchange reached the
// peer, which refused or could not serve it. Callers decide from Status
// what it means for them (see cluster's callers).
type StatusError struct {
	Method, Path, Addr string
	Status             int
	Body               string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: %s answered %d %s", e.Method, e.Path, e.Addr, e.Status, e.Body)
}

// Refused reports whether the peer refused the request for good: a 4xx
// other than 429, which sending again would get again.
func (e *StatusError) Refused() bool {
	return e.Status >= 400 && e.Status < 500 && e.Status != fasthttp.StatusTooManyRequests
}

// Client makes this node's requests to its peers, one fasthttp HostClient
// per peer address. It is safe for concurrent use.
type Client struct {
	id  string      // this node's id, named in every request
	key *secure.Key // signs every request; nil: no signature
	// localIP is the IP this node is known by (see sourceAddr).
	localIP func() net.IP

	mu      sync.Mutex
	clients map[string]*fasthttp.HostClient
}

// NewClient returns the client of node id.
func NewClient(id string, key *secure.Key, localIP func() net.IP) *Client {
	return &Client{id: id, key: key, localIP: localIP, clients: map[string]*fasthttp.HostClient{}}
}

// host returns the HostClient for the peer at addr.
func (c *Client) host(addr string) *fasthttp.HostClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.clients[addr]; ok {
		return h
	}
	h := &fasthttp.HostClient{
		Addr:                addr,
		Name:                "linkraft-peer",
		MaxConns:            1024,
		MaxIdleConnDuration: 30 * time.Second,
		// Callers decide what may be sent again (cluster's Forward, relay).
		RetryIfErr: func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
	}
	if src := sourceAddr(addr, c.localIP()); src != nil {
		h.DialTimeout = (&fasthttp.TCPDialer{LocalAddr: src}).DialTimeout
	}
	c.clients[addr] = h
	return h
}

// sourceAddr is the address to dial the peer at addr from, or nil for the
// system's choice. Without a cluster key a peer is recognised by its IP,
// which must then be the one this node is known by. Across a network the
// system picks the interface's address, which is that IP; on one host's
// loopback (several nodes on 127.0.0.x) it would pick 127.0.0.1 for every
// node, so there the node dials from its own address.
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

// Do sends req, marked as this node's, to the peer at addr and fills resp
// with whatever it answers, by deadline. The error is the transport's:
// see NeverSent for whether the request may have reached the peer.
func (c *Client) Do(addr string, req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error {
	c.mark(req)
	return c.host(addr).DoDeadline(req, resp, deadline)
}

// Call makes one exchange with the peer at addr and decodes its answer
// into out. An answer other than 200 is a *StatusError; a request that got
// no answer is the transport's error, wrapped.
func (c *Client) Call(ctx context.Context, addr, method, path string, body []byte, out Message) error {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI("http://" + addr + path)
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return fmt.Errorf("%s %s to %s: no deadline", method, path, addr)
	}
	if err := c.Do(addr, req, resp, deadline); err != nil {
		return fmt.Errorf("%s %s to %s: %w", method, path, addr, err)
	}
	if status := resp.StatusCode(); status != fasthttp.StatusOK {
		return &StatusError{Method: method, Path: path, Addr: addr, Status: status, Body: string(resp.Body())}
	}
	if err := Decode(resp.Body(), out); err != nil {
		return fmt.Errorf("%s %s to %s: %w", method, path, addr, err)
	}
	return nil
}

// mark names this node as the sender of a request and, with a cluster
// key, signs it: every request a node sends to a peer is marked.
func (c *Client) mark(req *fasthttp.Request) {
	req.Header.Set(ForwardedHeader, c.id)
	if c.key != nil {
		req.Header.Set(signedAtHeader, strconv.FormatInt(time.Now().Unix(), 10))
		req.Header.Set(signatureHeader, c.key.Sign(signedMessage(req)))
	}
}

// signedMessage is what a node-to-node request's signature covers: the
// sending node, the time it was signed, the method, URI, idempotency key,
// the client's request time and body. The time bounds how long a captured
// request could be replayed.
func signedMessage(req *fasthttp.Request) []byte {
	var msg []byte
	for _, part := range [][]byte{
		req.Header.Peek(ForwardedHeader), req.Header.Peek(signedAtHeader), req.Header.Method(),
		req.URI().RequestURI(), req.Header.Peek(idempotencyHeader), req.Header.Peek(RequestTimeHeader),
	} {
		msg = append(append(msg, part...), '\n')
	}
	return append(msg, req.Body()...)
}

// signatureWindow is how far a signed request's time may be from the
// receiver's clock.
const signatureWindow = time.Minute

// Marked reports whether req carries a sender's mark.
func Marked(req *fasthttp.Request) bool { return len(req.Header.Peek(ForwardedHeader)) > 0 }

// Verify reports whether req carries a valid signature by key made within
// signatureWindow of now.
func Verify(req *fasthttp.Request, key *secure.Key, now time.Time) bool {
	signedAt, err := strconv.ParseInt(string(req.Header.Peek(signedAtHeader)), 10, 64)
	if err != nil || now.Sub(time.Unix(signedAt, 0)).Abs() > signatureWindow {
		return false
	}
	return key.Verify(signedMessage(req), string(req.Header.Peek(signatureHeader)))
}

// NeverSent reports whether a transport error happened before the request
// could reach the peer, so sending it again cannot apply it twice.
func NeverSent(err error) bool {
	var dial *fasthttp.ErrDialWithUpstream
	return errors.As(err, &dial) || errors.Is(err, fasthttp.ErrDialTimeout)
}

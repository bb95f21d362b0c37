package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// StatusError is a peer's answer other than 200: the exchange reached the
// peer, which refused or could not serve it. Callers decide from Status
// what it means for them (see cluster's callers).
type StatusError struct {
	Method, Path, Addr string
	Status             int
	Body               string
}

// Error names the request, the peer and what the peer answered.
func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: %s answered %d %s", e.Method, e.Path, e.Addr, e.Status, e.Body)
}

// Refused reports whether the peer refused the request for good: a 4xx
// other than 429, which sending again would get again.
func (e *StatusError) Refused() bool {
	return e.Status >= 400 && e.Status < 500 && e.Status != fasthttp.StatusTooManyRequests
}

// Dialer connects to a peer's internal HTTP at its Raft address, within
// timeout (the cluster's stream layer: mutual TLS with a cluster key).
type Dialer func(addr string, timeout time.Duration) (net.Conn, error)

// dialTimeout bounds one connection attempt, the TLS handshake included:
// a peer that is cut off must not hold an attempt for a whole write
// timeout (callers try the next leader instead).
const dialTimeout = 2 * time.Second

// Client makes this node's requests to its peers, one fasthttp HostClient
// per peer address, over connections its Dialer makes. It is safe for
// concurrent use.
type Client struct {
	id   string // this node's id, named in every request
	dial Dialer

	mu      sync.Mutex
	clients map[string]*fasthttp.HostClient
}

// NewClient returns the client of node id.
func NewClient(id string, dial Dialer) *Client {
	return &Client{id: id, dial: dial, clients: map[string]*fasthttp.HostClient{}}
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
		DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
			if timeout <= 0 || timeout > dialTimeout {
				timeout = dialTimeout
			}
			conn, err := c.dial(addr, timeout)
			if err != nil {
				return nil, &dialError{err: err}
			}
			return conn, nil
		},
	}
	c.clients[addr] = h
	return h
}

// dialError is a connection that was never made: nothing was sent.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

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

// mark names this node as the sender of a request: its receiver never
// forwards it again, so requests cannot loop. The name proves nothing;
// that a request comes from a peer is the connection's to prove (it
// arrived on the cluster's port, through its handshake).
func (c *Client) mark(req *fasthttp.Request) {
	req.Header.Set(ForwardedHeader, c.id)
}

// NeverSent reports whether a transport error happened before the request
// could reach the peer, so sending it again cannot apply it twice.
func NeverSent(err error) bool {
	var dial *dialError
	return errors.As(err, &dial) || errors.Is(err, fasthttp.ErrDialTimeout)
}

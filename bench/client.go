package bench

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// target is one node and its connection pool.
type target struct {
	addr   string
	client *fasthttp.HostClient
}

// newTargets gives every address a HostClient with room for every worker:
// in an open loop any worker may talk to any target.
func newTargets(addrs []string, conns int) []*target {
	out := make([]*target, len(addrs))
	for i, addr := range addrs {
		out[i] = &target{addr: addr, client: &fasthttp.HostClient{
			Addr:                   addr,
			Name:                   "linkraft-bench",
			MaxConns:               conns + 8,
			MaxIdleConnDuration:    time.Minute,
			DisablePathNormalizing: true,
			// One request sent is one request counted: never resend, or the
			// server's counters and the report could disagree.
			MaxIdemponentCallAttempts: 1,
			RetryIfErr:                func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
		}}
	}
	return out
}

func closeTargets(ts []*target) {
	for _, t := range ts {
		t.client.CloseIdleConnections()
	}
}

// conn is one worker's reusable request and response. Not safe for
// concurrent use.
type conn struct {
	req     fasthttp.Request
	resp    fasthttp.Response
	path    []byte
	body    []byte
	timeout time.Duration
	auth    string // Authorization header of creates, deletes and stats reads
	// workspace is where creates go; it needs no JSON escaping (validate).
	workspace string
}

func newConn(timeout time.Duration, key, workspace string) *conn {
	c := &conn{timeout: timeout, workspace: workspace}
	if key != "" {
		c.auth = "Bearer " + key
	}
	return c
}

// send makes one request of kind o to t and returns the status, or the
// transport error when there was no HTTP answer. Redirects are not
// followed. For a create, body is the JSON to post.
func (c *conn) send(t *target, o op, code string, body []byte) (int, error) {
	c.build(t.addr, o, code, body)
	if err := t.client.DoTimeout(&c.req, &c.resp, c.timeout); err != nil {
		return 0, err
	}
	return c.resp.StatusCode(), nil
}

func (c *conn) build(host string, o op, code string, body []byte) {
	c.req.Reset()
	c.req.Header.SetHost(host)
	p := c.path[:0]
	switch o {
	case opRedirect:
		p = append(append(p, '/'), code...)
	case opStats:
		p = append(append(append(p, "/api/v1/urls/"...), code...), "/stats"...)
		c.setAuth()
	case opCreate:
		p = append(p, "/api/v1/urls"...)
		c.setAuth()
		c.req.Header.SetMethod(fasthttp.MethodPost)
		c.req.Header.SetContentType("application/json")
		c.req.SetBody(body)
	case opDelete:
		p = append(append(p, "/api/v1/urls/"...), code...)
		c.setAuth()
		c.req.Header.SetMethod(fasthttp.MethodDelete)
	}
	c.path = p
	c.req.SetRequestURIBytes(p)
}

func (c *conn) setAuth() {
	if c.auth != "" {
		c.req.Header.Set(fasthttp.HeaderAuthorization, c.auth)
	}
}

// createBody is the JSON of a create of prefix/parts... in c's workspace,
// built in c's buffer (valid until the next call). prefix must need no JSON
// escaping.
func (c *conn) createBody(prefix string, parts ...int64) []byte {
	b := append(c.body[:0], `{"url":"`...)
	b = append(b, prefix...)
	for _, p := range parts {
		b = append(b, '/')
		b = strconv.AppendInt(b, p, 10)
	}
	b = append(append(append(b, `","workspace":"`...), c.workspace...), `"}`...)
	c.body = b
	return b
}

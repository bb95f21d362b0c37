package e2e

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestHeadRedirectKeepsTheConnection: link checkers and monitors follow
// short links with HEAD. A 302 to HEAD must say it has no body
// (Content-Length: 0), or a client that cannot tell where the answer ends
// (fasthttp's, for one) closes the connection after every request and runs
// out of ports under load. Twenty HEADs and twenty GETs take one connection.
func TestHeadRedirectKeepsTheConnection(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})
	l := n.createURL(t, "https://example.com/keep-alive")

	var dials atomic.Int32
	c := &fasthttp.HostClient{
		Addr: n.httpAddr,
		Dial: func(addr string) (net.Conn, error) {
			dials.Add(1)
			return fasthttp.DialTimeout(addr, 5*time.Second)
		},
	}
	for _, method := range []string{fasthttp.MethodHead, fasthttp.MethodGet} {
		for range 20 {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			req.Header.SetMethod(method)
			req.SetRequestURI("http://" + n.httpAddr + "/" + l.ShortCode)
			err := c.DoTimeout(req, resp, 5*time.Second)
			status := resp.StatusCode()
			fasthttp.ReleaseRequest(req)
			fasthttp.ReleaseResponse(resp)
			if err != nil || status != fasthttp.StatusFound {
				t.Fatalf("%s /%s: %d %v", method, l.ShortCode, status, err)
			}
		}
	}
	if got := dials.Load(); got != 1 {
		t.Fatalf("40 sequential redirects took %d connections, want 1", got)
	}
}

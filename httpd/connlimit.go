package httpd

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// connLimitListener caps the connections one client holds open at once,
// counted per client as the create rate limit counts them (an IPv4 address,
// an IPv6 /64). Without a cap one address can hold every file descriptor
// the process has, and every slow-read slot, and lock everyone else out.
//
// fasthttp's Server.MaxConnsPerIP does the same for IPv4 only: it lets
// every IPv6 connection through uncounted, hence this listener.
//
// Connections from a --trusted-proxy are not counted: behind a proxy every
// client shares its address, and the cap per client belongs on the proxy.
type connLimitListener struct {
	net.Listener
	max     int
	trusted []netip.Prefix // proxies whose connections are not counted
	refusal []byte         // the whole HTTP answer to a connection over the cap

	mu   sync.Mutex
	open map[netip.Addr]int // client → connections open
}

// refuseWriteTimeout bounds the write of the refusal, which runs on the
// accept loop.
const refuseWriteTimeout = 100 * time.Millisecond

func newConnLimitListener(ln net.Listener, max int, trusted []netip.Prefix) *connLimitListener {
	detail := "this address already has " + strconv.Itoa(max) + " connections open; close some or retry later"
	body := problemJSON(http.StatusTooManyRequests, detail)
	head := "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/problem+json\r\n" +
		"Retry-After: 1\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	return &connLimitListener{Listener: ln, max: max, trusted: trusted, refusal: append([]byte(head), body...), open: map[netip.Addr]int{}}
}

// Accept returns the next connection within its client's cap. Connections
// over it are answered 429 and closed here, one per iteration, so the loop
// ends as soon as a connection is admitted or the listener fails.
func (l *connLimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tcp, ok := c.RemoteAddr().(*net.TCPAddr)
		if !ok || l.isTrusted(tcp.AddrPort().Addr()) {
			return c, nil // not an IP connection, or a proxy: nothing to count by
		}
		key, ok := l.admit(tcp.AddrPort().Addr())
		if ok {
			return &limitedConn{Conn: c, release: func() { l.release(key) }}, nil
		}
		_ = c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
		_, _ = c.Write(l.refusal)
		_ = c.Close()
	}
}

func (l *connLimitListener) isTrusted(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range l.trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// admit counts a new connection from ip, unless its client is at the cap.
func (l *connLimitListener) admit(ip netip.Addr) (netip.Addr, bool) {
	key := bucketKey(ip)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key] >= l.max {
		return key, false
	}
	l.open[key]++
	return key, true
}

// release forgets one connection of a client, and the client with its last.
func (l *connLimitListener) release(key netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.open[key]; n > 1 {
		l.open[key] = n - 1
	} else {
		delete(l.open, key)
	}
}

// limitedConn gives its slot back when it is closed, once however often
// Close is called.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

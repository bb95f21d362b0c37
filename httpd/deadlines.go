package httpd

import (
	"net"
	"time"
)

// deadlineSlack is how much sooner than asked a connection's deadline may
// fall. fasthttp moves a keep-alive connection's deadlines on every
// request: the read deadline to the idle timeout while it waits for the
// next request, then to the read timeout once a byte of it came, and the
// write deadline before the answer. Each move resets a timer in the
// runtime's poller: about 3 % of a node's CPU when it serves a redirect
// every 10 µs on one core (docs/BENCHMARKS.md), where a bare fasthttp
// server, without timeouts, pays nothing.
const deadlineSlack = time.Second

// coarseDeadlineListener hands out connections whose deadlines are set
// only when they must be (coarseDeadlineConn).
type coarseDeadlineListener struct{ net.Listener }

// Accept wraps the next connection.
func (l coarseDeadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &coarseDeadlineConn{Conn: c}, nil
}

// coarseDeadlineConn keeps the deadline asked for and sets it on the
// connection at the next read or write, unless the one in place ends less
// than deadlineSlack before it: an earlier deadline is always set before
// the next read or write, a later one at most once a second. So a
// connection waiting for its next request reads under the idle timeout,
// one sending a request's headers under the read timeout, as asked; but
// a request that arrives whole in one read moves no timer at all.
//
// Only the connection's own serving goroutine sets its read deadline and
// reads (fasthttp closes idle connections on shutdown, never re-times
// them); a TLS connection's close may set the write deadline from another
// goroutine while this one is blocked reading, which touches only the
// write fields.
type coarseDeadlineConn struct {
	net.Conn
	readAsked, readSet   time.Time
	writeAsked, writeSet time.Time
}

// SetReadDeadline is net.Conn's; it takes effect at the next Read.
func (c *coarseDeadlineConn) SetReadDeadline(t time.Time) error {
	c.readAsked = t
	return nil
}

// SetWriteDeadline is net.Conn's; it takes effect at the next Write.
func (c *coarseDeadlineConn) SetWriteDeadline(t time.Time) error {
	c.writeAsked = t
	return nil
}

// SetDeadline is net.Conn's; it takes effect at the next Read or Write.
func (c *coarseDeadlineConn) SetDeadline(t time.Time) error {
	c.readAsked, c.writeAsked = t, t
	return nil
}

// Read is net.Conn's, under the read deadline last asked.
func (c *coarseDeadlineConn) Read(p []byte) (int, error) {
	if !closeEnough(c.readSet, c.readAsked) {
		if err := c.Conn.SetReadDeadline(c.readAsked); err != nil {
			return 0, err
		}
		c.readSet = c.readAsked
	}
	return c.Conn.Read(p)
}

// Write is net.Conn's, under the write deadline last asked.
func (c *coarseDeadlineConn) Write(p []byte) (int, error) {
	if !closeEnough(c.writeSet, c.writeAsked) {
		if err := c.Conn.SetWriteDeadline(c.writeAsked); err != nil {
			return 0, err
		}
		c.writeSet = c.writeAsked
	}
	return c.Conn.Write(p)
}

// closeEnough reports whether the deadline in place may stand for the one
// asked: both none, or asked no earlier and less than deadlineSlack later.
func closeEnough(inPlace, asked time.Time) bool {
	if inPlace.IsZero() || asked.IsZero() {
		return inPlace.IsZero() && asked.IsZero()
	}
	d := asked.Sub(inPlace)
	return d >= 0 && d < deadlineSlack
}

package httpd

import (
	"crypto/tls"
	"io"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// The server's read, idle and write timeouts are kept by its connections
// (timedConn), not by fasthttp. fasthttp reads the clock three times a
// request to move them (the read deadline to the idle timeout, then to the
// read timeout, the write deadline before the answer): three calls to
// time.Now, some 150 ns of a redirect that costs a bare fasthttp server
// about 700 ns in all (docs/BENCHMARKS.md). A connection reads a clock that
// a ticker moves instead (coarseClock), and moves a deadline only when it
// must (closeEnough), which also spares the poller's timers.

// deadlineSlack is how much sooner than asked a connection's deadline may
// fall: a later one is set at most once a second. Each move resets a timer
// in the runtime's poller, about 3 % of a node's CPU when it serves a
// redirect every 10 µs on one core (docs/BENCHMARKS.md).
const deadlineSlack = time.Second

// A coarseClock may be behind the time by a tick: at most maxClockTick, and
// a tenth of the shortest timeout, but never less than minClockTick.
const (
	maxClockTick = 100 * time.Millisecond
	minClockTick = time.Millisecond
)

// connTimeouts are the timeouts a connection keeps: read, from the first
// byte of a request (on a new connection, from its accept) to the end of
// its headers and body; idle, from an answer to the next request's first
// byte; write, from the first byte of an answer to its last.
type connTimeouts struct{ read, idle, write time.Duration }

// clockTick is how often the clock of connections with these timeouts
// ticks: a deadline falls at most a tick sooner than the timeout.
func (t connTimeouts) clockTick() time.Duration {
	return max(minClockTick, min(maxClockTick, t.read/10, t.idle/10, t.write/10))
}

// coarseClock is the time to within a tick, read without a system call
// or the vDSO: one atomic load.
type coarseClock struct {
	now  atomic.Int64 // Unix nanoseconds
	stop chan struct{}
	once sync.Once
}

// newCoarseClock starts a clock that ticks every tick until Stop.
func newCoarseClock(tick time.Duration) *coarseClock {
	c := &coarseClock{stop: make(chan struct{})}
	c.now.Store(time.Now().UnixNano())
	go c.run(tick)
	return c
}

func (c *coarseClock) run(tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			c.now.Store(now.UnixNano())
		case <-c.stop:
			return
		}
	}
}

// Stop stops the clock; it is safe to call more than once.
func (c *coarseClock) Stop() { c.once.Do(func() { close(c.stop) }) }

// timedListener hands out connections that keep timeouts themselves
// (timedConn), on a clock of its own that stops when it is closed.
type timedListener struct {
	net.Listener
	timeouts connTimeouts
	clock    *coarseClock
}

func newTimedListener(ln net.Listener, timeouts connTimeouts) *timedListener {
	return &timedListener{Listener: ln, timeouts: timeouts, clock: newCoarseClock(timeouts.clockTick())}
}

// Accept wraps the next connection. Its first request is read under the
// read timeout from now, as fasthttp's own timeout would have it.
func (l *timedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newTimedConn(c, l.timeouts, l.clock), nil
}

// newTimedConn is c keeping timeouts on clock, its first request read
// under the read timeout from now.
func newTimedConn(c net.Conn, timeouts connTimeouts, clock *coarseClock) *timedConn {
	tc := &timedConn{Conn: c, timeouts: timeouts, clock: clock, requestStart: clock.now.Load()}
	if lc, ok := c.(*limitedConn); ok {
		// Only its Close does anything: reads and writes go straight to
		// the connection, not through one more call each.
		tc.Conn, tc.limited = lc.Conn, lc
	}
	tc.peer = peerOf(tc.Conn)
	return tc
}

// peerOf is the address c's client connects from, unmapped, as
// fasthttp's RequestCtx.RemoteIP reads it (0.0.0.0 for a connection
// without one).
func peerOf(c net.Conn) netip.Addr {
	ip := net.IPv4zero
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ip = a.IP
	}
	addr, _ := netip.AddrFromSlice(ip)
	return addr.Unmap()
}

// timedConnOf is the timedConn ctx's request came on, under TLS or not
// (nil when it came on another: a peer's, forwarded on the cluster port).
func timedConnOf(ctx *fasthttp.RequestCtx) *timedConn {
	c := ctx.Conn()
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	tc, _ := c.(*timedConn)
	return tc
}

// connPeer is the address ctx's connection comes from, unmapped.
func connPeer(ctx *fasthttp.RequestCtx) netip.Addr {
	if c := timedConnOf(ctx); c != nil {
		return c.peer
	}
	peer, _ := netip.AddrFromSlice(ctx.RemoteIP())
	return peer.Unmap()
}

// Close closes the listener and stops its clock. Connections still open
// keep the time the clock stopped at: their deadlines can only come sooner.
func (l *timedListener) Close() error {
	l.clock.Stop()
	return l.Listener.Close()
}

// timedConn keeps the server's timeouts on a connection, from what its
// reads and writes show of where the connection is:
//
//   - a read that follows the answer to a request (the handler returned,
//     see requestHandled, then something was written) waits for the next
//     request, under the idle timeout from that read;
//   - once a byte of a request came (or from the accept, for the first),
//     reads are under the read timeout from then, the handler's reads of a
//     streamed body included;
//   - writes that follow a read are under the write timeout from the first
//     of them: a whole answer, and equally a "100 Continue" or a TLS
//     handshake's flight;
//   - a deadline set through SetReadDeadline holds instead until the
//     request is answered (fasthttp's HeaderReceived gives an import a
//     longer one); one set through SetWriteDeadline holds from then on
//     (a TLS close's).
//
// A deadline is moved only when it must (closeEnough).
//
// Being the connection the handler is given, it also keeps what the
// handler would otherwise work out again on each request of the
// connection: the address it comes from, and the country of its last
// client; and it drains a refused body before it closes (drain).
//
// Only the connection's serving goroutine reads and runs the handler; a
// TLS connection's close may write (and set the write deadline) from
// another goroutine while it reads, under the TLS connection's own lock,
// so writes never run at once. What the two sides share is wrote.
type timedConn struct {
	net.Conn
	timeouts connTimeouts
	clock    *coarseClock

	// limited is the wrapper that gives the client's slot back when the
	// connection closes (nil: not counted); Conn is the connection under it.
	limited *limitedConn
	// peer is the address the connection comes from, unmapped: read once
	// here, not from the connection on every request (see connPeer).
	peer netip.Addr
	// The country of the last visit's client, countryOf (see
	// redirector.countryOf), when countryKnown.
	countryKnown bool
	countryOf    netip.Addr
	country      [2]byte

	// wrote: something was written since the last read.
	wrote atomic.Bool
	// linger: the client may still be sending a body that was refused
	// unread (closeUnread); Close drains it first.
	linger atomic.Bool

	// Times are Unix nanoseconds, 0 for none.
	//
	// The read side.
	handled      bool  // the handler is done with the request read
	waiting      bool  // answered; no byte of the next request yet
	idleSince    int64 // when waiting began
	requestStart int64 // when the request's first byte came
	readAsked    int64
	readExplicit bool
	readSet      int64

	// The write side.
	writeStart    int64 // the first write since a read
	writeAsked    int64
	writeExplicit bool
	writeSet      int64
}

// requestHandled tells ctx's connection, when it is a timedConn (itself or
// under TLS), that the handler is done: what it writes next is the
// answer, after which it waits for the next request. Not before the
// handler returns: a handler reading a streamed body is still reading the
// request, whatever TLS writes meanwhile.
func requestHandled(ctx *fasthttp.RequestCtx) {
	if c := timedConnOf(ctx); c != nil {
		c.handled = true
	}
}

// SetReadDeadline is net.Conn's: t holds, instead of the timeouts, until
// the request being read is answered.
func (c *timedConn) SetReadDeadline(t time.Time) error {
	c.readAsked, c.readExplicit = nanosOf(t), true
	return nil
}

// SetWriteDeadline is net.Conn's: t holds instead of the write timeout.
func (c *timedConn) SetWriteDeadline(t time.Time) error {
	c.writeAsked, c.writeExplicit = nanosOf(t), true
	return nil
}

// SetDeadline is net.Conn's: SetReadDeadline and SetWriteDeadline.
func (c *timedConn) SetDeadline(t time.Time) error {
	_ = c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

// Close closes the connection, and gives its client's slot back.
func (c *timedConn) Close() error {
	if c.linger.Swap(false) {
		c.drain()
	}
	if c.limited != nil {
		return c.limited.Close()
	}
	return c.Conn.Close()
}

// A connection closed after a refused body first reads and drops what the
// client still sends of it, for at most lingerTime and lingerBytes, as a
// web server's lingering close does: closed with bytes unread, the
// connection would answer the client's next ones with a reset, and a
// client still writing its body reports the reset, not the answer it was
// sent.
const (
	lingerTime  = time.Second
	lingerBytes = 4 << 20
)

// drain ends the answer (a FIN after it) and reads what the client sends
// until it stops, or lingerTime or lingerBytes is spent.
func (c *timedConn) drain() {
	half, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || half.CloseWrite() != nil || c.Conn.SetReadDeadline(time.Now().Add(lingerTime)) != nil {
		return
	}
	_, _ = io.CopyN(io.Discard, c.Conn, lingerBytes)
}

// closeUnread closes ctx's connection after the answer, its request's
// body left unread (refused, or cut short): the connection drains it
// before it closes (timedConn.drain).
func closeUnread(ctx *fasthttp.RequestCtx) {
	ctx.SetConnectionClose()
	if c := timedConnOf(ctx); c != nil {
		c.linger.Store(true)
	}
}

// Read is net.Conn's, under the deadline of where the connection is.
func (c *timedConn) Read(p []byte) (int, error) {
	if c.wrote.Load() {
		c.wrote.Store(false)
		if c.handled { // that was the answer
			c.handled, c.readExplicit = false, false
			c.waiting, c.idleSince = true, c.clock.now.Load()
		}
	}
	if err := c.moveReadDeadline(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if n > 0 && c.waiting {
		c.waiting, c.requestStart = false, c.clock.now.Load()
	}
	return n, err
}

func (c *timedConn) moveReadDeadline() error {
	asked := c.readAsked
	switch {
	case c.readExplicit:
	case c.waiting:
		asked = c.idleSince + int64(c.timeouts.idle)
	default:
		asked = c.requestStart + int64(c.timeouts.read)
	}
	if closeEnough(c.readSet, asked) {
		return nil
	}
	if err := c.Conn.SetReadDeadline(timeOf(asked)); err != nil {
		return err
	}
	c.readSet = asked
	return nil
}

// Write is net.Conn's, under the write timeout from the first write since
// a read, or the deadline set.
func (c *timedConn) Write(p []byte) (int, error) {
	if !c.wrote.Load() {
		c.wrote.Store(true)
		c.writeStart = c.clock.now.Load()
	}
	asked := c.writeAsked
	if !c.writeExplicit {
		asked = c.writeStart + int64(c.timeouts.write)
	}
	if !closeEnough(c.writeSet, asked) {
		if err := c.Conn.SetWriteDeadline(timeOf(asked)); err != nil {
			return 0, err
		}
		c.writeSet = asked
	}
	return c.Conn.Write(p)
}

// closeEnough reports whether the deadline in place may stand for the one
// asked (Unix nanoseconds, 0 for none): both none, or asked no earlier and
// less than deadlineSlack later.
func closeEnough(inPlace, asked int64) bool {
	if inPlace == 0 || asked == 0 {
		return inPlace == asked
	}
	d := asked - inPlace
	return d >= 0 && d < int64(deadlineSlack)
}

// nanosOf is t in Unix nanoseconds, 0 for none (the zero time).
func nanosOf(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.Unix() <= 0: // before 1970: as past as 1 ns after it
		return 1
	case t.Unix() >= math.MaxInt64/int64(time.Second): // past what nanoseconds count
		return math.MaxInt64
	}
	return t.UnixNano()
}

// timeOf is the deadline of Unix nanoseconds n: none for 0.
func timeOf(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

package httpd

import (
	"bufio"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestCloseEnough(t *testing.T) {
	base := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC).UnixNano()
	cases := []struct {
		name          string
		inPlace, next int64
		keep          bool
	}{
		{"none and none", 0, 0, true},
		{"none, then one", 0, base, false},
		{"one, then none", base, 0, false},
		{"the same", base, base, true},
		{"a little later", base, base + int64(deadlineSlack) - 1, true},
		{"a slack later", base, base + int64(deadlineSlack), false},
		{"earlier", base, base - 1, false},
	}
	for _, tc := range cases {
		if got := closeEnough(tc.inPlace, tc.next); got != tc.keep {
			t.Errorf("%s: closeEnough = %v, want %v", tc.name, got, tc.keep)
		}
	}
}

// TestDeadlineNanos: a deadline set through SetReadDeadline or
// SetWriteDeadline keeps its meaning as nanoseconds: none stays none, a
// time long past stays past, one too far ahead for nanoseconds stays
// ahead of every other.
func TestDeadlineNanos(t *testing.T) {
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		at   time.Time
		want time.Time
	}{
		{"none", time.Time{}, time.Time{}},
		{"now", now, now},
		{"long past", time.Unix(1, 0), time.Unix(1, 0)},
		{"before 1970", time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, 1)},
		{"year 3000", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, math.MaxInt64)},
	}
	for _, tc := range cases {
		if got := timeOf(nanosOf(tc.at)); !got.Equal(tc.want) {
			t.Errorf("%s: deadline %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTimeoutsHoldWithCoarseDeadlines: with deadlines set lazily, a
// keep-alive connection still waits for its next request under the idle
// timeout, and one that sends half a request's headers is still cut at
// the read timeout.
func TestTimeoutsHoldWithCoarseDeadlines(t *testing.T) {
	s := newTestServer(t, func(c *Config) {
		c.ReadTimeout, c.IdleTimeout = 300*time.Millisecond, 30*time.Second
	})
	addr := strings.TrimPrefix(serveTestServer(t, s), "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Our own bound on every wait: far beyond the read timeout, far short
	// of the idle timeout.
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	answers := bufio.NewReader(conn)
	const request = "GET /health/live HTTP/1.1\r\nHost: sho.rt\r\n"
	ask := func() {
		t.Helper()
		if _, err := conn.Write([]byte(request + "\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(answers, nil)
		if err != nil {
			t.Fatalf("answer: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	ask()
	time.Sleep(900 * time.Millisecond) // idle for three read timeouts
	ask()
	// Half a request's headers, then nothing: cut at the read timeout.
	if _, err := conn.Write([]byte(request)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(answers, nil)
	var timeout net.Error
	switch {
	case errors.As(err, &timeout) && timeout.Timeout():
		t.Fatal("the half-sent request was not cut within 10 s: the read timeout no longer holds")
	case err == nil && resp.StatusCode != http.StatusRequestTimeout:
		t.Fatalf("the half-sent request was answered %d", resp.StatusCode)
	}
}

func TestClockTick(t *testing.T) {
	for _, tc := range []struct {
		timeouts connTimeouts
		want     time.Duration
	}{
		{connTimeouts{read: 10 * time.Second, idle: time.Minute, write: 30 * time.Second}, maxClockTick},
		{connTimeouts{read: 300 * time.Millisecond, idle: time.Minute, write: time.Minute}, 30 * time.Millisecond},
		{connTimeouts{read: time.Minute, idle: time.Minute, write: time.Nanosecond}, minClockTick},
	} {
		if got := tc.timeouts.clockTick(); got != tc.want {
			t.Errorf("%+v: tick %v, want %v", tc.timeouts, got, tc.want)
		}
	}
}

// pipeConn is the server's end of an in-memory connection, keeping
// timeouts, and the client's end; net.Pipe buffers nothing, so a write
// waits for the other end to read.
func pipeConn(t *testing.T, timeouts connTimeouts) (*timedConn, net.Conn) {
	t.Helper()
	server, client := net.Pipe()
	clock := newCoarseClock(timeouts.clockTick())
	// Our own bound on every wait: a read or write on the server's end
	// that no timeout ends by then fails with io.EOF, not a timeout.
	stop := time.AfterFunc(3*time.Second, func() { client.Close() })
	t.Cleanup(func() { stop.Stop(); clock.Stop(); server.Close(); client.Close() })
	return newTimedConn(server, timeouts, clock), client
}

func isTimeout(err error) bool {
	var timeout net.Error
	return errors.As(err, &timeout) && timeout.Timeout()
}

// TestTimedConnTimeouts: which timeout a connection's read is under, by
// what came before it. A case where the short timeout must not hold has
// the client send well after it; the long one never comes in a test.
func TestTimedConnTimeouts(t *testing.T) {
	const short, long = 50 * time.Millisecond, time.Hour
	const pause = 10 * short // a client that waits past the short timeout
	cases := []struct {
		name     string
		timeouts connTimeouts
		// before runs on the server's end before the read under test.
		before    func(c *timedConn, client net.Conn)
		clientLag time.Duration // when the client sends; 0: never
		timesOut  bool
	}{
		{"a new connection's first request is under the read timeout",
			connTimeouts{read: short, idle: long, write: long}, nil, 0, true},
		{"after an answer, the next request is awaited under the idle timeout",
			connTimeouts{read: short, idle: long, write: long}, answer, pause, false},
		{"after an answer, the idle timeout holds",
			connTimeouts{read: long, idle: short, write: long}, answer, 0, true},
		{"a body after 100 Continue is under the read timeout, not the idle one",
			connTimeouts{read: short, idle: long, write: long}, continueBody, 0, true},
		{"a deadline set for the request holds past 100 Continue",
			connTimeouts{read: short, idle: short, write: long}, func(c *timedConn, client net.Conn) {
				c.SetReadDeadline(time.Now().Add(long))
				continueBody(c, client)
			}, pause, false},
		{"a deadline set for a request ends with its answer",
			connTimeouts{read: long, idle: short, write: long}, func(c *timedConn, client net.Conn) {
				c.SetReadDeadline(time.Now().Add(long))
				answer(c, client)
			}, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, client := pipeConn(t, tc.timeouts)
			if tc.before != nil {
				tc.before(c, client)
			}
			if tc.clientLag > 0 {
				go func() {
					time.Sleep(tc.clientLag)
					client.Write([]byte("GET / HTTP/1.1\r\n"))
				}()
			}
			_, err := c.Read(make([]byte, 64))
			if got := isTimeout(err); got != tc.timesOut || (!got && err != nil) {
				t.Fatalf("read: %v, want a timeout: %v", err, tc.timesOut)
			}
		})
	}
}

// answer is a request read and answered on c: the handler returned, then the
// answer was written and read by the client.
func answer(c *timedConn, client net.Conn) {
	go client.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	c.Read(make([]byte, 64))
	c.handled = true
	go io.ReadFull(client, make([]byte, 5))
	c.Write([]byte("HTTP/"))
}

// continueBody is a request's headers read on c and "100 Continue"
// written before its handler runs.
func continueBody(c *timedConn, client net.Conn) {
	const cont = "HTTP/1.1 100 Continue\r\n\r\n"
	go client.Write([]byte("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"))
	c.Read(make([]byte, 128))
	go io.ReadFull(client, make([]byte, len(cont)))
	c.Write([]byte(cont))
}

// TestTimedConnWriteTimeout: an answer the client does not read is cut at
// the write timeout; one set through SetWriteDeadline holds instead.
func TestTimedConnWriteTimeout(t *testing.T) {
	const short, long = 50 * time.Millisecond, time.Hour
	c, _ := pipeConn(t, connTimeouts{read: long, idle: long, write: short})
	if _, err := c.Write([]byte("HTTP/1.1 302 Found\r\n")); !isTimeout(err) {
		t.Fatalf("write to a client that reads nothing: %v, want a timeout", err)
	}
	c, client := pipeConn(t, connTimeouts{read: long, idle: long, write: short})
	c.SetWriteDeadline(time.Now().Add(long))
	go func() {
		time.Sleep(10 * short)
		io.ReadFull(client, make([]byte, 5))
	}()
	if _, err := c.Write([]byte("HTTP/")); err != nil {
		t.Fatalf("write under a deadline set: %v", err)
	}
}

// TestLingerIsBounded: a connection closed after a refused body drains
// what the client still sends, but a client that never stops sending
// does not keep it open: Close returns once lingerBytes are read or
// lingerTime is spent, whichever comes first.
func TestLingerIsBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	timeouts := connTimeouts{read: time.Second, idle: time.Second, write: time.Second}
	clock := newCoarseClock(timeouts.clockTick())
	defer clock.Stop()
	conn := newTimedConn(server, timeouts, clock)

	// The client sends without end, until the connection fails or our
	// own bound ends it.
	sent := make(chan int64)
	go func() {
		client.SetWriteDeadline(time.Now().Add(10 * time.Second))
		chunk := make([]byte, 64<<10)
		var n int64
		for {
			k, err := client.Write(chunk)
			if n += int64(k); err != nil {
				sent <- n
				return
			}
		}
	}()
	conn.linger.Store(true)
	start := time.Now()
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 5*lingerTime {
		t.Fatalf("Close waited %v for a client that never stops sending", waited)
	}
	if n := <-sent; n < lingerBytes {
		t.Fatalf("the client could send only %d bytes before the connection failed; the drain reads %d", n, lingerBytes)
	}
}

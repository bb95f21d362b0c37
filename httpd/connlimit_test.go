package httpd

import (
	"bufio"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"
)

// TestMaxConnsPerIP: one client address cannot hold more than the cap of
// open connections; the next one is told why (429) and closed, and a slot
// frees up when one of its connections closes.
func TestMaxConnsPerIP(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.MaxConnsPerIP = 2 })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)

	// Liveness: it answers 200 before the fresh node has elected itself.
	get := func(c net.Conn) (*http.Response, error) {
		if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			return nil, err
		}
		if _, err := c.Write([]byte("GET /health/live HTTP/1.1\r\nHost: sho.rt\r\n\r\n")); err != nil {
			return nil, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	first, second := dial(), dial()
	for i, c := range []net.Conn{first, second} {
		if resp, err := get(c); err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection %d within the cap: %v, %v", i+1, resp, err)
		}
	}
	resp, err := get(dial())
	if err != nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a third connection: %v, %v; want 429 with Retry-After", resp, err)
	}

	first.Close()
	// The server notices the close when it reads EOF; wait for that, but
	// never longer than the test's own budget.
	for attempt := 0; ; attempt++ {
		resp, err := get(dial())
		if err == nil && resp.StatusCode == 200 {
			break
		}
		if attempt == 100 {
			t.Fatalf("after a connection closed a new one still gets %v, %v", resp, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConnLimitCountsClients: an IPv6 client holds a /64, so its addresses
// share one count, as they share one create rate bucket.
func TestConnLimitCountsClients(t *testing.T) {
	l := newConnLimitListener(nil, 2, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})
	steps := []struct {
		addr  string
		admit bool
	}{
		{"2001:db8::1", true},
		{"2001:db8::2", true},
		{"2001:db8::ffff:1", false}, // a third connection from the same /64
		{"2001:db8:0:1::1", true},   // another /64
		{"192.0.2.1", true},
		{"192.0.2.1", true},
		{"::ffff:192.0.2.1", false}, // the same IPv4 client
		{"192.0.2.2", true},
	}
	for i, st := range steps {
		_, ok := l.admit(netip.MustParseAddr(st.addr))
		if ok != st.admit {
			t.Fatalf("step %d: connection from %s admitted %v, want %v", i, st.addr, ok, st.admit)
		}
	}
	// A trusted proxy speaks for many clients: it is not counted.
	if !l.isTrusted(netip.MustParseAddr("::ffff:127.0.0.1")) || l.isTrusted(netip.MustParseAddr("127.0.0.2")) {
		t.Fatal("the trusted proxy is 127.0.0.1 alone")
	}
	key, _ := l.admit(netip.MustParseAddr("198.51.100.1"))
	l.release(key)
	l.release(key) // released once per connection; extra releases change nothing
	if len(l.open) != 4 {
		t.Errorf("%d clients counted, want 4 (the released one forgotten)", len(l.open))
	}
}

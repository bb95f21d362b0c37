package httpd

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestCloseEnough(t *testing.T) {
	base := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name          string
		inPlace, next time.Time
		keep          bool
	}{
		{"none and none", time.Time{}, time.Time{}, true},
		{"none, then one", time.Time{}, base, false},
		{"one, then none", base, time.Time{}, false},
		{"the same", base, base, true},
		{"a little later", base, base.Add(deadlineSlack - time.Nanosecond), true},
		{"a slack later", base, base.Add(deadlineSlack), false},
		{"earlier", base, base.Add(-time.Nanosecond), false},
	}
	for _, tc := range cases {
		if got := closeEnough(tc.inPlace, tc.next); got != tc.keep {
			t.Errorf("%s: closeEnough = %v, want %v", tc.name, got, tc.keep)
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

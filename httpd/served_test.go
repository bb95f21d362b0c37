package httpd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/bench"
)

// replayConn is a client connection that sends one raw request a number of
// times, pipelined, and keeps what the server answers in out (nil: drops
// it). Through it the node's own fasthttp server reads, parses, handles and
// answers each request as it would from a socket, without one.
type replayConn struct {
	request []byte
	left    int // requests still to send, the current one included
	sent    int // bytes of the current request already read
	out     io.Writer
	remote  net.Addr
}

func newReplayConn(request string, times int, out io.Writer) *replayConn {
	if out == nil {
		out = io.Discard
	}
	return &replayConn{
		request: []byte(request), left: times, out: out,
		remote: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5555},
	}
}

func (c *replayConn) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && c.left > 0 {
		k := copy(p[n:], c.request[c.sent:])
		n += k
		if c.sent += k; c.sent == len(c.request) {
			c.sent, c.left = 0, c.left-1
		}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (c *replayConn) Write(p []byte) (int, error)      { return c.out.Write(p) }
func (c *replayConn) Close() error                     { return nil }
func (c *replayConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }
func (c *replayConn) RemoteAddr() net.Addr             { return c.remote }
func (c *replayConn) SetDeadline(time.Time) error      { return nil }
func (c *replayConn) SetReadDeadline(time.Time) error  { return nil }
func (c *replayConn) SetWriteDeadline(time.Time) error { return nil }

// rawGet is a GET of path as a client writes it, with the header lines
// given (each "Name: value").
func rawGet(path string, headers ...string) string {
	var b strings.Builder
	b.WriteString("GET " + path + " HTTP/1.1\r\nHost: sho.rt\r\n")
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	return b.String()
}

// TestForwardedForAnyCase: a proxy that writes the header name in lower
// case, as HTTP/2 front ends do, is still believed when trusted. The
// server normalises header names as it parses them; the lookup relies on
// that.
func TestForwardedForAnyCase(t *testing.T) {
	s := newTestServer(t, withCountries(t))
	code := mustCreate(t, s, `{"url":"https://example.com/"}`)
	for _, name := range []string{"x-forwarded-for", "X-FORWARDED-FOR", "X-Forwarded-For"} {
		var out bytes.Buffer
		conn := newReplayConn(rawGet("/"+code, name+": 81.2.69.142"), 1, &out)
		if err := s.srv.ServeConn(conn); err != nil {
			t.Fatalf("%s: serve: %v", name, err)
		}
		if !strings.HasPrefix(out.String(), "HTTP/1.1 302") {
			t.Fatalf("%s: answer %q", name, out.String())
		}
	}
	if err := realNode(s).Clicks().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := body(t, do(s, "GET", "/api/v1/urls/"+code+"/stats?group_by=country", "", ""))
	groups := v["visits"].(map[string]any)["groups"].([]any)
	if len(groups) != 1 || groups[0].(map[string]any)["value"] != "GB" || groups[0].(map[string]any)["clicks"] != 3.0 {
		t.Fatalf("the forwarded address was not used for every spelling: %v", groups)
	}
}

// TestCountryPerRequestOnOneConnection: a connection keeps the country
// of its last client, and a proxy's connection carries many clients: each
// request on it is counted in its own client's country, whatever the
// request before it was.
func TestCountryPerRequestOnOneConnection(t *testing.T) {
	s := newTestServer(t, withCountries(t))
	code := mustCreate(t, s, `{"url":"https://example.com/"}`)
	var pipelined strings.Builder
	for _, client := range []string{"81.2.69.142", "8.8.8.8", "8.8.8.8", "", "81.2.69.142", "193.0.6.139"} {
		if client == "" {
			pipelined.WriteString(rawGet("/" + code)) // the proxy's own: loopback, no country
			continue
		}
		pipelined.WriteString(rawGet("/"+code, "X-Forwarded-For: "+client))
	}
	var out bytes.Buffer
	if err := s.srv.ServeConn(timedReplayConn(t, s, newReplayConn(pipelined.String(), 1, &out))); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "HTTP/1.1 302"); n != 6 {
		t.Fatalf("%d redirects of 6: %q", n, out.String())
	}
	if err := realNode(s).Clicks().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := body(t, do(s, "GET", "/api/v1/urls/"+code+"/stats?group_by=country", "", ""))
	got := map[string]float64{}
	for _, g := range v["visits"].(map[string]any)["groups"].([]any) {
		g := g.(map[string]any)
		got[g["value"].(string)] = g["clicks"].(float64)
	}
	want := map[string]float64{"GB": 2, "US": 2, "NL": 1, "XX": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("countries %v, want %v", got, want)
	}
}

// timedReplayConn is conn under the server's timeouts, as the node's
// listener hands its connections to the server (Server.listener).
func timedReplayConn(tb testing.TB, s *Server, conn *replayConn) net.Conn {
	clock := newCoarseClock(s.timeouts().clockTick())
	tb.Cleanup(clock.Stop)
	return newTimedConn(conn, s.timeouts(), clock)
}

// BenchmarkServedRedirect is the redirect as the node serves it from a
// connection: the request parsed, routed, handled and answered by the same
// fasthttp server the node listens with. Beside BenchmarkRedirect, which
// times the handler alone, it shows what a click's statistics cost a whole
// request.
func BenchmarkServedRedirect(b *testing.B) {
	for _, bb := range []struct {
		name    string
		headers []string
	}{
		{"Plain", nil},
		{"Browser", []string{"User-Agent: " + chromeWindows, "Accept: text/html", "Accept-Language: en-GB,en;q=0.9"}},
		{"BrowserThroughProxy", []string{"User-Agent: " + chromeWindows, "Accept: text/html", "Accept-Language: en-GB,en;q=0.9",
			"Referer: https://news.example.com/story?id=1", "X-Forwarded-For: 81.2.69.142"}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			s := newTestServer(b, withCountries(b))
			code := mustCreate(b, s, `{"url":"https://example.com/some/long/path?with=query"}`)
			request := rawGet("/"+code, bb.headers...)
			conn := timedReplayConn(b, s, newReplayConn(request, b.N, nil))
			b.ReportAllocs()
			b.ResetTimer()
			if err := s.srv.ServeConn(conn); err != nil {
				b.Fatal(err)
			}
		})
	}
	// The same request served by a bare fasthttp server answering a 302
	// from a map (bench.CeilingHandler, what bench/baseline runs): Plain
	// minus Ceiling is what linkraft adds to a request.
	b.Run("Ceiling", func(b *testing.B) {
		srv := &fasthttp.Server{Handler: bench.CeilingHandler(map[string]string{"abc1234": "https://example.com/some/long/path?with=query"})}
		b.ReportAllocs()
		b.ResetTimer()
		if err := srv.ServeConn(newReplayConn(rawGet("/abc1234"), b.N, nil)); err != nil {
			b.Fatal(err)
		}
	})
}

// TestKeepAliveAfterABodyReadWhole: a body the handler reads whole from
// the connection (a restore, over what fasthttp reads with the header)
// leaves the connection open for the client's next request.
func TestKeepAliveAfterABodyReadWhole(t *testing.T) {
	s := newTestServer(t, nil)
	body := strings.Repeat("x", 64<<10)
	restore := "POST /admin/restore HTTP/1.1\r\nHost: sho.rt\r\nAuthorization: Bearer " + testToken +
		"\r\nContent-Type: application/octet-stream\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	var out bytes.Buffer
	if err := s.srv.ServeConn(newReplayConn(restore+rawGet("/health/live"), 1, &out)); err != nil {
		t.Fatalf("serve: %v", err)
	}
	answers := strings.Count(out.String(), "HTTP/1.1 ")
	if !strings.HasPrefix(out.String(), "HTTP/1.1 400") || answers != 2 {
		t.Fatalf("%d answers on the connection, want the restore's 400 and the next request's:\n%s", answers, out.String())
	}
}

// TestServedRedirectAnswer: a redirect as the node writes it on the
// connection, to GET and to HEAD: the target, the cache rule, and a
// length, so that a client can tell where the answer ends and send its
// next request on the same connection.
func TestServedRedirectAnswer(t *testing.T) {
	s := newTestServer(t, nil)
	const target = "https://example.com/some/long/path?with=query"
	code := mustCreate(t, s, `{"url":"`+target+`"}`)
	for _, method := range []string{"GET", "HEAD"} {
		t.Run(method, func(t *testing.T) {
			var out bytes.Buffer
			request := strings.Replace(rawGet("/"+code), "GET", method, 1)
			if err := s.srv.ServeConn(timedReplayConn(t, s, newReplayConn(request, 2, &out))); err != nil {
				t.Fatalf("serve: %v", err)
			}
			answer := "HTTP/1.1 302 Found\r\n"
			if got := strings.Count(out.String(), answer); got != 2 {
				t.Fatalf("%d answers to two requests on one connection:\n%s", got, out.String())
			}
			first, _, _ := strings.Cut(strings.TrimPrefix(out.String(), answer), answer)
			for _, line := range []string{"Location: " + target, "Cache-Control: " + cacheControlNoStore, "Content-Length: 0"} {
				if !strings.Contains(first, "\r\n"+line+"\r\n") && !strings.HasPrefix(first, line+"\r\n") {
					t.Errorf("answer lacks %q:\n%s", line, first)
				}
			}
			if !strings.HasSuffix(first, "\r\n\r\n") {
				t.Errorf("answer has a body:\n%q", first)
			}
		})
	}
}

package httpd

import (
	"net"
	"strconv"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestCreateLimitPerNetwork: an IPv6 client holds a whole /64 (one
// customer's LAN, or one host's privacy addresses), so the create limit
// counts the /64 as one client; IPv4 clients are counted per address.
func TestCreateLimitPerNetwork(t *testing.T) {
	s := newTestServer(t, func(c *Config) {
		c.CreateRate, c.CreateBurst = 0.001, 1
		c.AdminToken = limitTestToken // creates may need a credential: this one is the operator's
	})
	steps := []struct {
		from   string
		status int
	}{
		{"2001:db8:1:2::1", 201},
		{"2001:db8:1:2:ffff:ffff:ffff:fffe", 429}, // same /64: the bucket is spent
		{"2001:db8:1:2:8000::9", 429},
		{"2001:db8:1:3::1", 201}, // the next /64 is another client
		{"192.0.2.1", 201},
		{"192.0.2.2", 201}, // IPv4: per address
		{"192.0.2.1", 429},
		{"::ffff:192.0.2.3", 201}, // IPv4-mapped counts as the IPv4 address
		{"192.0.2.3", 429},
	}
	for i, st := range steps {
		ctx := createFrom(s, net.ParseIP(st.from), `{"url":"https://example.com/limit/`+strconv.Itoa(i)+`"}`)
		if got := ctx.Response.StatusCode(); got != st.status {
			t.Fatalf("step %d: create from %s: %d, want %d: %s", i, st.from, got, st.status, ctx.Response.Body())
		}
	}
}

// limitTestToken is the admin token of the rate limit test's server.
const limitTestToken = "limit-test-token"

// createFrom posts a JSON create as if it came from remote, with the
// operator's credential.
func createFrom(s *Server, remote net.IP, body string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: remote, Port: 5555}, nil)
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI("/api/v1/urls")
	ctx.Request.Header.SetHost("sho.rt")
	ctx.Request.Header.SetContentType("application/json")
	ctx.Request.Header.Set("Authorization", "Bearer "+limitTestToken)
	ctx.Request.SetBodyString(body)
	s.Handler(&ctx)
	return &ctx
}

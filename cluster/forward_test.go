package cluster

import (
	"bytes"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestForwardedAnswersArriveWhole: the leader's answer to a forwarded
// request, which the follower reads as a stream into a buffer of its
// announced length, reaches the caller whole whatever its size or framing:
// a large body (a backup's), a chunked one, an empty one, and a HEAD's,
// which announces a length it does not carry.
func TestForwardedAnswersArriveWhole(t *testing.T) {
	t.Parallel()
	leader, follower := openPair(t, 5*time.Second)
	large := bytes.Repeat([]byte("linkraft backup "), 2<<20) // 32 MiB
	leader.ServeForwarded(func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set("X-Answer", string(ctx.Path()))
		switch string(ctx.Path()) {
		case "/large":
			ctx.SetBody(large)
		case "/chunked":
			ctx.SetBodyStream(bytes.NewReader(large[:100_000]), -1)
		case "/head":
			ctx.Response.Header.SetContentLength(len(large))
		}
	})
	for _, tt := range []struct {
		method, path string
		want         []byte
	}{
		{"GET", "/large", large},
		{"GET", "/chunked", large[:100_000]},
		{"POST", "/empty", nil},
		{"HEAD", "/head", nil},
	} {
		var req fasthttp.Request
		var resp fasthttp.Response
		req.Header.SetMethod(tt.method)
		req.SetRequestURI(tt.path)
		req.Header.SetHost("sho.rt")
		if forwarded, err := follower.Forward(&req, &resp, ForwardOptions{}); !forwarded || err != nil {
			t.Fatalf("%s %s: forwarded %v, %v", tt.method, tt.path, forwarded, err)
		}
		if got := resp.Body(); resp.StatusCode() != 200 || string(resp.Header.Peek("X-Answer")) != tt.path || !bytes.Equal(got, tt.want) {
			t.Fatalf("%s %s: %d %q, %d bytes, want %d", tt.method, tt.path, resp.StatusCode(), resp.Header.Peek("X-Answer"), len(got), len(tt.want))
		}
	}
}

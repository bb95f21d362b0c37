package httpd

import (
	"bytes"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// qrFrom asks for a link's QR code as if from remote.
func qrFrom(s *Server, remote net.IP, code string, size int) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: remote, Port: 5555}, nil)
	ctx.Request.SetRequestURI("/api/v1/urls/" + code + "/qr?size=" + strconv.Itoa(size))
	ctx.Request.Header.SetHost("sho.rt")
	s.Handler(&ctx)
	return &ctx
}

// TestQRRendersAreLimitedPerClient: a large QR code costs tens of
// milliseconds of CPU to draw, so one client cannot have the node draw
// them without end; drawing the same one again costs nothing and is never
// refused.
func TestQRRendersAreLimitedPerClient(t *testing.T) {
	s := newTestServer(t, nil)
	// The budget does not refill during the test, however long drawing takes.
	frozen := time.Now()
	s.qrCodes.limiter.now = func() time.Time { return frozen }
	code := mustCreate(t, s, `{"url":"https://example.com/qr"}`)
	alice, bob := net.IPv4(192, 0, 2, 1), net.IPv4(192, 0, 2, 2)

	first := qrFrom(s, alice, code, maxQRSize)
	if first.Response.StatusCode() != 200 || !bytes.HasPrefix(first.Response.Body(), []byte("\x89PNG")) {
		t.Fatalf("first QR: %d %q", first.Response.StatusCode(), first.Response.Body())
	}
	png := append([]byte(nil), first.Response.Body()...)
	for i := range 3 * qrBurst / qrCost(maxQRSize) {
		r := qrFrom(s, alice, code, maxQRSize)
		if r.Response.StatusCode() != 200 || !bytes.Equal(r.Response.Body(), png) {
			t.Fatalf("the same QR again (#%d): %d; want 200 with the same image", i+2, r.Response.StatusCode())
		}
	}

	// Different sizes are new drawings: the client's budget runs out
	// after qrBurst units, the first drawing included.
	drawable := qrBurst/qrCost(maxQRSize) - 1
	for i := range drawable + 2 {
		r := qrFrom(s, alice, code, maxQRSize-1-i)
		want := 200
		if i >= drawable {
			want = 429
		}
		if got := r.Response.StatusCode(); got != want {
			t.Fatalf("new large QR code #%d: %d, want %d: %s", i+1, got, want, r.Response.Body())
		}
		if want == 429 && r.Response.Header.Peek(fasthttp.HeaderRetryAfter) == nil {
			t.Fatal("429 without Retry-After")
		}
	}
	// Another client, and small codes, are not affected.
	if r := qrFrom(s, bob, code, maxQRSize-1); r.Response.StatusCode() != 200 {
		t.Errorf("another client: %d, want 200", r.Response.StatusCode())
	}
	if r := qrFrom(s, alice, code, maxQRSize); r.Response.StatusCode() != 200 {
		t.Errorf("a QR already drawn, after the client was limited: %d, want 200", r.Response.StatusCode())
	}
}

func TestQRCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := newQRCache(30)
	img := func(n int) []byte { return bytes.Repeat([]byte{'x'}, n) }
	key := func(size int) qrKey { return qrKey{url: "http://sho.rt/abc", size: size} }
	c.add(key(1), img(10))
	c.add(key(2), img(10))
	c.add(key(3), img(10))
	c.get(key(1))          // 1 is now the most recently used
	c.add(key(4), img(10)) // over 30 bytes: 2 goes
	c.add(key(5), img(31)) // larger than the whole cache: not kept
	tests := []struct {
		size int
		kept bool
	}{{1, true}, {2, false}, {3, true}, {4, true}, {5, false}}
	for _, tt := range tests {
		if _, ok := c.get(key(tt.size)); ok != tt.kept {
			t.Errorf("entry %d kept = %v, want %v", tt.size, ok, tt.kept)
		}
	}
	if c.bytes > 30 {
		t.Errorf("cache holds %d bytes, more than its 30", c.bytes)
	}
}

// BenchmarkQR measures what a QR answer costs: drawing one (a cache miss)
// at the default and the largest size, and serving a drawn one again.
func BenchmarkQR(b *testing.B) {
	s := newTestServer(b, nil)
	code := mustCreate(b, s, `{"url":"https://example.com/qr-bench"}`)
	for _, size := range []int{defaultQRSize, maxQRSize} {
		b.Run("draw-"+strconv.Itoa(size), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := renderQR("http://sho.rt/"+code, size); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("cached-"+strconv.Itoa(size), func(b *testing.B) {
			qrFrom(s, net.IPv4(192, 0, 2, 9), code, size) // draw it once
			b.ReportAllocs()
			for b.Loop() {
				if r := qrFrom(s, net.IPv4(192, 0, 2, 9), code, size); r.Response.StatusCode() != 200 {
					b.Fatalf("status %d", r.Response.StatusCode())
				}
			}
		})
	}
}

package httpd

import (
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// BenchmarkMiss answers visits that find no link, as a browser sends
// them: a code no link has, the root and a page not found. Once the
// cluster is raised each also counts an orphan visit.
func BenchmarkMiss(b *testing.B) {
	for _, path := range []string{"/nosuchcode", "/", "/no/such/page"} {
		b.Run(path, func(b *testing.B) {
			s := newTestServer(b, withCountries(b))
			mustCreate(b, s, `{"url":"https://example.com/"}`) // the node leads
			deadline := time.Now().Add(10 * time.Second)
			for s.fsm.Raised() < 9 && time.Now().Before(deadline) { // LevelVisitRows
				time.Sleep(10 * time.Millisecond)
			}
			var ctx fasthttp.RequestCtx
			ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5555}, nil)
			ctx.Request.Header.SetMethod("GET")
			ctx.Request.SetRequestURI(path)
			ctx.Request.Header.Set("User-Agent", chromeWindows)
			ctx.Request.Header.Set("X-Forwarded-For", "81.2.69.142")
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				ctx.Response.Reset()
				s.Handler(&ctx)
				if st := ctx.Response.StatusCode(); st != 404 && st != 200 {
					b.Fatalf("status %d", st)
				}
			}
		})
	}
}

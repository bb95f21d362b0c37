package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// writeImport writes n links as bench/scale.sh imports them and returns
// the file and the links by code.
func writeImport(t *testing.T, n int) (string, map[string]string) {
	t.Helper()
	links := make(map[string]string, n)
	var b strings.Builder
	for i := range n {
		code, url := fmt.Sprintf("k%07d", i), fmt.Sprintf("https://www.example-shop.com/item-%08d?utm_source=newsletter", i)
		links[code] = url
		fmt.Fprintf(&b, `{"short_code":%q,"original_url":%q,"workspace":"default"}`+"\n", code, url)
	}
	path := filepath.Join(t.TempDir(), "links.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, links
}

// coldServer serves links as the ceiling server does and records which
// paths were read, in order, and the most requests it had in flight.
type coldServer struct {
	mu       sync.Mutex
	paths    []string
	inFlight atomic.Int32
	most     atomic.Int32
}

func (s *coldServer) start(t *testing.T, links map[string]string) string {
	serve := CeilingHandler(links)
	return startServer(t, func(ctx *fasthttp.RequestCtx) {
		n := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for m := s.most.Load(); n > m; m = s.most.Load() {
			if s.most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(time.Millisecond) // so that overlapping requests would overlap
		s.mu.Lock()
		s.paths = append(s.paths, string(ctx.Path()))
		s.mu.Unlock()
		serve(ctx)
	})
}

func TestColdRedirectsReadDistinctCodesOneAtATime(t *testing.T) {
	file, links := writeImport(t, 500)
	var srv coldServer
	addr := srv.start(t, links)
	res, err := ColdRedirects(context.Background(), ColdConfig{Target: "http://" + addr + "/", Links: file, Count: 200, Seed: 7, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 200 || res.Redirected != 200 || res.Failed != 0 {
		t.Fatalf("want 200 redirected, got %+v", res)
	}
	if !(0 < res.P50 && res.P50 <= res.P99 && res.P99 <= res.Max) {
		t.Errorf("latencies out of order: %+v", res)
	}
	if res.P50 < time.Millisecond {
		t.Errorf("p50 %v is shorter than the server's 1 ms per request", res.P50)
	}
	if m := srv.most.Load(); m != 1 {
		t.Errorf("the server had %d requests in flight at once, want 1", m)
	}
	// The connection is opened with /health, which reads no link; then
	// every code once.
	if srv.paths[0] != "/health" {
		t.Errorf("first request %s, want /health", srv.paths[0])
	}
	codes := srv.paths[1:]
	if distinct := len(slices.Compact(slices.Sorted(slices.Values(codes)))); distinct != 200 {
		t.Errorf("%d distinct codes read in %d requests, want 200", distinct, len(codes))
	}
	if slices.IsSorted(codes) {
		t.Error("codes were read in file order, not at random")
	}
}

func TestColdRedirectsSampleIsTheSeeds(t *testing.T) {
	file, links := writeImport(t, 1000)
	sample := func(seed uint64) []string {
		var srv coldServer
		addr := srv.start(t, links)
		if _, err := ColdRedirects(context.Background(), ColdConfig{Target: addr, Links: file, Count: 50, Seed: seed, Timeout: 2 * time.Second}); err != nil {
			t.Fatal(err)
		}
		return srv.paths[1:]
	}
	first, again, other := sample(1), sample(1), sample(2)
	if !slices.Equal(first, again) {
		t.Errorf("seed 1 read %v, then %v: a seed must read the same codes in the same order", first[:5], again[:5])
	}
	if slices.Equal(first, other) {
		t.Error("seeds 1 and 2 read the same codes")
	}
}

func TestColdRedirectsCountWrongAnswers(t *testing.T) {
	file, links := writeImport(t, 20)
	for _, tc := range []struct {
		name    string
		handler func(ctx *fasthttp.RequestCtx)
		want    string
	}{
		{"not found", func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(404) }, "answered 404"},
		{"not a redirect", func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(200) }, "answered 200"},
		{"another URL", func(ctx *fasthttp.RequestCtx) {
			ctx.SetStatusCode(302)
			ctx.Response.Header.Set("Location", "https://elsewhere.example/")
		}, `redirected to "https://elsewhere.example/"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			right := CeilingHandler(links)
			addr := startServer(t, func(ctx *fasthttp.RequestCtx) {
				if string(ctx.Path()) == "/k0000003" {
					tc.handler(ctx)
					return
				}
				right(ctx)
			})
			res, err := ColdRedirects(context.Background(), ColdConfig{Target: addr, Links: file, Count: 20, Seed: 1, Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests != 20 || res.Redirected != 19 || res.Failed != 1 {
				t.Errorf("want 19 redirected and 1 failed, got %+v", res)
			}
			if !strings.Contains(res.FirstFailure, "/k0000003") || !strings.Contains(res.FirstFailure, tc.want) {
				t.Errorf("first failure %q, want /k0000003 and %q", res.FirstFailure, tc.want)
			}
			if !strings.Contains(res.String(), "1 failed") {
				t.Errorf("the line %q does not say that one failed", res)
			}
		})
	}
}

func TestColdRedirectsRefuseWhatCannotBeMeasured(t *testing.T) {
	file, links := writeImport(t, 10)
	noCode := filepath.Join(t.TempDir(), "nocode.jsonl")
	if err := os.WriteFile(noCode, []byte(`{"original_url":"https://example.com/"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, CeilingHandler(links))
	for _, tc := range []struct {
		name string
		cfg  ColdConfig
		want string
	}{
		{"more codes than links", ColdConfig{Target: addr, Links: file, Count: 11}, "fewer than the 11"},
		{"a link without its code", ColdConfig{Target: addr, Links: noCode, Count: 1}, "short_code"},
		{"no file", ColdConfig{Target: addr, Links: file + ".missing", Count: 1}, "no such file"},
		{"no node", ColdConfig{Target: closedAddr(t), Links: file, Count: 1}, "opening the connection"},
		{"no count", ColdConfig{Target: addr, Links: file}, "count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Timeout = time.Second
			if _, err := ColdRedirects(context.Background(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("want an error saying %q, got %v", tc.want, err)
			}
		})
	}
}

// closedAddr returns an address nothing listens on any more.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestColdRedirectsStopWithTheContext(t *testing.T) {
	file, links := writeImport(t, 100)
	ctx, cancel := context.WithCancel(context.Background())
	serve := CeilingHandler(links)
	var n atomic.Int32
	addr := startServer(t, func(c *fasthttp.RequestCtx) {
		if n.Add(1) == 10 {
			cancel()
		}
		serve(c)
	})
	_, err := ColdRedirects(ctx, ColdConfig{Target: addr, Links: file, Count: 100, Seed: 1, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "after 9 of 100") {
		t.Errorf("want the run to end after 9 of 100 with the context, got %v", err)
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 … 1, unsorted
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		p    int
		want time.Duration
	}{
		{"none", nil, 99, 0},
		{"one", ms(5), 99, 5 * time.Millisecond},
		{"p50 of 100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 100", ms(hundred...), 99, 99 * time.Millisecond},
		{"max of 100", ms(hundred...), 100, 100 * time.Millisecond},
		{"p99 of 3 is the highest", ms(1, 3, 2), 99, 3 * time.Millisecond},
	} {
		if got := percentile(tc.in, tc.p); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

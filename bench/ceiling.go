package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// CeilingHandler is the ceiling linkraft is measured against: fasthttp with
// nothing behind it. GET /{code} answers 302 to links[code] (404 when the
// code is unknown) — a bare map lookup, as linkraft's redirect path is at
// best. So that a mixed or stats load can be replayed against it unchanged,
// GET /api/v1/urls/{code}/stats answers a fixed 200 JSON for a known code
// and any POST a fixed 201 JSON. links must not change while it serves.
func CeilingHandler(links map[string]string) fasthttp.RequestHandler {
	const statsPrefix, statsSuffix = "/api/v1/urls/", "/stats"
	return func(ctx *fasthttp.RequestCtx) {
		path := ctx.Path()
		switch {
		case ctx.IsPost():
			ctx.SetStatusCode(fasthttp.StatusCreated)
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"short_code":"ceiling"}`)
		case bytes.HasPrefix(path, []byte(statsPrefix)) && bytes.HasSuffix(path, []byte(statsSuffix)):
			code := path[len(statsPrefix) : len(path)-len(statsSuffix)]
			if _, ok := links[string(code)]; !ok {
				ctx.SetStatusCode(fasthttp.StatusNotFound)
				return
			}
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"clicks":0}`)
		default:
			url, ok := links[string(path[1:])]
			if !ok {
				ctx.SetStatusCode(fasthttp.StatusNotFound)
				return
			}
			ctx.SetStatusCode(fasthttp.StatusFound)
			ctx.Response.Header.Set("Location", url)
		}
	}
}

// CeilingServer is CeilingHandler serving on a listener of its own.
type CeilingServer struct {
	ln   net.Listener
	srv  *fasthttp.Server
	done chan error
}

// StartCeiling serves CeilingHandler(links) on addr ("127.0.0.1:0" picks a
// free port) until Close.
func StartCeiling(addr string, links map[string]string) (*CeilingServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ceiling server: listen %s: %w", addr, err)
	}
	srv := &fasthttp.Server{Handler: CeilingHandler(links), CloseOnShutdown: true, IdleTimeout: time.Minute}
	s := &CeilingServer{ln: ln, srv: srv, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the host:port the server listens on.
func (s *CeilingServer) Addr() string { return s.ln.Addr().String() }

// Close stops the server, waiting (bounded) for in-flight requests.
func (s *CeilingServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.ShutdownWithContext(ctx)
	if serveErr := <-s.done; serveErr != nil && !errors.Is(serveErr, net.ErrClosed) {
		err = errors.Join(err, fmt.Errorf("ceiling server: %w", serveErr))
	}
	return err
}

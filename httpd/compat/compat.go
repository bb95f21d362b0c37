package compat

import (
	"slices"
	"strings"

	"github.com/valyala/fasthttp"
)

// Route registers a handler on the server's router under a metrics name.
type Route func(method, path, name string, h fasthttp.RequestHandler)

// Options are the operator's settings of the compatible APIs.
type Options struct {
	// CORSOrigins are the origins browsers may call the compatible APIs
	// from (Shlink's web client runs in the browser); "*" (the default,
	// as Shlink's) lets every origin.
	CORSOrigins []string
}

// Register adds every compatible API's routes.
func Register(route Route, n Native, opts Options) {
	c := cors{origins: opts.CORSOrigins}
	if len(c.origins) == 0 {
		c.origins = []string{"*"}
	}
	registerShlink(route, n, c)
	registerYOURLS(route, n)
	registerKutt(route, n, c)
	registerBitly(route, n, c)
}

// cors answers browsers' cross-origin calls to the compatible APIs.
type cors struct{ origins []string }

// allowOrigin is the Access-Control-Allow-Origin for a request from
// origin, "" when it is not allowed.
func (c cors) allowOrigin(origin string) string {
	switch {
	case slices.Contains(c.origins, "*"):
		return "*"
	case origin != "" && slices.Contains(c.origins, origin):
		return origin
	}
	return ""
}

// wrap adds the CORS headers to every answer of h.
func (c cors) wrap(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		h(ctx)
		c.headers(ctx)
	}
}

// headers adds the CORS headers of an answer to a cross-origin request;
// a request without Origin is not one, and gets none (as Shlink's CorsTest
// asserts).
func (c cors) headers(ctx *fasthttp.RequestCtx) {
	origin := string(ctx.Request.Header.Peek("Origin"))
	if origin == "" {
		return
	}
	allow := c.allowOrigin(origin)
	if allow == "" {
		return
	}
	h := &ctx.Response.Header
	h.Set("Access-Control-Allow-Origin", allow)
	if allow != "*" {
		h.Add(fasthttp.HeaderVary, "Origin")
	}
	h.Set("Access-Control-Expose-Headers", "Retry-After, WWW-Authenticate")
}

// Preflight answers a browser's OPTIONS preflight for the compatible
// APIs' paths (the router calls it for a path that has routes, after it
// set Allow); any other path gets the router's plain answer.
func Preflight(opts Options) fasthttp.RequestHandler {
	c := cors{origins: opts.CORSOrigins}
	if len(c.origins) == 0 {
		c.origins = []string{"*"}
	}
	return func(ctx *fasthttp.RequestCtx) {
		path := string(ctx.Path())
		if strings.HasPrefix(path, shlinkPrefix) {
			shlinkPreflight(ctx, c, string(ctx.Response.Header.Peek(fasthttp.HeaderAllow)))
			return
		}
		if !isCompatPath(path) {
			return // linkraft's own routes answer as before: 200 with Allow
		}
		ctx.SetStatusCode(fasthttp.StatusNoContent)
		c.headers(ctx)
		h := &ctx.Response.Header
		h.Set("Access-Control-Allow-Methods", string(h.Peek(fasthttp.HeaderAllow)))
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key, Accept")
		h.Set("Access-Control-Max-Age", "3600")
	}
}

// NotFound answers a request to a compatible API's path that no route
// takes, as that API does; false for any other path, which linkraft
// answers itself. Shlink answers its own problem under /rest, with CORS
// headers, and a preflight there with every method.
func NotFound(opts Options) func(ctx *fasthttp.RequestCtx) bool {
	c := cors{origins: opts.CORSOrigins}
	if len(c.origins) == 0 {
		c.origins = []string{"*"}
	}
	return func(ctx *fasthttp.RequestCtx) bool {
		if !strings.HasPrefix(string(ctx.Path()), shlinkPrefix) {
			return false
		}
		shlinkNotFound(ctx, c)
		return true
	}
}

// isCompatPath reports whether path belongs to a compatible API.
func isCompatPath(path string) bool {
	for _, p := range []string{"/rest/", "/api/v2/", "/api/links", "/api/health", "/api/users", "/api/domains", yourlsPath, bitlyPrefix} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

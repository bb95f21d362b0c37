package httpd

import (
	"bytes"
	"encoding/json"
	"html"
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
)

// writeProblem answers with an application/problem+json error; the
// node-to-node protocol writes its errors with the same writer.
func writeProblem(ctx *fasthttp.RequestCtx, status int, detail string) {
	wire.WriteProblem(ctx, status, detail)
}

// wantsHTML reports whether the client is a browser that prefers a page to
// a JSON document.
func wantsHTML(ctx *fasthttp.RequestCtx) bool {
	return bytes.Contains(ctx.Request.Header.Peek(fasthttp.HeaderAccept), []byte("text/html"))
}

// writeBrowserError answers a browser with a small HTML page and an API
// client with problem+json. Every user-supplied string is escaped.
func writeBrowserError(ctx *fasthttp.RequestCtx, status int, detail string) {
	if !wantsHTML(ctx) {
		writeProblem(ctx, status, detail)
		return
	}
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.SetContentType("text/html; charset=utf-8")
	title := html.EscapeString(http.StatusText(status))
	ctx.SetBodyString(`<!doctype html><html lang="en"><head><meta charset="utf-8">` +
		`<meta name="viewport" content="width=device-width,initial-scale=1"><title>` + title +
		`</title><style>body{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:4em auto;padding:0 1em}</style>` +
		`</head><body><h1>` + title + `</h1><p>` + html.EscapeString(detail) +
		`</p><p><a href="/ui/">Shorten a link</a></p></body></html>`)
}

// writeJSON answers with v as JSON. HTML escaping is off so URLs read as sent.
func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	enc := json.NewEncoder(ctx)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		writeProblem(ctx, fasthttp.StatusInternalServerError, "encoding the response failed")
	}
}

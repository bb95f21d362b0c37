package httpd

import (
	"bytes"
	"encoding/json"
	"html"
	"net/http"

	"github.com/valyala/fasthttp"
)

// problem is an RFC 7807 problem document. Error repeats Detail for
// clients that look for a single "error" string.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Error  string `json:"error"`
}

// writeProblem answers with an application/problem+json error. A 503
// tells the client when to try again (Retry-After), whichever handler
// answers it.
func writeProblem(ctx *fasthttp.RequestCtx, status int, detail string) {
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	if status == fasthttp.StatusServiceUnavailable {
		ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, "1")
	}
	ctx.SetContentType("application/problem+json")
	ctx.SetBody(problemJSON(status, detail))
}

// problemJSON is the document writeProblem sends, for an answer written
// without a request context (a refusal at accept time).
func problemJSON(status int, detail string) []byte {
	body, _ := json.Marshal(problem{
		Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Error: detail,
	})
	return body
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

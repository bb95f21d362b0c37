package wire

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/valyala/fasthttp"
)

// Decode reads a protocol message and checks its version.
func Decode(data []byte, out Message) error {
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode message: %w", err)
	}
	if v := out.version(); v != Version {
		return fmt.Errorf("protocol version %d, this node speaks %d", v, Version)
	}
	return nil
}

// WriteMessage answers 200 with msg as JSON.
func WriteMessage(ctx *fasthttp.RequestCtx, msg Message) {
	body, err := json.Marshal(msg)
	if err != nil {
		WriteProblem(ctx, fasthttp.StatusInternalServerError, "encoding the answer failed")
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// problem is an RFC 7807 problem document. Error repeats Detail for
// clients that look for a single "error" string.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Error  string `json:"error"`
}

// WriteProblem answers a peer with an application/problem+json error, this
// protocol's error format. A 503 tells the peer when to try again
// (Retry-After), whichever handler answers it.
func WriteProblem(ctx *fasthttp.RequestCtx, status int, detail string) {
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	if status == fasthttp.StatusServiceUnavailable {
		ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, "1")
	}
	ctx.SetContentType("application/problem+json")
	body, _ := json.Marshal(problem{
		Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Error: detail,
	})
	ctx.SetBody(body)
}

package compat

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"
)

// shlinkPrefix is the path every Shlink REST route is under.
const shlinkPrefix = "/rest/"

// withRequestID answers every request of h with an X-Request-Id, as
// Shlink's RequestIdMiddleware does: the client's own, else a new one.
func withRequestID(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		h(ctx)
		setRequestID(ctx)
	}
}

// setRequestID echoes the request's X-Request-Id or makes one up. The id
// only labels the answer for the client: linkraft neither logs nor trusts
// it, and echoes only a short run of visible ASCII.
func setRequestID(ctx *fasthttp.RequestCtx) {
	id := string(ctx.Request.Header.Peek("X-Request-Id"))
	if !echoableRequestID(id) {
		id = newRequestID()
	}
	ctx.Response.Header.Set("X-Request-Id", id)
}

func echoableRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// newRequestID is a random (version 4) UUID, Shlink's kind of request id.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes the program first)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// shlinkMethods is a route's methods as Shlink lists them in Allow and
// Access-Control-Allow-Methods: comma-separated without spaces and without
// OPTIONS, in the order of Shlink's own tests (GET,POST; GET,DELETE,PUT).
// allow is the router's Allow; "" (no route) lists every method, as
// Shlink's CrossDomainMiddleware does.
func shlinkMethods(allow string) string {
	if allow == "" {
		return "GET,POST,PUT,PATCH,DELETE"
	}
	var have []string
	for _, m := range strings.Split(allow, ",") {
		have = append(have, strings.TrimSpace(m))
	}
	var out []string
	for _, m := range []string{"GET", "POST", "PATCH", "DELETE", "PUT"} {
		if slices.Contains(have, m) {
			out = append(out, m)
		}
	}
	return strings.Join(out, ",")
}

// shlinkPreflight answers an OPTIONS request to a Shlink path as Shlink
// does: 204 with the route's methods in Allow and, to a cross-origin
// request, the CORS headers with the headers the browser asked for.
func shlinkPreflight(ctx *fasthttp.RequestCtx, c cors, allow string) {
	methods := shlinkMethods(allow)
	ctx.Response.ResetBody()
	ctx.SetStatusCode(fasthttp.StatusNoContent)
	h := &ctx.Response.Header
	h.Set(fasthttp.HeaderAllow, methods)
	setRequestID(ctx)
	if origin := string(ctx.Request.Header.Peek("Origin")); origin == "" || c.allowOrigin(origin) == "" {
		return
	}
	c.headers(ctx)
	h.Set("Access-Control-Allow-Methods", methods)
	h.Set("Access-Control-Allow-Headers", string(ctx.Request.Header.Peek("Access-Control-Request-Headers")))
	h.Set("Access-Control-Max-Age", "3600")
}

// shlinkNotFound answers a /rest path no route takes as Shlink does: its
// problem (ProblemDetailsNotFoundHandler) with CORS headers, and a
// cross-origin preflight there with 204 and every method.
func shlinkNotFound(ctx *fasthttp.RequestCtx, c cors) {
	if ctx.IsOptions() && len(ctx.Request.Header.Peek("Origin")) > 0 {
		shlinkPreflight(ctx, c, "")
		return
	}
	detail := "Cannot " + string(ctx.Method()) + " " + string(ctx.URI().FullURI())
	problemShlink(ctx, fasthttp.StatusNotFound, "https://httpstatus.es/404", "Not Found", detail, nil)
	c.headers(ctx)
	setRequestID(ctx)
}

// malformedBody is a request body that is not JSON at all.
type malformedBody struct{}

func (malformedBody) Error() string { return "Provided request does not contain a valid JSON body." }

// decodeShlink reads a Shlink request's JSON body into v, as Shlink's
// BodyParserMiddleware and its validation do: an empty body leaves v as
// it is, a body that is not JSON is malformedBody, a field of the wrong
// type or one Shlink does not have is invalidFields naming it.
func decodeShlink(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if !json.Valid(body) {
		return malformedBody{}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field == "" {
			return invalidFields{} // not an object
		}
		name, _, _ := strings.Cut(typeErr.Field, ".")
		return invalidFields{name}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return invalidFields{strings.Trim(name, `"`)}
	}
	return invalidFields{}
}

// failBody answers a body decodeShlink refused.
func failBody(ctx *fasthttp.RequestCtx, err error) {
	var m malformedBody
	if errors.As(err, &m) {
		problemShlink(ctx, fasthttp.StatusBadRequest, shlinkError+"malformed-request-body", "Malformed request body", m.Error(), nil)
		return
	}
	failInvalid(ctx, err)
}

// shlinkFieldOf is the Shlink field a native refusal's detail is about:
// linkraft's details start with the name of the field they refuse.
func shlinkFieldOf(detail string) (string, bool) {
	name := detail
	if i := strings.IndexAny(detail, " :[("); i >= 0 {
		name = detail[:i]
	}
	switch name {
	case "url", "original_url":
		return "longUrl", true
	case "custom_code":
		return "customSlug", true
	case "tags":
		return "tags", true
	case "title":
		return "title", true
	case "expires_at", "expires_in_seconds", "expires_in_hours":
		return "validUntil", true
	case "valid_since":
		return "validSince", true
	case "max_visits":
		return "maxVisits", true
	case "domain":
		return "domain", true
	case "forward_query":
		return "forwardQuery", true
	case "crawlable":
		return "crawlable", true
	case "rules":
		return "redirectRules", true
	case "name":
		return "newName", true
	case "root_redirect":
		return "baseUrlRedirect", true
	case "not_found_redirect":
		return "regular404Redirect", true
	case "invalid_redirect":
		return "invalidShortUrlRedirect", true
	}
	return "", false
}

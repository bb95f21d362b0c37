package httpd

import (
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/codes"
)

const cacheControlNoStore = "private, no-cache, no-store, must-revalidate"

// maxCodeLen is the longest code any strategy produces (custom codes).
const maxCodeLen = 64

// redirectCode returns the code of a GET or HEAD for "/{code}", where code
// has only the characters codes can have. Everything else is for the router.
func redirectCode(ctx *fasthttp.RequestCtx) ([]byte, bool) {
	if !ctx.IsGet() && !ctx.IsHead() {
		return nil, false
	}
	path := ctx.Path()
	if len(path) < 2 || len(path) > maxCodeLen+1 || path[0] != '/' {
		return nil, false
	}
	code := path[1:]
	for _, c := range code {
		if !isCodeByte(c) {
			return nil, false
		}
	}
	return code, !isRoute(code)
}

// isRoute reports whether a code-shaped path is one of the service's own
// pages. These words are reserved, so no link can have them as its code.
func isRoute(code []byte) bool {
	switch string(code) {
	case "api", "admin", "health", "metrics", "ui", "stats", "shorten", "static":
		return true
	}
	return false
}

func isCodeByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' || c == '-'
}

// redirect answers GET/HEAD /{code} from local state. A GET that redirects
// counts a click; HEAD does not.
func (s *Server) redirect(ctx *fasthttp.RequestCtx, code []byte) {
	t, ok := s.fsm.Lookup(code)
	if !ok || s.node.Reads.Behind() {
		t, ok = s.confirm(code)
	}
	if !ok {
		writeBrowserError(ctx, fasthttp.StatusNotFound, "short link "+string(code)+" does not exist")
		return
	}
	if t.ExpiresAt != 0 && time.Now().UnixMilli() >= t.ExpiresAt {
		writeBrowserError(ctx, fasthttp.StatusGone, "short link "+t.Code+" has expired")
		return
	}
	ctx.SetStatusCode(s.cfg.RedirectStatus)
	// SetCanonical skips key normalisation and a second copy of the value;
	// stored URLs never contain CR or LF (input.Target refuses them).
	h := &ctx.Response.Header
	h.SetCanonical(bytesOf(fasthttp.HeaderLocation), bytesOf(t.URL))
	h.SetCanonical(bytesOf(fasthttp.HeaderCacheControl), bytesOf(cacheControlNoStore))
	// An answer to HEAD carries no length of its own: without this, clients
	// such as fasthttp's cannot tell where it ends and drop the connection.
	h.SetContentLength(0)
	if ctx.IsGet() {
		s.node.Reads.RecordClick(t.Code)
	}
}

// bytesOf views s as bytes without copying. Only for passing to functions
// that read or copy their argument, never for writing.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// confirm asks the cluster about a code missing here, or about any code
// while this node knows it is behind the leader: a code created through any
// node is never answered 404 here, and a deleted one never redirects, while
// the leader is reachable. Kept out of redirect so the hit path stays small.
func (s *Server) confirm(code []byte) (fsm.Target, bool) {
	if codes.IsReserved(string(code)) {
		return fsm.Target{}, false // "/API", "/Admin": never a code
	}
	l, ok := s.findLink(string(code))
	if !ok {
		return fsm.Target{}, false
	}
	return fsm.Target{Code: l.Code, URL: l.URL, ExpiresAt: l.ExpiresAt}, true
}

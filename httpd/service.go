package httpd

import (
	_ "embed"

	"github.com/valyala/fasthttp"
)

//go:embed ui/index.html
var uiPage []byte

func (s *Server) handleRoot(ctx *fasthttp.RequestCtx) {
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"service": "linkraft", "version": s.cfg.Version})
}

type healthJSON struct {
	Status       string `json:"status"`
	NodeID       string `json:"node_id"`
	Role         string `json:"role"`
	Leader       string `json:"leader"`
	ClusterID    string `json:"cluster_id"`
	Links        int    `json:"links"`
	AppliedIndex uint64 `json:"applied_index"`
	Version      string `json:"version"`
}

// handleHealth is 200 while this node can serve redirects from its state.
func (s *Server) handleHealth(ctx *fasthttp.RequestCtx) {
	h := healthJSON{
		Status: "healthy", NodeID: s.node.ID(), Role: s.node.Role(), Leader: s.node.Leader(), ClusterID: s.fsm.ClusterID(),
		Links: s.fsm.Len(), AppliedIndex: s.node.AppliedIndex(), Version: s.cfg.Version,
	}
	status := fasthttp.StatusOK
	if h.Role == "shutdown" {
		h.Status, status = "unhealthy", fasthttp.StatusServiceUnavailable
	}
	writeJSON(ctx, status, h)
}

// uiCSP lets the page load only itself: its inline script and style, its
// own API and QR images, no other origin, and no framing by other sites.
const uiCSP = "default-src 'self'; img-src 'self' data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func (s *Server) handleUI(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.Response.Header.Set("Content-Security-Policy", uiCSP)
	ctx.SetBody(uiPage)
}

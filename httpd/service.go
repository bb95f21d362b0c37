package httpd

import (
	_ "embed"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
)

// The web UI: a page, its script and its style, served as separate files
// so the page's Content-Security-Policy can refuse every inline script and
// style (an injected one included).
var (
	//go:embed ui/index.html
	uiPage []byte
	//go:embed ui/app.js
	uiScript []byte
	//go:embed ui/app.css
	uiStyle []byte
)

func (s *Server) handleRoot(ctx *fasthttp.RequestCtx) {
	d, ok := s.fsm.DomainOfHost(ctx.Host())
	if !ok {
		d = s.fsm.DefaultDomain()
	}
	s.countOrphan(ctx, fsm.OrphanBaseURL, d.Name)
	if d.RootRedirect != "" {
		ctx.Redirect(d.RootRedirect, fasthttp.StatusFound)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"service": "linkraft", "version": s.cfg.Version})
}

type healthJSON struct {
	Status       string `json:"status"`
	Reason       string `json:"reason,omitempty"`
	NodeID       string `json:"node_id"`
	Role         string `json:"role"`
	Leader       string `json:"leader"`
	ClusterID    string `json:"cluster_id"`
	Links        int    `json:"links"`
	AppliedIndex uint64 `json:"applied_index"`
	Version      string `json:"version"`
	// Warnings are conditions that leave the node ready (the answer stays
	// 200) but that an operator should look at.
	Warnings []string `json:"warnings,omitempty"`
	// CertificatesExpiring names the served certificates that end within
	// 7 days (warningCertificateExpiring).
	CertificatesExpiring []string `json:"certificates_expiring,omitempty"`
}

// The warnings /health gives.
const (
	// warningBackupOverdue: two backup intervals without a good backup.
	warningBackupOverdue = "backup_overdue"
	// warningCertificateExpiring: a served certificate ends within 7 days.
	warningCertificateExpiring = "certificate_expiring"
)

// handleHealth is readiness: 200 "healthy" only while this node can serve
// its cluster's links (a member that knows a leader and has the state),
// else 503 "unavailable" with the reason. A node that is up but not in a
// cluster yet must not be sent traffic: it would answer 404 to every code.
func (s *Server) handleHealth(ctx *fasthttp.RequestCtx) {
	h := s.healthOf()
	status := fasthttp.StatusOK
	if h.Reason = s.node.Self.NotReady(); h.Reason != "" {
		h.Status, status = "unavailable", fasthttp.StatusServiceUnavailable
	}
	writeJSON(ctx, status, h)
}

// handleLive is liveness: 200 "alive" while the process serves HTTP and
// Raft runs, whether or not the node is in a cluster yet — restarting a
// node that waits to be added, or that is cut off, would not help it.
func (s *Server) handleLive(ctx *fasthttp.RequestCtx) {
	h := s.healthOf()
	h.Status = "alive"
	status := fasthttp.StatusOK
	if !s.node.Self.Live() {
		h.Status, h.Reason, status = "unavailable", cluster.NotReadyShuttingDown, fasthttp.StatusServiceUnavailable
	}
	writeJSON(ctx, status, h)
}

func (s *Server) healthOf() healthJSON {
	self := s.node.Self.Local()
	h := healthJSON{
		Status: "healthy", NodeID: self.ID, Role: self.Role, Leader: self.LeaderID, ClusterID: s.fsm.ClusterID(),
		Links: s.fsm.Len(), AppliedIndex: self.AppliedIndex, Version: s.cfg.Version,
	}
	if s.node.Backups != nil && s.node.Backups.Overdue() {
		h.Warnings = append(h.Warnings, warningBackupOverdue)
	}
	if h.CertificatesExpiring = s.expiringCertificates(time.Now()); len(h.CertificatesExpiring) > 0 {
		h.Warnings = append(h.Warnings, warningCertificateExpiring)
	}
	return h
}

// uiCSP lets the page load only its own script, style, API and QR images,
// and nothing inline: no script or style in the page, no event handler or
// style attribute, no other origin, and no framing by other sites.
const uiCSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func (s *Server) handleUI(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.Response.Header.Set("Content-Security-Policy", uiCSP)
	ctx.SetBody(uiPage)
}

// uiAsset serves one of the page's files. Browsers revalidate it on each
// page load (no-cache), so a node that was upgraded serves its new script
// at once; the files are small.
func uiAsset(contentType string, body []byte) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType(contentType)
		ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-cache")
		ctx.SetBody(body)
	}
}

// nosniff tells browsers to take every answer for the type it declares: a
// problem+json body that quotes user input is never rendered as HTML, a
// text answer never run as a script. Set after the handler, since error
// writers reset the response; SetCanonical keeps it free of allocations on
// the redirect path.
func nosniff(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetCanonical(bytesOf("X-Content-Type-Options"), bytesOf("nosniff"))
}

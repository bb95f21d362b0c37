package httpd

import (
	_ "embed"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
)

// healthAPI answers the health checks (/health, /health/live,
// /health/writes) from the node's readiness and the server's draining.
type healthAPI struct {
	fsm     *fsm.FSM
	self    Self
	backups Backups // nil without scheduled backups
	auth    *authority
	// draining is the server's: set, the node is about to stop.
	draining *atomic.Bool
	version  string
	tls      *TLS // nil: no HTTPS, no certificates to watch
}

func (api *healthAPI) register(rt routing) {
	rt.handle("GET", "/health", "health", api.handleHealth)
	rt.handle("GET", "/health/live", "health", api.handleLive)
	rt.handle("GET", "/health/writes", "health", api.handleWritesHealth)
}

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

type healthJSON struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Writes says whether a create through this node would be accepted
	// now ("ok" or "unavailable"); WritesReason says why not.
	Writes       string `json:"writes"`
	WritesReason string `json:"writes_reason,omitempty"`
	NodeID       string `json:"node_id"`
	Role         string `json:"role"`
	Leader       string `json:"leader"`
	// ClusterID is shown to authenticated callers only.
	ClusterID    string `json:"cluster_id,omitempty"`
	Links        int    `json:"links"`
	AppliedIndex uint64 `json:"applied_index"`
	Version      string `json:"version"`
	// Warnings are conditions that leave the node ready (the answer stays
	// 200) but that an operator should look at.
	Warnings []string `json:"warnings,omitempty"`
	// CertificatesExpiring names the served certificates that end within
	// 7 days (warningCertificateExpiring); authenticated callers only.
	CertificatesExpiring []string `json:"certificates_expiring,omitempty"`
}

// What the health documents say: each path's own status, and whether
// writes work.
const (
	statusHealthy     = "healthy"     // /health
	statusWritable    = "writable"    // /health/writes
	statusAlive       = "alive"       // /health/live
	statusUnavailable = "unavailable" // any of them
	writesOK          = "ok"
	writesUnavailable = "unavailable"
)

// The warnings /health gives.
const (
	// warningBackupOverdue: two backup intervals without a good backup.
	warningBackupOverdue = "backup_overdue"
	// warningCertificateExpiring: a served certificate ends within 7 days.
	warningCertificateExpiring = "certificate_expiring"
)

// handleHealth is readiness, "send me redirect traffic": 200 "healthy"
// whenever this node serves redirects from its own state, with or without
// a leader or a quorum, so losing the majority never takes a node out of
// DNS or a load balancer (writes, which need a leader, say so in
// "writes"). 503 "unavailable" with the reason only when the node must get
// no traffic: starting, restoring, outside the cluster, a learner far
// behind, or stopping (from the start of its drain on).
func (api *healthAPI) handleHealth(ctx *fasthttp.RequestCtx) {
	h := api.healthOf(ctx)
	status := fasthttp.StatusOK
	if h.Reason = api.notReady(); h.Reason != "" {
		h.Status, status = statusUnavailable, fasthttp.StatusServiceUnavailable
	}
	writeJSON(ctx, status, h)
}

// handleWritesHealth is 200 "writable" when a create through this node
// would be accepted now, else 503 "unavailable" with the reason (every
// reason of /health, or no_leader): for a check that picks where to send
// writes, or an alert.
func (api *healthAPI) handleWritesHealth(ctx *fasthttp.RequestCtx) {
	h := api.healthOf(ctx)
	h.Status = statusWritable
	status := fasthttp.StatusOK
	if h.WritesReason != "" {
		h.Status, h.Reason, status = statusUnavailable, h.WritesReason, fasthttp.StatusServiceUnavailable
	}
	writeJSON(ctx, status, h)
}

// handleLive is liveness: 200 "alive" while the process serves HTTP and
// Raft runs, whether or not the node is in a cluster yet, and while it
// drains — restarting a node that waits to be added, that is cut off, or
// that is about to stop would not help it.
func (api *healthAPI) handleLive(ctx *fasthttp.RequestCtx) {
	h := api.healthOf(ctx)
	h.Status = statusAlive
	status := fasthttp.StatusOK
	if !api.self.Live() {
		h.Status, h.Reason, status = statusUnavailable, cluster.NotReadyShuttingDown, fasthttp.StatusServiceUnavailable
	}
	writeJSON(ctx, status, h)
}

// notReady is why this node must get no traffic: draining, or what the
// node says.
func (api *healthAPI) notReady() string {
	if api.draining.Load() {
		return cluster.NotReadyShuttingDown
	}
	return api.self.NotReady()
}

// writesUnavailable is why a create through this node would be refused
// now: a draining node takes none, as it takes no other traffic.
func (api *healthAPI) writesUnavailable() string {
	if api.draining.Load() {
		return cluster.NotReadyShuttingDown
	}
	return api.self.WritesUnavailable()
}

// healthOf is the health document every health path starts from. The
// cluster's id and the certificates' names are for authenticated callers
// (a valid API key of any scope, or the admin token): probes send no
// credential, and the answer must not help anyone map a deployment. A
// credential that does not check out is answered as none at all, never
// with 401, so that a probe with a stale key still sees the node's state.
// Only this node's state is asked: a probe must never wait on a leader.
func (api *healthAPI) healthOf(ctx *fasthttp.RequestCtx) healthJSON {
	self := api.self.Local()
	h := healthJSON{
		Status: statusHealthy, Writes: writesOK, NodeID: self.ID, Role: self.Role, Leader: self.LeaderID,
		Links: api.fsm.Len(), AppliedIndex: self.AppliedIndex, Version: api.version,
	}
	if h.WritesReason = api.writesUnavailable(); h.WritesReason != "" {
		h.Writes = writesUnavailable
	}
	_, auth := api.auth.checkKey(&ctx.Request.Header, time.Now(), false)
	authenticated := auth == authOK
	if authenticated {
		h.ClusterID = api.fsm.ClusterID()
	}
	if api.backups != nil && api.backups.Overdue() {
		h.Warnings = append(h.Warnings, warningBackupOverdue)
	}
	if expiring := expiringCertificates(api.tls, time.Now()); len(expiring) > 0 {
		h.Warnings = append(h.Warnings, warningCertificateExpiring)
		if authenticated {
			h.CertificatesExpiring = expiring
		}
	}
	return h
}

// uiCSP lets the page load only its own script, style, API and QR images,
// and nothing inline: no script or style in the page, no event handler or
// style attribute, no other origin, and no framing by other sites.
const uiCSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func handleUI(ctx *fasthttp.RequestCtx) {
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

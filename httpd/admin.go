package httpd

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/pprof"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
)

// tokenOK reports whether the request carries the admin token. With no token
// configured it is true; requireAdmin then limits access to loopback.
func (s *Server) tokenOK(h *fasthttp.RequestHeader) bool {
	if s.cfg.AdminToken == "" {
		return true
	}
	want := []byte("Bearer " + s.cfg.AdminToken)
	return subtle.ConstantTimeCompare(h.Peek(fasthttp.HeaderAuthorization), want) == 1
}

// requireAdmin guards the admin API: the bearer token when one is set
// (forwarded requests carry the operator's header, so the leader checks it
// too), otherwise loopback clients and requests forwarded by a peer, which
// checked its own client.
func (s *Server) requireAdmin(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if s.cfg.AdminToken != "" {
			if !s.tokenOK(&ctx.Request.Header) {
				writeProblem(ctx, fasthttp.StatusUnauthorized, "admin endpoints need Authorization: Bearer <admin token>")
				ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="linkraft admin"`)
				return
			}
		} else if !ctx.RemoteIP().IsLoopback() && !s.fromPeer(ctx) {
			writeProblem(ctx, fasthttp.StatusForbidden, "admin endpoints answer only local clients when no --admin-token is set")
			return
		}
		h(ctx)
	}
}

type clusterJSON struct {
	cluster.Status
	HTTPAddr string `json:"http_addr"`
}

func (s *Server) handleCluster(ctx *fasthttp.RequestCtx) {
	st, err := s.node.Status()
	if err != nil {
		writeProblem(ctx, fasthttp.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, clusterJSON{Status: st, HTTPAddr: s.node.HTTPAddr()})
}

func (s *Server) handleBackup(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/octet-stream")
	ctx.Response.Header.Set(fasthttp.HeaderContentDisposition, `attachment; filename="linkraft.backup"`)
	if err := s.node.Backup(ctx); err != nil {
		s.log.Error("backup failed", "err", err)
		writeProblem(ctx, fasthttp.StatusInternalServerError, "backup failed")
	}
}

func (s *Server) handleRestore(ctx *fasthttp.RequestCtx) {
	body := ctx.PostBody()
	if len(body) == 0 {
		writeProblem(ctx, fasthttp.StatusBadRequest, "send a backup (from GET /admin/backup) as the request body")
		return
	}
	err := s.node.Restore(body)
	switch {
	case err == nil:
		writeJSON(ctx, fasthttp.StatusOK, map[string]any{"restored": true, "links": s.fsm.Len()})
	case errors.Is(err, fsm.ErrCorruptSnapshot):
		writeProblem(ctx, fasthttp.StatusBadRequest, "not a valid linkraft backup: "+err.Error())
	default:
		s.writeWriteError(ctx, err)
	}
}

// decodeAdminBody reads a JSON admin request body into v.
func decodeAdminBody(ctx *fasthttp.RequestCtx, v any) bool {
	if err := json.Unmarshal(ctx.PostBody(), v); err != nil {
		writeProblem(ctx, fasthttp.StatusBadRequest, "body must be a JSON object: "+err.Error())
		return false
	}
	return true
}

// writeMembershipError maps a refused membership change to its status.
func (s *Server) writeMembershipError(ctx *fasthttp.RequestCtx, err error) {
	switch {
	case errors.Is(err, cluster.ErrInvalidServer), errors.Is(err, cluster.ErrUnreachable):
		writeProblem(ctx, fasthttp.StatusBadRequest, err.Error())
	case errors.Is(err, cluster.ErrUnknownServer):
		writeProblem(ctx, fasthttp.StatusNotFound, err.Error())
	case errors.Is(err, cluster.ErrServerConflict), errors.Is(err, cluster.ErrLastVoter),
		errors.Is(err, cluster.ErrNoTransferTarget), errors.Is(err, cluster.ErrOtherCluster):
		writeProblem(ctx, fasthttp.StatusConflict, err.Error())
	default:
		s.writeWriteError(ctx, err)
	}
}

func (s *Server) handleJoin(ctx *fasthttp.RequestCtx) {
	var req struct {
		ID       string `json:"id"`
		RaftAddr string `json:"raft_addr"`
		HTTPAddr string `json:"http_addr"`
	}
	if !decodeAdminBody(ctx, &req) {
		return
	}
	if err := s.node.AddVoter(req.ID, req.RaftAddr, req.HTTPAddr); err != nil {
		s.writeMembershipError(ctx, err)
		return
	}
	s.handleCluster(ctx)
}

func (s *Server) handleLeave(ctx *fasthttp.RequestCtx) {
	var req struct {
		ID string `json:"id"`
	}
	if !decodeAdminBody(ctx, &req) {
		return
	}
	if err := s.node.RemoveServer(req.ID); err != nil {
		s.writeMembershipError(ctx, err)
		return
	}
	s.handleCluster(ctx)
}

func (s *Server) handleLeadershipTransfer(ctx *fasthttp.RequestCtx) {
	if err := s.node.TransferLeadership(); err != nil {
		s.writeMembershipError(ctx, err)
		return
	}
	s.handleCluster(ctx)
}

// pprofPrefix is where the runtime profiles are served.
const pprofPrefix = "/debug/pprof/"

// pprofHandler serves the Go runtime's profiles (net/http/pprof) under
// pprofPrefix: the index, cmdline, profile, symbol, trace and every named
// profile (heap, goroutine, allocs, ...). Profiles are this node's own and
// are never forwarded; the route is guarded like the admin API, since they
// reveal the process's internals and a CPU profile or trace costs CPU.
func pprofHandler() fasthttp.RequestHandler {
	mux := http.NewServeMux()
	mux.HandleFunc(pprofPrefix, pprof.Index) // and the named profiles
	mux.HandleFunc(pprofPrefix+"cmdline", pprof.Cmdline)
	mux.HandleFunc(pprofPrefix+"profile", pprof.Profile)
	mux.HandleFunc(pprofPrefix+"symbol", pprof.Symbol)
	mux.HandleFunc(pprofPrefix+"trace", pprof.Trace)
	return fasthttpadaptor.NewFastHTTPHandler(mux)
}

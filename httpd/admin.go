package httpd

import (
	"crypto/subtle"
	"errors"

	"github.com/valyala/fasthttp"

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

// requireAdmin guards the admin API: the bearer token when one is set,
// otherwise loopback clients only.
func (s *Server) requireAdmin(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if s.cfg.AdminToken != "" {
			if !s.tokenOK(&ctx.Request.Header) {
				writeProblem(ctx, fasthttp.StatusUnauthorized, "admin endpoints need Authorization: Bearer <admin token>")
				ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="linkraft admin"`)
				return
			}
		} else if !ctx.RemoteIP().IsLoopback() {
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
	writeJSON(ctx, fasthttp.StatusOK, clusterJSON{Status: st, HTTPAddr: s.cfg.HTTPAdvertise})
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

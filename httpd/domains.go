package httpd

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/input"
)

// domainJSON is a registered domain as /admin/domains takes and shows it.
type domainJSON struct {
	Domain           string `json:"domain"`
	RootRedirect     string `json:"root_redirect,omitempty"`
	NotFoundRedirect string `json:"not_found_redirect,omitempty"`
}

// handleSetDomain registers a domain, or changes its redirects.
func (s *Server) handleSetDomain(ctx *fasthttp.RequestCtx) {
	var body domainJSON
	if err := decodeStrict(ctx.PostBody(), &body); err != nil {
		writeBadRequest(ctx, err)
		return
	}
	name, err := input.Domain(body.Domain)
	if err != nil {
		writeProblem(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	d := fsm.Domain{Name: name}
	for _, r := range []struct {
		field string
		in    string
		out   *string
	}{{"root_redirect", body.RootRedirect, &d.RootRedirect}, {"not_found_redirect", body.NotFoundRedirect, &d.NotFoundRedirect}} {
		if r.in == "" {
			continue
		}
		if *r.out, err = input.Target(r.in, s.cfg.AllowPrivateTargets); err != nil {
			writeProblem(ctx, fasthttp.StatusBadRequest, r.field+": "+err.Error())
			return
		}
	}
	s.proposeDomain(ctx, fsm.DomainCommand{Domain: d}, fasthttp.StatusOK)
}

// handleRemoveDomain forgets a domain that has no links left.
func (s *Server) handleRemoveDomain(ctx *fasthttp.RequestCtx) {
	raw, _ := ctx.UserValue("domain").(string)
	name, err := input.Domain(raw)
	if err != nil {
		writeProblem(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	s.proposeDomain(ctx, fsm.DomainCommand{Domain: fsm.Domain{Name: name}, Remove: true}, fasthttp.StatusNoContent)
}

func (s *Server) proposeDomain(ctx *fasthttp.RequestCtx, c fsm.DomainCommand, status int) {
	c.By, c.Now = keyID(ctx), time.Now().UnixMilli()
	res, err := s.node.Writes.Propose(context.Background(), c, cluster.ProposeOptions{Visible: true})
	switch {
	case err == nil:
	case errors.Is(err, fsm.ErrUnknownDomain):
		// Not errorStatuses' 400, which is for a create naming the domain:
		// here the domain is what the route addresses.
		writeProblem(ctx, fasthttp.StatusNotFound, "domain "+c.Domain.Name+" is not registered")
		return
	default:
		s.writeError(ctx, err, errorDetail{fsm.ErrDomainInUse, "domain " + c.Domain.Name + " still has links: delete them first"})
		return
	}
	markApplied(ctx, res.Index)
	if status == fasthttp.StatusNoContent {
		ctx.SetStatusCode(status)
		return
	}
	writeJSON(ctx, status, domainJSON{Domain: c.Domain.Name, RootRedirect: c.Domain.RootRedirect, NotFoundRedirect: c.Domain.NotFoundRedirect})
}

func (s *Server) handleListDomains(ctx *fasthttp.RequestCtx) {
	domains := s.fsm.Domains()
	out := make([]domainJSON, len(domains))
	for i, d := range domains {
		out[i] = domainJSON{Domain: d.Name, RootRedirect: d.RootRedirect, NotFoundRedirect: d.NotFoundRedirect}
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"domains": out})
}

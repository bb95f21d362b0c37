package httpd

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/input"
)

// domainsAPI serves the registered domains (/admin/domains).
type domainsAPI struct {
	fsm                 *fsm.FSM
	writes              Writes
	allowPrivateTargets bool // for a domain's redirects
	log                 *slog.Logger
}

func (api *domainsAPI) register(rt routing) {
	// Domains are written with entries older builds do not apply.
	write := func(method, path string, h fasthttp.RequestHandler) {
		rt.handle(method, path, "admin_domains", rt.require(fsm.ScopeAdmin, rt.forwarder(h, forwardAdmin.needs(fsm.LevelOptions))))
	}
	write("POST", "/admin/domains", api.handleSetDomain)
	rt.adminRead("GET", "/admin/domains", "admin_domains", api.handleListDomains)
	write("DELETE", "/admin/domains/{domain}", api.handleRemoveDomain)
}

// domainJSON is a registered domain as /admin/domains takes and shows it.
// With default true and no domain, it is the default domain's redirects,
// which every host that is not a registered domain uses.
type domainJSON struct {
	Domain           string `json:"domain"`
	Default          bool   `json:"default,omitempty"`
	RootRedirect     string `json:"root_redirect,omitempty"`
	NotFoundRedirect string `json:"not_found_redirect,omitempty"`
	InvalidRedirect  string `json:"invalid_redirect,omitempty"`
}

func domainJSONOf(d fsm.Domain) domainJSON {
	return domainJSON{Domain: d.Name, Default: d.Name == "", RootRedirect: d.RootRedirect,
		NotFoundRedirect: d.NotFoundRedirect, InvalidRedirect: d.InvalidRedirect}
}

// handleSetDomain registers a domain, or changes its redirects (all of
// them: a redirect left out is removed).
func (api *domainsAPI) handleSetDomain(ctx *fasthttp.RequestCtx) {
	var body domainJSON
	if err := decodeStrict(ctx.PostBody(), &body); err != nil {
		writeBadRequest(ctx, err)
		return
	}
	var d fsm.Domain
	switch {
	case body.Default && body.Domain != "":
		writeProblem(ctx, fasthttp.StatusBadRequest, "default: true sets the default domain's redirects: leave domain out")
		return
	case !body.Default:
		name, err := input.Domain(body.Domain)
		if err != nil {
			writeProblem(ctx, fasthttp.StatusBadRequest, err.Error())
			return
		}
		d.Name = name
	}
	var err error
	for _, r := range []struct {
		field string
		in    string
		out   *string
	}{{"root_redirect", body.RootRedirect, &d.RootRedirect}, {"not_found_redirect", body.NotFoundRedirect, &d.NotFoundRedirect},
		{"invalid_redirect", body.InvalidRedirect, &d.InvalidRedirect}} {
		if r.in == "" {
			continue
		}
		if *r.out, err = input.Target(r.in, api.allowPrivateTargets); err != nil {
			writeProblem(ctx, fasthttp.StatusBadRequest, r.field+": "+err.Error())
			return
		}
	}
	api.proposeDomain(ctx, fsm.DomainCommand{Domain: d}, fasthttp.StatusOK)
}

// handleRemoveDomain forgets a domain that has no links left.
func (api *domainsAPI) handleRemoveDomain(ctx *fasthttp.RequestCtx) {
	raw, _ := ctx.UserValue("domain").(string)
	name, err := input.Domain(raw)
	if err != nil {
		writeProblem(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	api.proposeDomain(ctx, fsm.DomainCommand{Domain: fsm.Domain{Name: name}, Remove: true}, fasthttp.StatusNoContent)
}

func (api *domainsAPI) proposeDomain(ctx *fasthttp.RequestCtx, c fsm.DomainCommand, status int) {
	c.By, c.Now = keyID(ctx), time.Now().UnixMilli()
	res, err := api.writes.Propose(context.Background(), c, cluster.ProposeOptions{Visible: true})
	switch {
	case err == nil:
	case errors.Is(err, fsm.ErrUnknownDomain):
		// Not errorStatuses' 400, which is for a create naming the domain:
		// here the domain is what the route addresses.
		writeProblem(ctx, fasthttp.StatusNotFound, "domain "+c.Domain.Name+" is not registered")
		return
	default:
		writeError(ctx, api.log, err, errorDetail{fsm.ErrDomainInUse, "domain " + c.Domain.Name + " still has links: delete them first"})
		return
	}
	markApplied(ctx, res.Index)
	if status == fasthttp.StatusNoContent {
		ctx.SetStatusCode(status)
		return
	}
	writeJSON(ctx, status, domainJSONOf(c.Domain))
}

func (api *domainsAPI) handleListDomains(ctx *fasthttp.RequestCtx) {
	domains := api.fsm.Domains()
	out := make([]domainJSON, len(domains))
	for i, d := range domains {
		out[i] = domainJSONOf(d)
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"domains": out, "default": domainJSONOf(api.fsm.DefaultDomain())})
}

package httpd

import (
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

// routing is what the API's handler groups register their routes with:
// handle adds a route to the server's router (and to the compatible APIs'
// native one, compat.go), and the rest is the middleware the server puts
// in front of handlers: credentials, the create rate limit and forwarding
// to the leader.
type routing struct {
	handle  handleFunc
	auth    *authority
	fwd     *forwarding
	limiter *ipLimiter
	proxies proxies
	// publicCreate lets clients without a key create (--public-create).
	publicCreate bool
}

// require is authority.require: h for a key with scope.
func (rt routing) require(scope fsm.Scope, h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return rt.auth.require(scope, h)
}

// forwarder is forwarding.forwarder: h where the leader serves it.
func (rt routing) forwarder(h fasthttp.RequestHandler, mode forwardMode) fasthttp.RequestHandler {
	return rt.fwd.forwarder(h, mode)
}

// admin registers an admin call. Admin calls act on the leader's view: the
// leader alone knows which servers are reachable and holds the freshest
// state.
func (rt routing) admin(method, path, route string, h fasthttp.RequestHandler) {
	rt.handle(method, path, route, rt.require(fsm.ScopeAdmin, rt.forwarder(h, forwardAdmin)))
}

// adminRead registers an admin read an operator needs most when there is
// no leader (cluster status, backup, export): without one it falls back
// to this node's own state.
func (rt routing) adminRead(method, path, route string, h fasthttp.RequestHandler) {
	rt.handle(method, path, route, rt.require(fsm.ScopeAdmin, rt.forwarder(h, forwardAdminRead)))
}

// apis are the API's handler groups, each holding only the parts of the
// node and the server it calls.
type apis struct {
	health   *healthAPI
	links    *linksAPI
	bulk     *bulkAPI
	tags     *tagsAPI
	stats    *statsAPI
	keys     *keysAPI
	domains  *domainsAPI
	webhooks *webhooksAPI
	admin    *adminAPI
	transfer *transferAPI
}

// newAPIs builds the handler groups on the server's parts.
func newAPIs(s *Server) apis {
	node, cfg, state := s.node, s.cfg, s.fsm
	views := linkViews{baseURL: cfg.BaseURL, https: cfg.TLS != nil}
	input := linkInput{allowPrivateTargets: cfg.AllowPrivateTargets, codeLength: cfg.CodeLength}
	return apis{
		health: &healthAPI{fsm: state, self: node.Self, backups: node.Backups, auth: s.auth,
			draining: &s.draining, version: cfg.Version, tls: cfg.TLS},
		links: &linksAPI{fsm: state, writes: node.Writes, lookup: s.lookup, views: views, input: input,
			passwords: s.passwords, auth: s.auth, qrCodes: s.qrCodes, proxies: s.proxies, log: s.log},
		bulk: &bulkAPI{writes: node.Writes, views: views, input: input, passwords: s.passwords,
			limiter: s.limiter, proxies: s.proxies, log: s.log},
		tags: &tagsAPI{fsm: state, reads: node.Reads, writes: node.Writes, lookup: s.lookup,
			robots: newRobotsCache(), log: s.log},
		stats: &statsAPI{fsm: state, writes: node.Writes, lookup: s.lookup, views: views, auth: s.auth, log: s.log},
		keys:  &keysAPI{fsm: state, writes: node.Writes, auth: s.auth, log: s.log},
		domains: &domainsAPI{fsm: state, writes: node.Writes,
			allowPrivateTargets: cfg.AllowPrivateTargets, log: s.log},
		webhooks: &webhooksAPI{writes: node.Writes, hooks: node.Hooks,
			allowPrivateTargets: cfg.AllowPrivateTargets, log: s.log},
		admin: &adminAPI{fsm: state, admin: node.Admin, members: node.Members, log: s.log},
		transfer: &transferAPI{fsm: state, writes: node.Writes, self: node.Self, admin: node.Admin,
			views: views, input: input, log: s.log},
	}
}

// register adds every group's routes.
func (a apis) register(rt routing) {
	a.health.register(rt)
	a.links.register(rt)
	a.bulk.register(rt)
	a.tags.register(rt)
	a.stats.register(rt)
	a.keys.register(rt)
	a.domains.register(rt)
	a.webhooks.register(rt)
	a.admin.register(rt)
	a.transfer.register(rt)
}

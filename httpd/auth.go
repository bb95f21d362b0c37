package httpd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

// apiKeyHeader is the header Shlink and Kutt clients send their key in;
// Authorization: Bearer is the other way.
const apiKeyHeader = "X-Api-Key"

// keyUserValue holds the key a request was authenticated with.
const keyUserValue = "linkraft.key"

// rootKey is what the operator's --admin-token authenticates as: an admin
// key in every workspace, recorded as fsm.RootKeyID.
func rootKey() fsm.APIKey {
	return fsm.APIKey{ID: fsm.RootKeyID, Name: "--admin-token", Scopes: fsm.ScopeAdmin, Workspaces: []string{fsm.AllWorkspaces}}
}

// credential returns the key a request presents, "Authorization: Bearer
// <key>" or "X-Api-Key: <key>"; nil when it presents none, and malformed
// for an Authorization of another scheme.
func credential(h *fasthttp.RequestHeader) (key []byte, malformed bool) {
	if auth := h.Peek(fasthttp.HeaderAuthorization); len(auth) > 0 {
		const bearer = "bearer "
		if len(auth) > len(bearer) && bytes.EqualFold(auth[:len(bearer)], []byte(bearer)) {
			return bytes.TrimSpace(auth[len(bearer):]), false
		}
		return nil, true
	}
	return h.Peek(apiKeyHeader), false
}

// authResult is what checking a request's credential found.
type authResult int

const (
	authOK      authResult = iota
	authMissing            // no credential
	authInvalid            // unknown, revoked, expired or malformed
	// authUnconfirmed: a key this node does not hold, which no leader
	// could confirm or refuse in time (a node restarting or cut off):
	// the key may well be valid, so the answer is 503, not 401.
	authUnconfirmed
)

// authority decides who a request's credential is (the operator's
// --admin-token or a replicated key) and what it may do: the credential
// check of every route that is not public.
type authority struct {
	fsm   *fsm.FSM
	reads Reads
	log   *slog.Logger
	// rootTokenHash is the SHA-256 of the admin token, nil without one.
	rootTokenHash []byte
	// signatures checks time-limited signatures (signature.go).
	signatures *signers
}

// newAuthority checks credentials against adminToken ("": none) and the
// keys in reads' state, and time-limited signatures against the keys'
// signature tokens (nil: refused).
func newAuthority(reads Reads, adminToken string, signatureToken func(string, []byte) string, log *slog.Logger) *authority {
	a := &authority{fsm: reads.FSM(), reads: reads, log: log, signatures: newSigners(signatureToken)}
	if adminToken != "" {
		sum := sha256.Sum256([]byte(adminToken))
		a.rootTokenHash = sum[:]
	}
	return a
}

// checkKey authenticates a request's credential against the admin token
// and the replicated keys. With catchUp, a key this node would refuse (or
// any key, while this node knows it is behind) is looked up again after
// the node has applied everything acknowledged before the request, so a
// key works on every node once its creation was acknowledged and on none
// once its revocation was; without, only local state is asked (the header
// callback, which must not wait).
func (a *authority) checkKey(h *fasthttp.RequestHeader, now time.Time, catchUp bool) (fsm.APIKey, authResult) {
	cred, malformed := credential(h)
	switch {
	case malformed:
		return fsm.APIKey{}, authInvalid
	case len(cred) == 0:
		if signed := h.Peek(signatureHeader); len(signed) > 0 {
			return a.checkSigned(signed, now, catchUp)
		}
		return fsm.APIKey{}, authMissing
	}
	if a.rootTokenHash != nil {
		// Hashing both sides first makes the comparison independent of
		// the token's length.
		sum := sha256.Sum256(cred)
		if subtle.ConstantTimeCompare(sum[:], a.rootTokenHash) == 1 {
			return rootKey(), authOK
		}
	}
	id, hash, ok := fsm.ParseKey(string(cred))
	if !ok {
		return fsm.APIKey{}, authInvalid
	}
	return a.confirm(id, catchUp, func() (fsm.APIKey, bool) { return a.storedKey(id, hash, now) })
}

// checkSigned authenticates a time-limited signature (signature.go): the
// key it names, if it is live and the signature was made with its token.
func (a *authority) checkSigned(header []byte, now time.Time, catchUp bool) (fsm.APIKey, authResult) {
	c, ok := parseSigned(header)
	if !ok || a.signatures.token == nil || !c.fresh(now) {
		return fsm.APIKey{}, authInvalid
	}
	return a.confirm(c.keyID, catchUp, func() (fsm.APIKey, bool) {
		key, known := a.fsm.Key(c.keyID)
		if !known || key.Expired(now.UnixMilli()) || !c.madeWith(a.signatures.token(key.ID, key.Hash[:])) {
			return fsm.APIKey{}, false
		}
		return key, true
	})
}

// confirm believes the key that lookup finds in this node's state, or
// refuses the credential of key id.
func (a *authority) confirm(id string, catchUp bool, lookup func() (fsm.APIKey, bool)) (fsm.APIKey, authResult) {
	key, ok := lookup()
	// A key created a moment ago may not be applied here yet, so a key
	// this node would refuse is refused only after catching up. Every
	// refusal catches up, not only an unknown id's: a known id with a
	// wrong secret answered a leader round trip sooner would tell anyone
	// timing the answers which key ids exist. A node that knows it is
	// behind the leader may not have applied a revocation the leader
	// acknowledged (a voter excused from the wait): it catches up before
	// it believes a key too.
	if catchUp && (!ok || a.reads.Behind()) {
		err := a.reads.CatchUp(context.Background())
		if err != nil {
			a.log.Debug("API key not confirmed by a leader", "key_id", id, "err", err)
		}
		if key, ok = lookup(); !ok && err != nil {
			return fsm.APIKey{}, authUnconfirmed
		}
	}
	if !ok {
		return fsm.APIKey{}, authInvalid
	}
	return key, authOK
}

// storedKey is the key of id in this node's state when its secret hashes
// to hash and it has not expired at now. The hashes are compared in
// constant time.
func (a *authority) storedKey(id string, hash [fsm.KeyHashSize]byte, now time.Time) (fsm.APIKey, bool) {
	key, known := a.fsm.Key(id)
	if !known || subtle.ConstantTimeCompare(key.Hash[:], hash[:]) != 1 || key.Expired(now.UnixMilli()) {
		return fsm.APIKey{}, false
	}
	return key, true
}

// authenticate checks the request's credential and keeps the key for the
// handler. Without one it answers 401 itself, unless anonymous is allowed
// (a public create), and reports whether the handler may go on.
func (a *authority) authenticate(ctx *fasthttp.RequestCtx, anonymous bool) bool {
	key, res := a.checkKey(&ctx.Request.Header, time.Now(), true)
	switch {
	case res == authOK:
		ctx.SetUserValue(keyUserValue, &key)
		return true
	case res == authMissing && anonymous:
		return true
	case res == authMissing:
		writeUnauthorized(ctx, "this call needs an API key: Authorization: Bearer <key> or X-Api-Key: <key>")
	case res == authUnconfirmed:
		ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, "1")
		writeProblem(ctx, fasthttp.StatusServiceUnavailable, "this node does not hold the API key and could reach no leader to confirm it: retry, or ask another node")
	default:
		writeUnauthorized(ctx, "the API key is unknown, revoked or expired")
	}
	return false
}

func writeUnauthorized(ctx *fasthttp.RequestCtx, detail string) {
	writeProblem(ctx, fasthttp.StatusUnauthorized, detail)
	ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="linkraft"`)
}

// keyOf is the key the request was authenticated with; nil for an
// anonymous (public) create.
func keyOf(ctx *fasthttp.RequestCtx) *fsm.APIKey {
	k, _ := ctx.UserValue(keyUserValue).(*fsm.APIKey)
	return k
}

// keyID is what the state records as the author of a write.
func keyID(ctx *fasthttp.RequestCtx) string {
	if k := keyOf(ctx); k != nil {
		return k.ID
	}
	return ""
}

// require guards a route: a valid key with scope, else 401 or 403. Which
// workspaces the key sees is the handler's to check, since a link in a
// workspace the key may not see must be answered as one that does not
// exist.
func (a *authority) require(scope fsm.Scope, h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if !a.authenticate(ctx, false) {
			return
		}
		if !keyOf(ctx).Has(scope) {
			writeProblem(ctx, fasthttp.StatusForbidden, "the API key lacks the "+scopeName(scope)+" scope")
			return
		}
		h(ctx)
	}
}

func scopeName(scope fsm.Scope) string {
	if names := scope.Names(); len(names) == 1 {
		return names[0]
	}
	return "needed"
}

// sees reports whether the request's key may see links of workspace with
// scope: a link it may not see is answered as one that does not exist.
func sees(ctx *fasthttp.RequestCtx, scope fsm.Scope, workspace string) bool {
	k := keyOf(ctx)
	return k != nil && k.Allows(scope, workspace, time.Now().UnixMilli())
}

// seesLink is sees for a link: its workspace, its domain when the key is
// limited to some, and who made it when the key is limited to its own.
func seesLink(ctx *fasthttp.RequestCtx, scope fsm.Scope, l *fsm.Link) bool {
	return sees(ctx, scope, l.Workspace) && keyOf(ctx).SeesDomain(l.Domain) && keyOf(ctx).SeesAuthor(l.Author)
}

// keyAuthor is the author a list of the request's key keeps: its own id
// when it is limited to its own links, else "" (any).
func keyAuthor(ctx *fasthttp.RequestCtx) string {
	if k := keyOf(ctx); k != nil && k.OwnLinksOnly {
		return k.ID
	}
	return ""
}

// keyDomains is the domains a request's key is limited to; nil: every one.
func keyDomains(ctx *fasthttp.RequestCtx) []string {
	if k := keyOf(ctx); k != nil {
		return k.Domains
	}
	return nil
}

// mayWriteLinks reports, from the headers alone, whether a request carries
// a key this node knows with links:write: a bulk create's larger body is
// read only then.
func (a *authority) mayWriteLinks(h *fasthttp.RequestHeader) bool {
	key, res := a.checkKey(h, time.Now(), false)
	return res == authOK && key.Has(fsm.ScopeLinksWrite)
}

// mayUploadLargeBody reports, from the headers alone, whether a request
// may send a restore's or an import's body: an admin key this node knows.
// fasthttp calls it before reading the body, so an anonymous client never
// makes the node buffer more than the small limit.
func (a *authority) mayUploadLargeBody(h *fasthttp.RequestHeader) bool {
	key, res := a.checkKey(h, time.Now(), false)
	return res == authOK && key.Has(fsm.ScopeAdmin)
}

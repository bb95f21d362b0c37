package httpd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/input"
)

// keysAPI serves the API keys (/admin/keys, a key's own /api/v1/key) and
// the audit log of what keys did.
type keysAPI struct {
	fsm    *fsm.FSM
	writes Writes
	// auth checks the credential of /api/v1/key, which any key may read.
	auth *authority
	log  *slog.Logger
}

func (api *keysAPI) register(rt routing) {
	rt.handle("GET", "/api/v1/key", "key", api.handleOwnKey)
	rt.admin("POST", "/admin/keys", "admin_keys", api.handleCreateKey)
	rt.admin("GET", "/admin/keys", "admin_keys", api.handleListKeys)
	rt.admin("DELETE", "/admin/keys/{id}", "admin_keys", api.handleRevokeKey)
	rt.adminRead("GET", "/admin/audit", "admin_audit", api.handleAudit)
}

// keyJSON is an API key as the keys API shows it; Key, the secret, only in
// the answer to its creation.
type keyJSON struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Scopes     []string `json:"scopes"`
	Workspaces []string `json:"workspaces"`
	Domains    []string `json:"domains,omitempty"`
	// OwnLinksOnly: the key sees only the links it created.
	OwnLinksOnly bool    `json:"own_links_only,omitempty"`
	CreatedAt    string  `json:"created_at"`
	ExpiresAt    *string `json:"expires_at"`
	CreatedBy    string  `json:"created_by,omitempty"`
	Key          string  `json:"key,omitempty"`
}

func keyView(k *fsm.APIKey) keyJSON {
	return keyJSON{ID: k.ID, Name: k.Name, Scopes: k.Scopes.Names(), Workspaces: k.Workspaces, Domains: k.Domains,
		OwnLinksOnly: k.OwnLinksOnly, CreatedAt: timestamp(k.CreatedAt), ExpiresAt: optionalTimestamp(k.ExpiresAt), CreatedBy: k.CreatedBy}
}

// keyRequest is the body of POST /admin/keys.
type keyRequest struct {
	Name       string   `json:"name"`
	Scopes     []string `json:"scopes"`
	Workspaces []string `json:"workspaces"`
	Domains    []string `json:"domains"`
	// OwnLinksOnly limits the key to the links it creates.
	OwnLinksOnly bool    `json:"own_links_only"`
	ExpiresAt    *string `json:"expires_at"`
}

// parseKeyRequest validates a key request into the key to store, without
// its id and hash.
func parseKeyRequest(body []byte, now time.Time) (fsm.APIKey, error) {
	var req keyRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fsm.APIKey{}, invalid("body must be a JSON object with name, scopes, workspaces and optional expires_at: %v", err)
	}
	k := fsm.APIKey{Name: req.Name, CreatedAt: now.UnixMilli()}
	if len(req.Name) > fsm.MaxKeyName {
		return k, invalid("name is longer than %d bytes", fsm.MaxKeyName)
	}
	var err error
	if k.Scopes, err = keyScopes(req.Scopes); err != nil {
		return k, err
	}
	if k.Workspaces, err = keyWorkspaces(req.Workspaces, k.Scopes); err != nil {
		return k, err
	}
	if k.Domains, err = keyRequestDomains(req.Domains, k.Scopes); err != nil {
		return k, err
	}
	if req.OwnLinksOnly && k.Scopes&fsm.ScopeAdmin != 0 {
		return k, invalid("an admin key reaches every link: give it no own_links_only")
	}
	k.OwnLinksOnly = req.OwnLinksOnly
	if req.ExpiresAt != nil {
		t, err := time.Parse(time.RFC3339, *req.ExpiresAt)
		if err != nil {
			return k, invalid("expires_at must be an RFC 3339 time: %v", err)
		}
		if !t.After(now) {
			return k, invalid("expires_at is in the past")
		}
		k.ExpiresAt = t.UnixMilli()
	}
	return k, nil
}

// keyScopes reads a key request's scopes.
func keyScopes(names []string) (fsm.Scope, error) {
	if len(names) == 0 {
		return 0, invalid("scopes must list at least one of links:read, links:write, stats:read, admin")
	}
	var scopes fsm.Scope
	for _, name := range names {
		scope, ok := fsm.ParseScope(name)
		if !ok {
			return 0, invalid("unknown scope %q: use links:read, links:write, stats:read or admin", name)
		}
		scopes |= scope
	}
	return scopes, nil
}

// keyWorkspaces reads a key request's workspaces, sorted, for a key with
// scopes.
func keyWorkspaces(list []string, scopes fsm.Scope) ([]string, error) {
	switch {
	case len(list) == 0:
		return nil, invalid(`workspaces must list the workspaces the key may use, or ["*"] for all`)
	case len(list) > fsm.MaxKeyWorkspaces:
		return nil, invalid("a key may name at most %d workspaces", fsm.MaxKeyWorkspaces)
	case slices.Contains(list, fsm.AllWorkspaces) && len(list) > 1:
		return nil, invalid(`"*" already means every workspace: list it alone`)
	}
	for _, ws := range list {
		if ws == fsm.AllWorkspaces {
			continue
		}
		if err := input.Workspace(ws); err != nil {
			return nil, invalid("%s", err.Error())
		}
	}
	workspaces := slices.Compact(slices.Sorted(slices.Values(list)))
	if scopes&fsm.ScopeAdmin != 0 && !slices.Equal(workspaces, []string{fsm.AllWorkspaces}) {
		// admin reaches every workspace whatever the list says: refuse a
		// list that would make the key look narrower than it is.
		return nil, invalid(`an admin key reaches every workspace: give workspaces ["*"]`)
	}
	return workspaces, nil
}

// keyRequestDomains reads a key request's domains, sorted, for a key
// with scopes.
func keyRequestDomains(list []string, scopes fsm.Scope) ([]string, error) {
	if len(list) > 0 && scopes&fsm.ScopeAdmin != 0 {
		return nil, invalid("an admin key reaches every domain: give it no domains")
	}
	if len(list) > fsm.MaxKeyDomains {
		return nil, invalid("a key may name at most %d domains", fsm.MaxKeyDomains)
	}
	var domains []string
	for _, d := range list {
		name, err := input.Domain(d)
		if err != nil {
			return nil, invalid("%s", err.Error())
		}
		domains = append(domains, name)
	}
	return slices.Compact(slices.Sorted(slices.Values(domains))), nil
}

func (api *keysAPI) handleCreateKey(ctx *fasthttp.RequestCtx) {
	k, err := parseKeyRequest(ctx.PostBody(), time.Now())
	if err != nil {
		writeBadRequest(ctx, err)
		return
	}
	id, secret, hash, err := fsm.MintKey(rand.Reader)
	if err != nil {
		api.log.Error("mint key failed", "err", err)
		writeProblem(ctx, fasthttp.StatusInternalServerError, "could not create a key")
		return
	}
	k.ID, k.Hash = id, hash
	cmd := fsm.KeyCreateCommand{Key: k, By: keyID(ctx), Now: time.Now().UnixMilli()}
	if _, err := api.writes.Propose(context.Background(), cmd, cluster.ProposeOptions{}); err != nil {
		writeError(ctx, api.log, err)
		return
	}
	k.CreatedBy = cmd.By
	view := keyView(&k)
	view.Key = secret
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	writeJSON(ctx, fasthttp.StatusCreated, view)
}

// ownKeyJSON is a key as it sees itself: the keys API's view and the
// workspace its creates go to when they name none.
type ownKeyJSON struct {
	keyJSON
	DefaultWorkspace string `json:"default_workspace"`
	// SignatureToken signs time-limited requests (signature.go); shown
	// to the key alone, never to the operator's token.
	SignatureToken string `json:"signature_token,omitempty"`
}

// handleOwnKey is GET /api/v1/key: the key the request carries, never its
// secret. Any valid key may read itself, so that a client can tell what
// it may do (the Bitly API's user and groups are read from it).
func (api *keysAPI) handleOwnKey(ctx *fasthttp.RequestCtx) {
	if !api.auth.authenticate(ctx, false) {
		return
	}
	k := keyOf(ctx)
	own := ownKeyJSON{keyJSON: keyView(k), DefaultWorkspace: defaultWorkspaceOf(k)}
	if token := api.auth.signatures.token; token != nil && k.ID != fsm.RootKeyID {
		own.SignatureToken = token(k.ID, k.Hash[:])
	}
	writeJSON(ctx, fasthttp.StatusOK, own)
}

// handleListKeys lists the keys; ?created_by=ID only those a key made, so
// that an operator who revokes a leaked admin key finds the keys it made,
// which live on (a key's rights are its own, not its maker's).
func (api *keysAPI) handleListKeys(ctx *fasthttp.RequestCtx) {
	by := string(ctx.QueryArgs().Peek("created_by"))
	views := []keyJSON{}
	for _, k := range api.fsm.Keys() {
		if by == "" || k.CreatedBy == by {
			views = append(views, keyView(&k))
		}
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"keys": views})
}

func (api *keysAPI) handleRevokeKey(ctx *fasthttp.RequestCtx) {
	id, _ := ctx.UserValue("id").(string)
	if !fsm.ValidKeyID(id) {
		writeProblem(ctx, fasthttp.StatusNotFound, "no key with id "+strconv.Quote(id))
		return
	}
	_, err := api.writes.Propose(context.Background(),
		fsm.KeyRevokeCommand{ID: id, By: keyID(ctx), Now: time.Now().UnixMilli()}, cluster.ProposeOptions{Visible: true})
	switch {
	case err == nil:
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	default:
		writeError(ctx, api.log, err, errorDetail{fsm.ErrKeyNotFound, "no key with id " + id})
	}
}

// auditJSON is one recorded write.
type auditJSON struct {
	Time      string `json:"time"`
	KeyID     string `json:"key_id"`
	Action    string `json:"action"`
	Workspace string `json:"workspace,omitempty"`
	Code      string `json:"code,omitempty"`
	Domain    string `json:"domain,omitempty"`  // of the link, or the domain a domain action set or removed
	Key       string `json:"key,omitempty"`     // the key a key action created or revoked
	Webhook   string `json:"webhook,omitempty"` // the webhook a webhook action registered or removed
	Server    string `json:"server,omitempty"`  // the server that joined, left or was promoted
	Detail    string `json:"detail,omitempty"`  // a restore's: what vouched for the backup, a key kept against it
}

const (
	defaultAuditLimit = 100
	maxAuditLimit     = 2 * fsm.AuditRetention // the link writes and the security actions
)

func (api *keysAPI) handleAudit(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	limit := defaultAuditLimit
	if args.Has("limit") {
		n, err := strconv.Atoi(string(args.Peek("limit")))
		if err != nil || n < 1 || n > maxAuditLimit {
			writeProblem(ctx, fasthttp.StatusBadRequest, "limit must be a whole number from 1 to "+strconv.Itoa(maxAuditLimit))
			return
		}
		limit = n
	}
	kind, err := fsm.ParseAuditKind(string(args.Peek("kind")))
	if err != nil {
		writeProblem(ctx, fasthttp.StatusBadRequest, "kind must be all, security or links")
		return
	}
	entries := api.fsm.Audit(fsm.AuditQuery{KeyID: string(args.Peek("key_id")), Kind: kind, Limit: limit})
	views := make([]auditJSON, len(entries))
	for i, e := range entries {
		v := auditJSON{Time: timestamp(e.At), KeyID: e.KeyID, Action: e.Action.String(), Workspace: e.Workspace}
		switch e.Action {
		case fsm.AuditKeyCreate, fsm.AuditKeyRevoke:
			v.Key = e.Subject
		case fsm.AuditDomainSet, fsm.AuditDomainRemove:
			v.Domain = e.Subject
		case fsm.AuditBackupRestore:
			v.Detail = e.Subject
		case fsm.AuditWebhookSet, fsm.AuditWebhookDelete:
			v.Webhook = e.Subject
		case fsm.AuditMemberJoin, fsm.AuditMemberLeave, fsm.AuditMemberPromote:
			v.Server = e.Subject
		default:
			v.Domain, v.Code = fsm.SplitCode(e.Subject)
		}
		views[i] = v
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"entries": views})
}

package httpd

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/codes"
	"github.com/linkraft/linkraft/fsm/input"
)

// routeCode is the qualified code (fsm.QualifiedCode) a link route names:
// its {code} in the domain of ?domain= (the default domain without it).
func routeCode(ctx *fasthttp.RequestCtx) string {
	return fsm.QualifiedCode(domainParam(ctx), pathParam(ctx, "code"))
}

// pathParam is the route's parameter name, percent-decoded. The router
// hands a path segment as sent, so a code or tag in another script comes
// percent-encoded; neither holds a '%', so decoding is safe whether or
// not the segment was decoded already.
func pathParam(ctx *fasthttp.RequestCtx, name string) string {
	v, _ := ctx.UserValue(name).(string)
	if decoded, err := url.PathUnescape(v); err == nil {
		return decoded
	}
	return v
}

// domainParam is ?domain= in the one spelling domains are stored in.
func domainParam(ctx *fasthttp.RequestCtx) string {
	return strings.ToLower(string(ctx.QueryArgs().Peek("domain")))
}

// editFields is the body of an edit: the option fields, the target, the
// expiry (null clears it) and a new code.
type editFields struct {
	OriginalURL *string         `json:"original_url"`
	ExpiresAt   json.RawMessage `json:"expires_at"`
	ShortCode   *string         `json:"short_code"`
	optionFields
	// pastExpiry: as createFields'.
	pastExpiry bool
}

// handleEdit changes a link. It runs on the leader (the route forwards
// it), which proposes the edit and waits for every server as a delete
// does, so after the 200 no node that reaches the leader serves the old
// target.
func (api *linksAPI) handleEdit(ctx *fasthttp.RequestCtx) {
	code := routeCode(ctx)
	var f editFields
	if err := decodeStrict(ctx.PostBody(), &f); err != nil {
		writeBadRequest(ctx, err)
		return
	}
	f.pastExpiry = pastExpiryAllowed(ctx)
	l, ok := api.lookup.findLink(code)
	if !ok || !seesLink(ctx, fsm.ScopeLinksWrite, &l) {
		writeProblem(ctx, fasthttp.StatusNotFound, "short link "+code+" does not exist")
		return
	}
	c, password, err := api.input.editOf(&f, l, time.Now())
	var newCode string
	if err == nil {
		newCode, err = renameOf(f.ShortCode, &l)
	}
	if err == nil {
		err = editRefusal(ctx, &c, &l, newCode)
	}
	if err != nil {
		writeBadRequest(ctx, err)
		return
	}
	// Last, once nothing else can refuse the edit: it costs the most.
	if password != "" && !api.passwords.hash(ctx, password, &c.PasswordHash) {
		return
	}
	c.Code, c.KeyID, c.Now = code, keyID(ctx), time.Now().UnixMilli()
	var cmd fsm.Command = c
	if newCode != "" {
		cmd = fsm.RenameCommand{NewCode: fsm.QualifiedCode(l.Domain, newCode), Edit: c}
	}
	edited, index, err := cluster.ProposeFor[fsm.Link](context.Background(), api.writes, cmd, cluster.ProposeOptions{Visible: true})
	if err != nil {
		writeError(ctx, api.log, err, errorDetail{fsm.ErrNotFound, "short link " + code + " does not exist"},
			errorDetail{fsm.ErrReserved, "short_code " + newCode + " is a reserved word"},
			// Before ErrCodeTaken, which it wraps.
			errorDetail{fsm.ErrCodeDeleted, "short_code " + newCode + " belonged to a deleted or renamed link; such codes are never reused"},
			errorDetail{fsm.ErrCodeTaken, "short_code " + newCode + " is already taken"})
		return
	}
	markApplied(ctx, index)
	// The link as this edit left it: a concurrent edit applied since must
	// not answer for this one.
	writeJSON(ctx, fasthttp.StatusOK, api.views.linkReadView(ctx, &edited))
}

// editOf checks an edit's fields and prepares them for the log, all but
// the password, which it returns to be hashed (edit says why).
func (li linkInput) editOf(f *editFields, l fsm.Link, now time.Time) (fsm.EditCommand, string, error) {
	c, password, err := li.edit(&f.optionFields)
	if err != nil {
		return c, "", err
	}
	if f.OriginalURL != nil {
		target, err := input.Target(*f.OriginalURL, li.allowPrivateTargets)
		if errors.Is(err, input.ErrURLTooLong) {
			return c, "", &badRequest{status: fasthttp.StatusRequestEntityTooLarge, msg: err.Error()}
		}
		if err != nil {
			return c, "", invalid("%s", err.Error())
		}
		c.Fields |= fsm.EditURL
		c.URL = target
		if l.Canonical != "" { // a dedupe link moves to its new target's entry
			if c.Canonical, err = codes.Canonicalize(target); err != nil {
				return c, "", invalid("original_url cannot be canonicalised for dedupe: %v", err)
			}
		}
	}
	if f.ExpiresAt != nil {
		c.Fields |= fsm.EditExpiresAt
		if !isNull(f.ExpiresAt) {
			var at string
			if err := json.Unmarshal(f.ExpiresAt, &at); err != nil {
				return c, "", invalid("expires_at must be an RFC 3339 time, or null to remove the expiry")
			}
			if c.ExpiresAt, err = expiry(&createFields{ExpiresAt: &at, pastExpiry: f.pastExpiry}, now); err != nil {
				return c, "", err
			}
		}
	}
	return c, password, nil
}

// renameOf is the new code an edit's short_code asks for: "" when it
// asks for none or for the code the link has. A new code follows the
// rules of a custom code (fsm/input); Apply decides whether it is free.
func renameOf(shortCode *string, l *fsm.Link) (string, error) {
	if shortCode == nil || *shortCode == l.Code {
		return "", nil
	}
	if err := input.CustomCode(*shortCode); err != nil {
		return "", invalid("%s", strings.Replace(err.Error(), "custom_code", "short_code", 1))
	}
	return *shortCode, nil
}

// editRefusal is why the request may not make edit c of link l (and
// rename it to newCode, unless ""), nil when it may: an edit that changes
// nothing, or one that makes the link's stats public without stats:read
// (links:write, which the route checked, is not enough to read them, and
// public stats are read by anyone).
func editRefusal(ctx *fasthttp.RequestCtx, c *fsm.EditCommand, l *fsm.Link, newCode string) error {
	switch {
	case c.Fields == 0 && newCode == "":
		return invalid("the body changes nothing: send at least one field to change")
	case c.Fields&fsm.EditPublicStats != 0 && c.PublicStats && !sees(ctx, fsm.ScopeStatsRead, l.Workspace):
		return forbidden(publicStatsDetail(l.Workspace))
	}
	return nil
}

// handleHistory lists every target the link has had, oldest first.
func (api *linksAPI) handleHistory(ctx *fasthttp.RequestCtx) {
	l, ok := api.lookup.lookupLink(ctx, fsm.ScopeLinksRead)
	if !ok {
		return
	}
	type versionJSON struct {
		OriginalURL string `json:"original_url"`
		ChangedAt   string `json:"changed_at"`
		KeyID       string `json:"key_id,omitempty"`
	}
	var versions []versionJSON
	if l.Options != nil {
		for _, v := range l.Options.History {
			versions = append(versions, versionJSON{OriginalURL: v.URL, ChangedAt: timestamp(v.ChangedAt), KeyID: v.KeyID})
		}
	}
	if len(versions) == 0 { // never edited: the creation is its one version
		versions = []versionJSON{{OriginalURL: l.URL, ChangedAt: timestamp(l.CreatedAt)}}
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"short_code": l.Code, "versions": versions})
}

// visibleWorkspaces is the workspaces a read lists: ?workspace= if the key
// sees it (none if not), else every workspace the key sees (nil: all).
func visibleWorkspaces(ctx *fasthttp.RequestCtx) []string {
	return visibleWorkspacesFor(ctx, fsm.ScopeLinksRead)
}

// visibleWorkspacesFor is visibleWorkspaces for a read needing scope.
func visibleWorkspacesFor(ctx *fasthttp.RequestCtx, scope fsm.Scope) []string {
	args := ctx.QueryArgs()
	if args.Has("workspace") {
		ws := string(args.Peek("workspace"))
		if !sees(ctx, scope, ws) {
			return []string{}
		}
		return []string{ws}
	}
	if k := keyOf(ctx); !k.Allows(scope, fsm.AllWorkspaces, time.Now().UnixMilli()) {
		return k.Workspaces
	}
	return nil
}

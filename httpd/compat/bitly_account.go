package compat

import (
	"slices"

	"github.com/valyala/fasthttp"
)

// Bitly's user and groups are the key's own view: Bitly clients read the
// user to check a token and to find its default_group_guid, and list the
// groups to pick the group_guid they create in. linkraft has no users or
// organizations: the user is the key, a group is a workspace.

// ownKey is linkraft's GET /api/v1/key.
type ownKey struct {
	ID               string   `json:"id"`
	Name             string   `json:"name"`
	Scopes           []string `json:"scopes"`
	Workspaces       []string `json:"workspaces"`
	CreatedAt        string   `json:"created_at"`
	DefaultWorkspace string   `json:"default_workspace"`
}

// everyWorkspace reports a key that may act in any workspace.
func (k *ownKey) everyWorkspace() bool {
	return slices.Contains(k.Workspaces, "*") || slices.Contains(k.Scopes, "admin")
}

// groups are the workspaces a key names; a key of every workspace lists
// its default one, and may still name any workspace as group_guid.
func (k *ownKey) groups() []string {
	if k.everyWorkspace() {
		return []string{k.DefaultWorkspace}
	}
	return k.Workspaces
}

func (b bitly) ownKey(ctx *fasthttp.RequestCtx) (ownKey, bool) {
	var k ownKey
	a := b.n.Call(ctx, "GET", "/api/v1/key", nil)
	if !a.OK() {
		b.failNative(ctx, a)
		return k, false
	}
	if err := a.Decode(&k); err != nil {
		failBitly(ctx, fasthttp.StatusInternalServerError, "INTERNAL_ERROR", err.Error())
		return k, false
	}
	return k, true
}

// user is GET /v4/user.
func (b bitly) user(ctx *fasthttp.RequestCtx) {
	k, ok := b.ownKey(ctx)
	if !ok {
		return
	}
	created := bitlyTimeOf(parseTime(&k.CreatedAt))
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(map[string]any{
		"login": k.ID, "name": k.Name, "is_active": true, "created": created, "modified": created,
		"is_sso_user": false, "is_2fa_enabled": false, "emails": []any{}, "default_group_guid": k.DefaultWorkspace,
	}))
}

// groups is GET /v4/groups.
func (b bitly) groups(ctx *fasthttp.RequestCtx) {
	k, ok := b.ownKey(ctx)
	if !ok {
		return
	}
	groups := []map[string]any{}
	for _, w := range k.groups() {
		groups = append(groups, b.groupOf(&k, w))
	}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(map[string]any{"groups": groups}))
}

// group is GET /v4/groups/{group_guid}: a workspace the key may use.
func (b bitly) group(ctx *fasthttp.RequestCtx) {
	k, ok := b.ownKey(ctx)
	if !ok {
		return
	}
	guid, _ := ctx.UserValue("guid").(string)
	if !k.everyWorkspace() && !slices.Contains(k.Workspaces, guid) {
		failBitly(ctx, fasthttp.StatusNotFound, "NOT_FOUND", "no group "+guid+" for this token: groups are the key's workspaces")
		return
	}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(b.groupOf(&k, guid)))
}

func (b bitly) groupOf(k *ownKey, workspace string) map[string]any {
	created := bitlyTimeOf(parseTime(&k.CreatedAt))
	return map[string]any{
		"guid": workspace, "name": workspace, "organization_guid": "", "is_active": true,
		"role": bitlyRole(k.Scopes), "bsds": []string{}, "created": created, "modified": created,
		"references": map[string]string{"organization": ""},
	}
}

// bitlyRole is Bitly's role of a user in a group for the key's scopes.
func bitlyRole(scopes []string) string {
	switch {
	case slices.Contains(scopes, "admin"):
		return "org-admin"
	case slices.Contains(scopes, "links:write"):
		return "group-admin"
	}
	return "group-viewer"
}

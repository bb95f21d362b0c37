package httpd

import (
	"encoding/json"
	"testing"

	"github.com/linkraft/linkraft/fsm"
)

// A key reads itself: its scopes, workspaces and where its creates go,
// never its secret or another key.
func TestOwnKey(t *testing.T) {
	s := newTestServer(t, nil)
	teamID, team := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite, 0, "team")
	_, both := addKey(t, s, fsm.ScopeLinksRead, 0, "a", "b")
	cases := []struct {
		name, header, value string
		id, workspace       string
		scopes              []string
	}{
		{"one workspace", "Authorization", "Bearer " + team, teamID, "team", []string{"links:read", "links:write"}},
		{"two workspaces", "X-Api-Key", both, "", "default", []string{"links:read"}},
		{"the admin token", "Authorization", "Bearer " + testToken, fsm.RootKeyID, "default", []string{"admin"}},
	}
	for _, c := range cases {
		ctx := do(s, "GET", "/api/v1/key", "", "", c.header, c.value)
		var got struct {
			ID               string   `json:"id"`
			Scopes           []string `json:"scopes"`
			DefaultWorkspace string   `json:"default_workspace"`
			Key              *string  `json:"key"`
		}
		if ctx.Response.StatusCode() != 200 || json.Unmarshal(ctx.Response.Body(), &got) != nil {
			t.Fatalf("%s: %d %s", c.name, ctx.Response.StatusCode(), ctx.Response.Body())
		}
		if c.id != "" && got.ID != c.id || got.DefaultWorkspace != c.workspace || len(got.Scopes) != len(c.scopes) || got.Key != nil {
			t.Errorf("%s: %s", c.name, ctx.Response.Body())
		}
	}
}

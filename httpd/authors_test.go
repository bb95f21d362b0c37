package httpd

import (
	"encoding/json"
	"strings"
	"testing"
)

// ownLinksKey makes, with the admin token, a key of workspace team named
// name, limited to the links it creates when own; it returns its id and
// secret.
func ownLinksKey(t *testing.T, s *Server, name string, own bool) (id, key string) {
	t.Helper()
	body := `{"name":"` + name + `","scopes":["links:read","links:write","stats:read"],"workspaces":["team"],"own_links_only":` +
		map[bool]string{true: "true", false: "false"}[own] + `}`
	ctx := do(s, "POST", "/admin/keys", "application/json", body)
	if status(ctx) != 201 {
		t.Fatalf("key %s: %d %s", name, status(ctx), ctx.Response.Body())
	}
	var k struct{ ID, Key string }
	if err := json.Unmarshal(ctx.Response.Body(), &k); err != nil {
		t.Fatal(err)
	}
	return k.ID, k.Key
}

// createWith creates a link of workspace team with the key (the admin
// token when key is "") and returns its code.
func createWith(t *testing.T, s *Server, key, body string) string {
	t.Helper()
	headers := []string{}
	if key != "" {
		headers = []string{"X-Api-Key", key}
	}
	ctx := do(s, "POST", "/api/v1/urls", "application/json", body, headers...)
	var l struct {
		Code string `json:"short_code"`
	}
	if status(ctx) != 201 || json.Unmarshal(ctx.Response.Body(), &l) != nil {
		t.Fatalf("create %s: %d %s", body, status(ctx), ctx.Response.Body())
	}
	return l.Code
}

// TestOwnLinksOnlyKey: a key limited to its own links (Shlink's
// AUTHORED_SHORT_URLS role) reads, edits, deletes and counts the links it
// created; another key's, the token's, look absent to it; its list, total
// and tags hold only its own; only an admin lists another key's links.
func TestOwnLinksOnlyKey(t *testing.T) {
	s := newTestServer(t, nil)
	waitTargets(t, s)
	authorID, author := ownLinksKey(t, s, "author", true)
	teamID, team := ownLinksKey(t, s, "team", false)
	mine := createWith(t, s, author, `{"url":"https://example.com/mine","workspace":"team","tags":["own"]}`)
	theirs := createWith(t, s, team, `{"url":"https://example.com/theirs","workspace":"team","tags":["other"]}`)
	token := createWith(t, s, "", `{"url":"https://example.com/token","workspace":"team"}`)
	for _, c := range []struct {
		method, path, body string
		key                string
		want               int
		holds, lacks       string // the body holds or lacks this
	}{
		{"GET", "/api/v1/key", "", author, 200, `"own_links_only":true`, ""},
		{"GET", "/api/v1/urls/" + mine, "", author, 200, mine, ""},
		{"GET", "/api/v1/urls/" + theirs, "", author, 404, "", ""},
		{"GET", "/api/v1/urls/" + token, "", author, 404, "", ""},
		{"GET", "/api/v1/urls/" + mine + "/stats", "", author, 200, "", ""},
		{"GET", "/api/v1/urls/" + theirs + "/stats", "", author, 404, "", ""},
		{"GET", "/api/v1/urls/" + theirs + "/visits", "", author, 404, "", ""},
		{"PATCH", "/api/v1/urls/" + theirs, `{"title":"mine now"}`, author, 404, "", ""},
		{"DELETE", "/api/v1/urls/" + theirs, "", author, 404, "", ""},
		{"PATCH", "/api/v1/urls/" + mine, `{"title":"still mine"}`, author, 200, "still mine", ""},
		{"GET", "/api/v1/urls?workspace=team&count=true", "", author, 200, `"total":1`, theirs},
		{"GET", "/api/v1/urls?sort=clicks&count=true", "", author, 200, `"total":1`, token},
		{"GET", "/api/v1/urls?q=example&count=true", "", author, 200, `"total":1`, theirs},
		{"GET", "/api/v1/tags?workspace=team", "", author, 200, `"own"`, `"other"`},
		// created_by: a key's own links; another's only to an admin.
		{"GET", "/api/v1/urls?created_by=" + teamID, "", author, 403, "", ""},
		{"GET", "/api/v1/urls?created_by=" + authorID, "", team, 403, "", ""},
		{"GET", "/api/v1/urls?created_by=" + authorID + "&count=true", "", "", 200, `"total":1`, theirs},
		{"GET", "/api/v1/urls?created_by=" + teamID + "&count=true", "", "", 200, `"total":1`, mine},
		{"GET", "/api/v1/urls?created_by=" + teamID + "&count=true", "", team, 200, `"total":1`, mine},
		{"GET", "/api/v1/urls?created_by=" + authorID, "", author, 200, mine, theirs},
		// The token's links have no author.
		{"GET", "/api/v1/urls?created_by=admin-token&count=true", "", "", 200, `"total":0`, ""},
		{"POST", "/admin/keys", `{"name":"x","scopes":["admin"],"workspaces":["*"],"own_links_only":true}`, "", 400, "", ""},
		{"DELETE", "/api/v1/urls/" + mine, "", author, 204, "", ""},
	} {
		headers := []string{}
		if c.key != "" {
			headers = []string{"X-Api-Key", c.key}
		}
		ctx := do(s, c.method, c.path, "application/json", c.body, headers...)
		body := string(ctx.Response.Body())
		if status(ctx) != c.want || c.holds != "" && !strings.Contains(body, c.holds) || c.lacks != "" && strings.Contains(body, c.lacks) {
			t.Errorf("%s %s: %d %.200s; want %d holding %q, not %q", c.method, c.path, status(ctx), body, c.want, c.holds, c.lacks)
		}
	}
	for _, code := range []string{theirs, token} {
		if _, ok := s.fsm.Get(code); !ok {
			t.Errorf("%s was deleted by a key that may not see it", code)
		}
	}
}

package httpd

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
)

// addKey stores a key through the node, as POST /admin/keys does, and
// returns what a client sends. Going through the node lets a test make a
// key that has already expired, which the API refuses to create.
func addKey(t *testing.T, s *Server, scopes fsm.Scope, expiresAt int64, workspaces ...string) (id, key string) {
	t.Helper()
	id, key, hash, err := fsm.MintKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k := fsm.APIKey{ID: id, Name: "test", Hash: hash, Scopes: scopes, Workspaces: workspaces, CreatedAt: 1, ExpiresAt: expiresAt}
	if _, err := s.node.Writes.Propose(context.Background(), fsm.KeyCreateCommand{Key: k, By: fsm.RootKeyID, Now: 1}, cluster.ProposeOptions{}); err != nil {
		t.Fatalf("create key: %v", err)
	}
	return id, key
}

// TestAuthorizationMatrix sends every route with every kind of credential
// and checks the status; after every refused write nothing has changed:
// the link still redirects to its target, the number of links and the
// audit log are as before.
func TestAuthorizationMatrix(t *testing.T) {
	s := newTestServer(t, nil)
	const target = "https://example.com/team-link"
	code := mustCreate(t, s, `{"url":"`+target+`","workspace":"team"}`)
	// Links the password, public stats and valid_since rows act on.
	guarded := mustCreate(t, s, `{"url":"https://example.com/guarded","workspace":"team"}`)
	public := mustCreate(t, s, `{"url":"https://example.com/public","workspace":"team","public_stats":true}`)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	embargoed := mustCreate(t, s, `{"url":"https://example.com/embargoed","workspace":"team","public_stats":true,"valid_since":"`+future+`"}`)
	_, revoked := addKey(t, s, fsm.ScopeAdmin, 0, fsm.AllWorkspaces)
	revokedID, _, _ := fsm.ParseKey(revoked)
	if ctx := do(s, "DELETE", "/admin/keys/"+revokedID, "", ""); ctx.Response.StatusCode() != 204 {
		t.Fatalf("revoke: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	_, expired := addKey(t, s, fsm.ScopeAdmin, time.Now().Add(-time.Minute).UnixMilli(), fsm.AllWorkspaces)
	_, reader := addKey(t, s, fsm.ScopeLinksRead, 0, "team")
	_, other := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "other")
	_, writer := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite, 0, "team")
	_, team := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	_, admin := addKey(t, s, fsm.ScopeAdmin, 0, fsm.AllWorkspaces)
	_, unknown, _, _ := fsm.MintKey(rand.Reader)

	type credential struct{ name, header, value string }
	creds := []credential{
		{"none", "Authorization", ""},
		{"malformed", "Authorization", "Bearer not-a-key"},
		{"unknown key", "X-Api-Key", unknown},
		{"revoked key", "Authorization", "Bearer " + revoked},
		{"expired key", "Authorization", "Bearer " + expired},
		{"links:read only", "Authorization", "Bearer " + reader},
		{"key of another workspace", "X-Api-Key", other},
		{"links:write without stats:read", "Authorization", "Bearer " + writer},
		{"key of the workspace", "Authorization", "Bearer " + team},
		{"admin key", "X-Api-Key", admin},
		{"admin token", "Authorization", "Bearer " + testToken},
	}
	// want lists a route's status per credential, in creds' order.
	refused := []int{401, 401, 401, 401, 401}
	with := func(rest ...int) []int { return append(append([]int{}, refused...), rest...) }
	all := func(status int) []int { return slices.Repeat([]int{status}, len(creds)) }
	routes := []struct {
		method, path, body string
		write              bool // refused ones must change nothing
		want               []int
	}{
		{"POST", "/api/v1/urls", `{"url":"https://example.com/new","workspace":"team"}`, true, with(403, 403, 201, 201, 201, 201)},
		{"POST", "/api/v1/workspaces/team/links", `{"url":"https://example.com/new2"}`, true, with(403, 403, 201, 201, 201, 201)},
		{"POST", "/shorten", `{"url":"https://example.com/new3","workspace":"team"}`, true, with(403, 403, 201, 201, 201, 201)},
		{"POST", "/api/v1/urls", `{"url":"https://example.com/new4","workspace":"team","public_stats":true}`, true, with(403, 403, 403, 201, 201, 201)},
		{"POST", "/api/v1/urls", `{"url":"https://example.com/new5","workspace":"team","password":"correct horse"}`, true, with(403, 403, 201, 201, 201, 201)},
		{"GET", "/api/v1/urls?workspace=team", "", false, with(200, 200, 200, 200, 200, 200)},
		{"GET", "/api/v1/urls/" + code, "", false, with(200, 404, 200, 200, 200, 200)},
		{"GET", "/api/v1/urls/" + code + "/stats", "", false, with(403, 404, 403, 200, 200, 200)},
		{"GET", "/stats/" + code, "", false, with(403, 404, 403, 200, 200, 200)},
		{"GET", "/api/v1/urls/" + code + "/stats?group_by=country", "", false, with(403, 404, 403, 200, 200, 200)},
		{"GET", "/api/v1/stats?workspace=team&group_by=browser", "", false, with(403, 200, 403, 200, 200, 200)},
		{"GET", "/api/v1/urls/" + code + "/visits", "", false, with(403, 404, 403, 200, 200, 200)},
		{"GET", "/api/v1/visits?workspace=team", "", false, with(403, 200, 403, 200, 200, 200)},
		{"DELETE", "/api/v1/urls/" + code + "/visits", "", true, with(403, 404, 200, 200, 200, 200)},
		// Orphan visits are no workspace's: an admin's alone.
		{"GET", "/api/v1/visits/orphan", "", false, with(403, 403, 403, 403, 200, 200)},
		{"DELETE", "/api/v1/visits/orphan", "", true, with(403, 403, 403, 403, 200, 200)},
		// Public stats: anyone without a credential; one with is judged by it.
		{"GET", "/api/v1/urls/" + public + "/stats", "", false, []int{200, 401, 401, 401, 401, 403, 404, 403, 200, 200, 200}},
		// Before valid_since they are nobody's without stats:read.
		{"GET", "/stats/" + embargoed, "", false, with(403, 404, 403, 200, 200, 200)},
		{"PATCH", "/api/v1/urls/" + code, `{"title":"renamed"}`, true, with(403, 404, 200, 200, 200, 200)},
		{"PATCH", "/api/v1/urls/" + guarded, `{"public_stats":true}`, true, with(403, 404, 403, 200, 200, 200)},
		{"PATCH", "/api/v1/urls/" + guarded, `{"password":"correct horse","public_stats":false}`, true, with(403, 404, 200, 200, 200, 200)},
		{"GET", "/api/v1/urls/" + code + "/history", "", false, with(200, 404, 200, 200, 200, 200)},
		{"GET", "/api/v1/tags?workspace=team", "", false, with(200, 200, 200, 200, 200, 200)},
		// Every valid key reads itself.
		{"GET", "/api/v1/key", "", false, with(200, 200, 200, 200, 200, 200)},
		// No link of the matrix has a tag: those who may change links
		// learn that none of theirs carries it.
		{"PUT", "/api/v1/tags/nosuchtag", `{"name":"renamed"}`, true, with(403, 404, 404, 404, 404, 404)},
		{"DELETE", "/api/v1/tags/nosuchtag", "", true, with(403, 404, 404, 404, 404, 404)},
		{"GET", "/robots.txt", "", false, all(200)},
		{"POST", "/api/v1/urls/bulk", `{"links":[{"url":"https://example.com/bulk","workspace":"team"}]}`, true, with(403, 200, 200, 200, 200, 200)},
		{"POST", "/api/v1/urls/bulk", `{"links":[{"url":"https://example.com/bulk2","workspace":"team","password":"correct horse","public_stats":true}]}`, true, with(403, 200, 200, 200, 200, 200)},
		{"POST", "/admin/domains", `{"domain":"m.example"}`, true, with(403, 403, 403, 403, 200, 200)},
		{"GET", "/admin/domains", "", false, with(403, 403, 403, 403, 200, 200)},
		{"DELETE", "/admin/domains/m.example", "", true, with(403, 403, 403, 403)},
		{"POST", "/admin/webhooks", `{"url":"https://hooks.example/in","events":["link.created"],"secret":"sixteen-bytes-ok"}`, true, with(403, 403, 403, 403, 201, 201)},
		{"GET", "/admin/webhooks", "", false, with(403, 403, 403, 403, 200, 200)},
		{"DELETE", "/admin/webhooks/nosuchhook000000", "", true, with(403, 403, 403, 403, 404, 404)},
		{"DELETE", "/api/v1/urls/" + code, "", true, with(403, 404)}, // those allowed are tried last
		{"GET", "/api/v1/urls/" + code + "/qr", "", false, all(200)},
		// Before valid_since a QR code answers only a key that reads links.
		{"GET", "/api/v1/urls/" + embargoed + "/qr", "", false, []int{404, 404, 404, 404, 404, 200, 404, 200, 200, 200, 200}},
		{"GET", "/" + code, "", false, all(302)},
		{"GET", "/admin/cluster", "", false, with(403, 403, 403, 403, 200, 200)},
		{"GET", "/admin/export", "", false, with(403, 403, 403, 403, 200, 200)},
		{"GET", "/admin/keys", "", false, with(403, 403, 403, 403, 200, 200)},
		{"GET", "/admin/audit", "", false, with(403, 403, 403, 403, 200, 200)},
		{"GET", "/debug/pprof/cmdline", "", false, with(403, 403, 403, 403, 200, 200)},
		{"POST", "/admin/keys", `{"name":"x","scopes":["admin"],"workspaces":["*"]}`, true, with(403, 403, 403, 403)},
		{"DELETE", "/admin/keys/" + revokedID, "", true, with(403, 403, 403, 403)},
		{"POST", "/admin/leave", `{"id":"test"}`, true, with(403, 403, 403, 403)},
		{"POST", "/admin/promote", `{"id":"test"}`, true, with(403, 403, 403, 403)},
		{"POST", "/admin/join", `{"id":"n9","raft_addr":"127.0.0.1:1","non_voter":true}`, true, with(403, 403, 403, 403)},
		{"POST", "/admin/leadership-transfer", "", true, with(403, 403, 403, 403)},
		{"GET", "/admin/backup", "", false, with(403, 403, 403, 403, 200, 200)},
		{"GET", "/health/live", "", false, all(200)},
		{"GET", "/health/writes", "", false, all(200)},
		{"GET", "/.well-known/acme-challenge/no-such-token", "", false, all(404)},
		{"GET", "/health", "", false, all(200)},
		{"GET", "/", "", false, all(200)},
		{"GET", "/" + code + "/track", "", false, all(200)}, // the pixel is public, as the redirect
		{"GET", "/metrics", "", false, all(200)},
		{"GET", "/ui/", "", false, all(200)},
		{"GET", "/ui/app.js", "", false, all(200)},
		{"GET", "/ui/app.css", "", false, all(200)},
		{"POST", "/debug/pprof/symbol", "0x0", false, with(403, 403, 403, 403, 200, 200)},
		{"POST", "/admin/import", `{"short_code":"imported","original_url":"https://example.com/i"}`, true, with(403, 403, 403, 403)},
		{"POST", "/admin/restore", "not a backup", true, with(403, 403, 403, 403)},
	}
	routes = append(routes, compatMatrixRows(code)...)
	var tried []routeTried
	for _, r := range routes {
		tried = append(tried, routeTried{r.method, r.path})
	}
	requireEveryRouteTried(t, s, tried)
	audit := len(s.fsm.Audit(fsm.AuditQuery{Limit: fsm.AuditRetention}))
	links := s.fsm.Len()
	for _, r := range routes {
		for i, want := range r.want {
			c := creds[i]
			ctx := do(s, r.method, r.path, "application/json", r.body, c.header, c.value)
			got := ctx.Response.StatusCode()
			if got != want {
				t.Errorf("%s %s with %s: %d %.120s, want %d", r.method, r.path, c.name, got, ctx.Response.Body(), want)
			}
			if got == 401 && len(ctx.Response.Header.Peek("WWW-Authenticate")) == 0 {
				t.Errorf("%s %s with %s: 401 without WWW-Authenticate", r.method, r.path, c.name)
			}
			if !r.write || got < 400 {
				if got < 400 && r.write {
					audit, links = len(s.fsm.Audit(fsm.AuditQuery{Limit: fsm.AuditRetention})), s.fsm.Len()
				}
				continue
			}
			if n := s.fsm.Len(); n != links {
				t.Errorf("%s %s with %s was refused but the links went from %d to %d", r.method, r.path, c.name, links, n)
			}
			if n := len(s.fsm.Audit(fsm.AuditQuery{Limit: fsm.AuditRetention})); n != audit {
				t.Errorf("%s %s with %s was refused but the audit log grew", r.method, r.path, c.name)
			}
			if redirect := do(s, "GET", "/"+code, "", ""); string(redirect.Response.Header.Peek("Location")) != target {
				t.Fatalf("%s %s with %s was refused but %s no longer redirects to %s", r.method, r.path, c.name, code, target)
			}
		}
	}
	// The workspace's own key deletes the link, and the audit says who.
	teamID, _, _ := fsm.ParseKey(team)
	if ctx := do(s, "DELETE", "/api/v1/urls/"+code, "", "", "Authorization", "Bearer "+team); ctx.Response.StatusCode() != 204 {
		t.Fatalf("delete with the workspace's key: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	if last := s.fsm.Audit(fsm.AuditQuery{Limit: 1}); len(last) != 1 || last[0].Action != fsm.AuditLinkDelete || last[0].KeyID != teamID || last[0].Subject != code {
		t.Fatalf("audit after the delete: %+v", last)
	}
}

// routeTried is a request the authorization matrix makes.
type routeTried struct{ method, path string }

// requireEveryRouteTried fails for every route the server registers that
// no request of tried reaches, so that a new route cannot miss the
// authorization matrix.
func requireEveryRouteTried(t *testing.T, s *Server, tried []routeTried) {
	t.Helper()
	for method, patterns := range s.router.List() {
		for _, pattern := range patterns {
			re := regexp.MustCompile("^" + routeParam.ReplaceAllStringFunc(regexp.QuoteMeta(pattern), paramPattern) + "$")
			if !slices.ContainsFunc(tried, func(r routeTried) bool {
				path, _, _ := strings.Cut(r.path, "?")
				return r.method == method && re.MatchString(path)
			}) {
				t.Errorf("no request of the authorization matrix tries %s %s", method, pattern)
			}
		}
	}
}

// routeParam is a route's parameter as regexp.QuoteMeta leaves it:
// \{name\} or \{name:\*\}.
var routeParam = regexp.MustCompile(`\\\{[^}]*\\\}`)

func paramPattern(p string) string {
	if strings.Contains(p, "*") {
		return ".*"
	}
	return "[^/]+"
}

// TestListShowsOnlyVisibleWorkspaces: a listing without a workspace has
// the links of every workspace the key sees and no others, and asking for
// a workspace the key may not see lists it as empty.
func TestListShowsOnlyVisibleWorkspaces(t *testing.T) {
	s := newTestServer(t, nil)
	codes := map[string]string{}
	for _, ws := range []string{"a", "b", "c"} {
		codes[ws] = mustCreate(t, s, `{"url":"https://example.com/`+ws+`","workspace":"`+ws+`"}`)
	}
	_, ab := addKey(t, s, fsm.ScopeLinksRead, 0, "a", "b")
	list := func(query string) []string {
		ctx := do(s, "GET", "/api/v1/urls"+query, "", "", "Authorization", "Bearer "+ab)
		var page struct {
			Links []struct {
				ShortCode string `json:"short_code"`
			} `json:"links"`
		}
		if err := json.Unmarshal(ctx.Response.Body(), &page); err != nil || ctx.Response.StatusCode() != 200 {
			t.Fatalf("list%s: %d %s", query, ctx.Response.StatusCode(), ctx.Response.Body())
		}
		var got []string
		for _, l := range page.Links {
			got = append(got, l.ShortCode)
		}
		return got
	}
	if got := strings.Join(list(""), ","); got != codes["b"]+","+codes["a"] {
		t.Errorf("list without a workspace: %s, want %s,%s", got, codes["b"], codes["a"])
	}
	if got := list("?workspace=c"); len(got) != 0 {
		t.Errorf("list of a workspace the key may not see: %v", got)
	}
}

// TestKeysAPI: a key is shown once, listed without its secret, works at
// once, and stops working once revoked.
func TestKeysAPI(t *testing.T) {
	s := newTestServer(t, nil)
	ctx := do(s, "POST", "/admin/keys", "application/json", `{"name":"ci","scopes":["links:write","links:read"],"workspaces":["ci"]}`)
	if ctx.Response.StatusCode() != 201 || string(ctx.Response.Header.Peek("Cache-Control")) != "no-store" {
		t.Fatalf("create key: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	var created struct{ ID, Key string }
	if err := json.Unmarshal(ctx.Response.Body(), &created); err != nil {
		t.Fatal(err)
	}
	auth := []string{"Authorization", "Bearer " + created.Key}
	if c := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/ci"}`, auth...); c.Response.StatusCode() != 201 ||
		!strings.Contains(string(c.Response.Body()), `"workspace":"ci"`) {
		t.Fatalf("create with the new key (its only workspace by default): %d %s", c.Response.StatusCode(), c.Response.Body())
	}
	list := do(s, "GET", "/admin/keys", "", "")
	if strings.Contains(string(list.Response.Body()), created.Key[16:]) || !strings.Contains(string(list.Response.Body()), created.ID) {
		t.Fatalf("key list shows the secret or misses the key: %s", list.Response.Body())
	}
	if c := do(s, "DELETE", "/admin/keys/"+created.ID, "", ""); c.Response.StatusCode() != 204 {
		t.Fatalf("revoke: %d", c.Response.StatusCode())
	}
	if c := do(s, "GET", "/api/v1/urls", "", "", auth...); c.Response.StatusCode() != 401 {
		t.Fatalf("a revoked key still works: %d", c.Response.StatusCode())
	}
	for _, body := range []string{
		`{"scopes":["links:read"]}`,
		`{"scopes":[],"workspaces":["*"]}`,
		`{"scopes":["links:read"],"workspaces":["*","a"]}`,
		`{"scopes":["links:read"],"workspaces":["bad name"]}`,
		`{"scopes":["links:read"],"workspaces":["*"],"expires_at":"2001-01-01T00:00:00Z"}`,
		`{"scopes":["links:read"],"workspaces":["*"],"colour":"blue"}`,
		`{"scopes":["admin"],"workspaces":["team"]}`,
	} {
		if c := do(s, "POST", "/admin/keys", "application/json", body); c.Response.StatusCode() != 400 {
			t.Errorf("create key %s: %d, want 400", body, c.Response.StatusCode())
		}
	}
}

// TestKeysListByCreator: after an admin key is revoked, the keys it made
// live on (their rights are their own); ?created_by finds exactly them.
func TestKeysListByCreator(t *testing.T) {
	s := newTestServer(t, nil)
	newKey := func(body string, auth ...string) (id, key string) {
		t.Helper()
		ctx := do(s, "POST", "/admin/keys", "application/json", body, auth...)
		var k struct{ ID, Key string }
		if ctx.Response.StatusCode() != 201 || json.Unmarshal(ctx.Response.Body(), &k) != nil {
			t.Fatalf("create key: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
		return k.ID, k.Key
	}
	adminID, admin := newKey(`{"name":"ops","scopes":["admin"],"workspaces":["*"]}`)
	madeID, _ := newKey(`{"name":"made","scopes":["links:read"],"workspaces":["*"]}`, "Authorization", "Bearer "+admin)
	newKey(`{"name":"other","scopes":["links:read"],"workspaces":["*"]}`)
	var list struct {
		Keys []struct {
			ID        string `json:"id"`
			CreatedBy string `json:"created_by"`
		}
	}
	ctx := do(s, "GET", "/admin/keys?created_by="+adminID, "", "")
	if err := json.Unmarshal(ctx.Response.Body(), &list); err != nil || len(list.Keys) != 1 || list.Keys[0].ID != madeID {
		t.Fatalf("keys made by %s: %s, want only %s", adminID, ctx.Response.Body(), madeID)
	}
	if ctx := do(s, "GET", "/admin/keys?created_by=nobody0000ab", "", ""); string(bytes.TrimSpace(ctx.Response.Body())) != `{"keys":[]}` {
		t.Fatalf("keys made by no one: %s", ctx.Response.Body())
	}
}

// TestPublicCreate: with public creates on, a client without a key creates
// into workspace public only, and nothing else opens up; they are not
// audited.
func TestPublicCreate(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.PublicCreate = true })
	// The rule came with a cluster level: a new cluster's leader raises
	// its cluster to it as it starts.
	deadline := time.Now().Add(10 * time.Second)
	for s.fsm.Raised() < fsm.LevelBounds && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	anon := []string{"Authorization", ""}
	ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/p"}`, anon...)
	if ctx.Response.StatusCode() != 201 || !strings.Contains(string(ctx.Response.Body()), `"workspace":"public"`) {
		t.Fatalf("anonymous create: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	if c := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/p","workspace":"default"}`, anon...); c.Response.StatusCode() != 401 {
		t.Fatalf("anonymous create into another workspace: %d", c.Response.StatusCode())
	}
	if c := do(s, "GET", "/api/v1/urls?workspace=public", "", "", anon...); c.Response.StatusCode() != 401 {
		t.Fatalf("anonymous list: %d", c.Response.StatusCode())
	}
	// Anonymous creates have no key to hold to account: the audit log,
	// which a flood of them would only flush, does not record them.
	for _, e := range s.fsm.Audit(fsm.AuditQuery{Kind: fsm.AuditLinks, Limit: 10}) {
		if e.Workspace == "public" {
			t.Fatalf("the anonymous create is in the audit log: %+v", e)
		}
	}
}

// FuzzCredential: whatever a client puts in Authorization, only the admin
// token and a stored key are accepted, and nothing panics. It calls
// checkKey on a bare state (no catching up), so each input costs no Raft.
func FuzzCredential(f *testing.F) {
	state := fsm.New()
	id, key, hash, err := fsm.MintKey(rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	cmd := fsm.KeyCreateCommand{By: fsm.RootKeyID, Now: 1,
		Key: fsm.APIKey{ID: id, Hash: hash, Scopes: fsm.ScopeAdmin, Workspaces: []string{fsm.AllWorkspaces}, CreatedAt: 1}}.Encode()

	if res := state.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: cmd}); res != nil {
		f.Fatalf("create key: %v", res)
	}
	sum := sha256.Sum256([]byte(testToken))
	a := &authority{fsm: state, rootTokenHash: sum[:]}
	for _, seed := range []string{"Bearer " + testToken, "bearer " + key, "Bearer " + key[:len(key)-1] + "A",
		"Basic Zm9vOmJhcg==", "Bearer ", testToken} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, auth string) {
		var h fasthttp.RequestHeader
		h.Set("Authorization", auth)
		sent := string(h.Peek("Authorization")) // as the server would see it
		const scheme = "bearer "
		valid := false
		if len(sent) > len(scheme) && strings.EqualFold(sent[:len(scheme)], scheme) {
			cred := strings.TrimSpace(sent[len(scheme):])
			valid = cred == testToken || cred == key
		}
		if _, res := a.checkKey(&h, time.Now(), false); (res == authOK) != valid {
			t.Fatalf("Authorization %q: accepted %v, want %v", sent, res == authOK, valid)
		}
	})
}

// catchUpCounter counts the times the server catches up with the leader
// before it decides on a key: on a follower each one is a round trip to
// the leader, which a client can time.
type catchUpCounter struct {
	Reads
	n atomic.Int64
}

func (c *catchUpCounter) CatchUp(ctx context.Context) error {
	c.n.Add(1)
	return c.Reads.CatchUp(ctx)
}

// newCountingServer is a test server whose catch-ups with the leader
// are counted.
func newCountingServer(t *testing.T) (*Server, *catchUpCounter) {
	t.Helper()
	reads := &catchUpCounter{}
	s := newTestServerOn(t, nil, func(n *Node) {
		reads.Reads = n.Reads
		n.Reads = reads
	})
	return s, reads
}

// TestRefusedKeysAskTheLeaderAlike: a key id the node does not know and a
// known id with a wrong secret are refused the same way, each after
// catching up with the leader once. A follower that asked the leader only
// about unknown ids answered a wrong secret a round trip sooner, which
// told anyone timing it which key ids exist.
func TestRefusedKeysAskTheLeaderAlike(t *testing.T) {
	s, reads := newCountingServer(t)
	validID, valid := addKey(t, s, fsm.ScopeLinksRead, 0, fsm.AllWorkspaces)
	_, expired := addKey(t, s, fsm.ScopeLinksRead, 1, fsm.AllWorkspaces)
	strangerID, stranger, _, err := fsm.MintKey(rand.Reader) // never stored
	if err != nil {
		t.Fatal(err)
	}
	// The valid key's id with the stranger's secret.
	wrongSecret := valid[:strings.Index(valid, validID)+len(validID)] + stranger[strings.Index(stranger, strangerID)+len(strangerID):]
	if _, _, ok := fsm.ParseKey(wrongSecret); !ok || wrongSecret == valid {
		t.Fatalf("the wrong-secret key %q is not a well-formed other key", wrongSecret)
	}
	for _, tc := range []struct {
		name     string
		key      string
		status   int
		catchUps int64
	}{
		{"a valid key is believed from local state", valid, 200, 0},
		{"an unknown key id", stranger, 401, 1},
		{"a known key id with a wrong secret", wrongSecret, 401, 1},
		{"an expired key", expired, 401, 1},
		{"a malformed key names no id to look up", "lk_not-a-key", 401, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := reads.n.Load()
			// A read of the key itself: link reads and lists catch up
			// with the leader whoever asks (their counts go forward).
			ctx := do(s, "GET", "/api/v1/key", "", "", "Authorization", "Bearer "+tc.key)
			if got := status(ctx); got != tc.status {
				t.Fatalf("status %d, want %d: %s", got, tc.status, ctx.Response.Body())
			}
			if got := reads.n.Load() - before; got != tc.catchUps {
				t.Errorf("caught up with the leader %d times, want %d", got, tc.catchUps)
			}
		})
	}
}

// unreachableLeader is a node's reads whose catch-up with the leader
// fails, as on a node restarting or cut off.
type unreachableLeader struct{ Reads }

func (unreachableLeader) CatchUp(context.Context) error { return cluster.ErrNoLeader }

// TestUnconfirmedKeyIs503: a key a node does not hold, on a node that can
// reach no leader to confirm it, is answered 503 with Retry-After, not
// 401: it may well be valid (made a moment ago, or the node is still
// loading its state), and a client must not take it for revoked. A key the
// node holds is believed as ever.
func TestUnconfirmedKeyIs503(t *testing.T) {
	s := newTestServerOn(t, nil, func(n *Node) { n.Reads = unreachableLeader{n.Reads} })
	_, valid := addKey(t, s, fsm.ScopeLinksRead, 0, fsm.AllWorkspaces)
	_, stranger, _, err := fsm.MintKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	code := mustCreate(t, s, `{"url":"https://example.com/unconfirmed"}`)
	if ctx := do(s, "GET", "/api/v1/urls/"+code, "", "", "Authorization", "Bearer "+valid); status(ctx) != 200 {
		t.Fatalf("a held key without a leader: %d", status(ctx))
	}
	ctx := do(s, "GET", "/api/v1/urls/"+code, "", "", "Authorization", "Bearer "+stranger)
	if status(ctx) != 503 || len(ctx.Response.Header.Peek("Retry-After")) == 0 {
		t.Fatalf("a key no leader could confirm: %d %s; want 503 with Retry-After", status(ctx), ctx.Response.Body())
	}
}

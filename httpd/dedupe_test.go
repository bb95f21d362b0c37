package httpd

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// waitTargets waits, a bounded time, for the test server's cluster to be
// raised to LevelTargets, from which dedupe finds any live link.
func waitTargets(tb testing.TB, s *Server) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.fsm.Raised() < fsm.LevelTargets; {
		if time.Now().After(deadline) {
			tb.Fatalf("the cluster is still at level %d", s.fsm.Raised())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// createAnswer is a native create's status and the code it answers.
func createAnswer(t *testing.T, s *Server, body string) (int, string) {
	t.Helper()
	ctx := do(s, "POST", "/api/v1/urls", "application/json", body)
	m := decodeBody(t, ctx.Response.Body())
	code, _ := m["short_code"].(string)
	return ctx.Response.StatusCode(), code
}

// TestDedupeFindsLinksMadeWithoutIt: a native create with dedupe answers
// 200 with a link made without dedupe in its workspace and domain, and
// follows the link's deletes and edits (docs/API.md "Dedupe").
func TestDedupeFindsLinksMadeWithoutIt(t *testing.T) {
	s := newTestServer(t, nil)
	waitTargets(t, s)
	cases := []struct {
		name   string
		after  func(t *testing.T, code string) // what happens to the plain link first
		dedupe string                          // the dedupe create's URL and workspace
		found  bool
	}{
		{"same workspace, another spelling", nil, `"url":"https://EXAMPLE.com:443/%s/","workspace":"team"`, true},
		{"another workspace", nil, `"url":"https://example.com/%s","workspace":"other"`, false},
		{"after a delete", func(t *testing.T, code string) {
			if ctx := do(s, "DELETE", "/api/v1/urls/"+code, "", ""); ctx.Response.StatusCode() != 204 {
				t.Fatalf("delete: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
			}
		}, `"url":"https://example.com/%s","workspace":"team"`, false},
		{"its old target after an edit", func(t *testing.T, code string) {
			editTarget(t, s, code, "https://example.com/moved-"+code)
		}, `"url":"https://example.com/%s","workspace":"team"`, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := "p" + string(rune('a'+i))
			plain := mustCreate(t, s, `{"url":"https://example.com/`+path+`","workspace":"team"}`)
			if tc.after != nil {
				tc.after(t, plain)
			}
			status, code := createAnswer(t, s, `{`+strings.ReplaceAll(tc.dedupe, "%s", path)+`,"dedupe":true}`)
			switch {
			case tc.found && (status != 200 || code != plain):
				t.Fatalf("dedupe: %d %q, want 200 with the plain link %q", status, code, plain)
			case !tc.found && (status != 201 || code == plain):
				t.Fatalf("dedupe: %d %q, want 201 with a new link", status, code)
			}
		})
	}
	t.Run("a bulk create's link", func(t *testing.T) {
		ctx := do(s, "POST", "/api/v1/urls/bulk", "application/json", `{"links":[{"url":"https://example.com/bulk","workspace":"team"}]}`)
		m := decodeBody(t, ctx.Response.Body())
		results, _ := m["results"].([]any)
		if ctx.Response.StatusCode() != 200 || len(results) != 1 {
			t.Fatalf("bulk: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
		made, _ := field(results[0].(map[string]any), "link.short_code").(string)
		if status, code := createAnswer(t, s, `{"url":"https://example.com/bulk","workspace":"team","dedupe":true}`); status != 200 || code != made {
			t.Fatalf("dedupe: %d %q, want 200 with the bulk link %q", status, code, made)
		}
	})
	t.Run("its new target after an edit", func(t *testing.T) {
		plain := mustCreate(t, s, `{"url":"https://example.com/before","workspace":"team"}`)
		editTarget(t, s, plain, "https://example.com/after")
		if status, code := createAnswer(t, s, `{"url":"https://example.com/after","workspace":"team","dedupe":true}`); status != 200 || code != plain {
			t.Fatalf("dedupe of the new target: %d %q, want 200 with %q", status, code, plain)
		}
	})
}

func editTarget(t *testing.T, s *Server, code, target string) {
	t.Helper()
	if ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"original_url":"`+target+`"}`); ctx.Response.StatusCode() != 200 {
		t.Fatalf("edit: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
}

// TestCompatibleAPIsFindLinksMadeNatively: each compatible API's "the
// existing link" call answers a link made through linkraft's own API
// without dedupe, in the key's workspace.
func TestCompatibleAPIsFindLinksMadeNatively(t *testing.T) {
	s := newTestServer(t, nil)
	waitTargets(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	cases := []struct {
		name string
		// call makes the API's request for target and returns the code
		// it answers as the existing link ("" when it answers none).
		call func(t *testing.T, target string) string
	}{
		// Shlink test-api CreateShortUrlTest::returnsAnExistingShortUrlWhenRequested
		{"Shlink findIfExists", func(t *testing.T, target string) string {
			ctx := do(s, "POST", "/rest/v3/short-urls", "application/json", `{"longUrl":"`+target+`","findIfExists":true}`, "X-Api-Key", key)
			m := decodeBody(t, ctx.Response.Body())
			if ctx.Response.StatusCode() != 200 {
				t.Fatalf("Shlink: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
			}
			code, _ := m["shortCode"].(string)
			return code
		}},
		// Kutt: POST /api/v2/links with reuse answers the user's link of
		// that target with 200 (server/handlers/links.handler.js create).
		{"Kutt reuse", func(t *testing.T, target string) string {
			ctx := do(s, "POST", "/api/v2/links", "application/json", `{"target":"`+target+`","reuse":true}`, "X-API-Key", key)
			m := decodeBody(t, ctx.Response.Body())
			if ctx.Response.StatusCode() != 200 {
				return ""
			}
			code, _ := m["address"].(string)
			return code
		}},
		// YOURLS yourls_add_new_link: a URL already shortened (unique URLs)
		// is error:url naming its short URL.
		{"YOURLS shorturl", func(t *testing.T, target string) string {
			q := url.Values{"action": {"shorturl"}, "format": {"json"}, "url": {target}, "signature": {key}}
			ctx := do(s, "GET", "/yourls-api.php?"+q.Encode(), "", "", "Authorization", "")
			m := decodeBody(t, ctx.Response.Body())
			if m["code"] != "error:url" {
				return ""
			}
			short, _ := m["shorturl"].(string)
			return strings.TrimPrefix(short, "http://sho.rt/")
		}},
		// Bitly API v4 POST /shorten: a long URL shortened before in the
		// group answers its bitlink with 200.
		{"Bitly shorten", func(t *testing.T, target string) string {
			ctx := do(s, "POST", "/v4/shorten", "application/json", `{"long_url":"`+target+`"}`, "Authorization", key)
			m := decodeBody(t, ctx.Response.Body())
			if ctx.Response.StatusCode() != 200 {
				return ""
			}
			id, _ := m["id"].(string)
			return strings.TrimPrefix(id, "sho.rt/")
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			target := "https://example.com/native-" + string(rune('a'+i))
			plain := mustCreate(t, s, `{"url":"`+target+`","workspace":"team"}`)
			if got := tc.call(t, target); got != plain {
				t.Fatalf("answered %q as the existing link, want the native %q", got, plain)
			}
		})
	}
}

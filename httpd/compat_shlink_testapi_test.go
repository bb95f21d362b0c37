package httpd

import (
	"cmp"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
)

// Cases of Shlink's own API test suite (module/Rest/test-api) that need a
// node's internals (a link made to expire in the past by a proposal, which
// no API sends), and beside them the cases of a past validUntil. Every
// other case runs against three linkraft processes in the e2e suite
// (e2e/compat_testapi_test.go and the compat_testapi files beside it).

// TestShlinkTestAPIDisabledLinks: a link past its validUntil, before its
// validSince or out of visits is still shown, as Shlink shows disabled
// links (linkraft's own read answers an expired link 410).
func TestShlinkTestAPIDisabledLinks(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	if ctx := do(s, "POST", "/admin/domains", "application/json", `{"domain":"brand.example"}`); status(ctx) != 200 {
		t.Fatalf("domain: %d %s", status(ctx), ctx.Response.Body())
	}
	future := time.Now().AddDate(0, 1, 0).UTC().Format("2006-01-02T15:04:05+00:00")
	cases := []struct {
		name, code, domain, edit string
		expire                   bool // expired by a proposal: linkraft's API takes no past expiry
	}{
		// Shlink test-api ResolveShortUrlTest::shortUrlIsProperlyResolvedEvenWhenNotEnabled
		{"future validSince", "abc123", "", `{"validSince":"` + future + `"}`, false},
		{"maxVisits reached", "abc124", "", `{"maxVisits":1}`, false},
		{"past validUntil", "abc125", "", "", true},
		{"past validUntil on a domain", "abc126", "brand.example", "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := `{"url":"https://example.com/` + c.code + `","custom_code":"` + c.code + `","workspace":"team"`
			if c.domain != "" {
				body += `,"domain":"` + c.domain + `"`
			}
			mustCreate(t, s, body+"}")
			do(s, "GET", "/"+c.code, "", "", "Host", cmp.Or(c.domain, "sho.rt"))
			path := "/rest/v3/short-urls/" + c.code
			if c.domain != "" {
				path += "?domain=" + c.domain
			}
			if c.edit != "" {
				if ctx := do(s, "PATCH", path, "application/json", c.edit, "X-Api-Key", key); status(ctx) != 200 {
					t.Fatalf("edit: %d %s", status(ctx), ctx.Response.Body())
				}
			}
			if c.expire {
				code := c.code
				if c.domain != "" {
					code = c.domain + "/" + c.code
				}
				past := fsm.EditCommand{Code: code, Now: time.Now().UnixMilli(), KeyID: fsm.RootKeyID, Fields: fsm.EditExpiresAt,
					ExpiresAt: time.Now().Add(-time.Minute).UnixMilli()}
				if _, err := s.node.Writes.Propose(context.Background(), past, cluster.ProposeOptions{}); err != nil {
					t.Fatalf("expire: %v", err)
				}
			}
			ctx := do(s, "GET", path, "", "", "X-Api-Key", key)
			if status(ctx) != 200 || field(decodeBody(t, ctx.Response.Body()), "shortCode") != c.code {
				t.Errorf("GET %s: %d %s, want 200 with the link", path, status(ctx), ctx.Response.Body())
			}
		})
	}
	if ctx := do(s, "GET", "/rest/v3/short-urls/abc125?domain=brand.example", "", "", "X-Api-Key", key); status(ctx) != 404 {
		t.Errorf("an expired code on another domain: %d %s, want 404", status(ctx), ctx.Response.Body())
	}
}

// TestShlinkTestAPIPastValidUntil: Shlink takes a validUntil in the past
// and makes a disabled link (CreateShortUrlTest::createsShortUrlWithValidUntil,
// EditShortUrlTest::metadataCanBeReset); linkraft's API refuses a past
// expiry as a likely mistake, and the Shlink API refuses it in Shlink's
// shape, naming validUntil and saying why (docs/COMPATIBILITY.md).
func TestShlinkTestAPIPastValidUntil(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	mustCreate(t, s, `{"url":"https://example.com/abc","custom_code":"abc123","workspace":"team"}`)
	past := time.Now().AddDate(0, 0, -1).UTC().Format("2006-01-02T15:04:05+00:00")
	for _, c := range []struct{ method, uri, body string }{
		{"POST", "/rest/v3/short-urls", `{"longUrl":"https://app.shlink.io","validUntil":"` + past + `"}`},
		{"PATCH", "/rest/v3/short-urls/abc123", `{"validUntil":"` + past + `"}`},
	} {
		ctx := do(s, c.method, c.uri, "application/json", c.body, "X-Api-Key", key)
		m := decodeBody(t, ctx.Response.Body())
		if els, _ := m["invalidElements"].([]any); status(ctx) != 400 || m["type"] != "https://shlink.io/api/error/invalid-data" ||
			len(els) != 1 || els[0] != "validUntil" || !strings.Contains(m["detail"].(string), "past") {
			t.Errorf("%s %s: %d %s", c.method, c.uri, status(ctx), ctx.Response.Body())
		}
	}
}

package httpd

import (
	"strings"
	"testing"
)

// A compatible API checks the credential before it decodes a body: a client
// without a valid key is refused in the API's own shape whatever it sent,
// and costs the node no decoding. A body that is not JSON tells the two
// orders apart: read first, it would be refused as a bad body.
func TestCompatChecksTheKeyBeforeTheBody(t *testing.T) {
	s := newTestServer(t, nil)
	junk := "{" + strings.Repeat(`"a":[`, 1000)
	cases := []struct {
		name, method, uri string
		headers           []string
		status            int
		says              string
	}{
		{"kutt create, wrong key", "POST", "/api/v2/links", []string{"X-API-Key", "lk_nope_nope"}, 401, "Unauthorized."},
		{"kutt create, no key", "POST", "/api/v2/links", []string{"X-API-Key", ""}, 401, "Unauthorized."},
		{"kutt update, wrong key", "PATCH", "/api/v2/links/6c6b7266-0000-8000-8000-000000ffffff", []string{"X-API-Key", "lk_nope_nope"}, 401, "Unauthorized."},
		{"shlink create, wrong key", "POST", "/rest/v3/short-urls", []string{"X-Api-Key", "lk_nope_nope"}, 401, "invalid-api-key"},
		{"shlink create, no key", "POST", "/rest/v3/short-urls", []string{"X-Api-Key", ""}, 401, "missing-authentication"},
		{"shlink edit, wrong key", "PATCH", "/rest/v3/short-urls/abc", []string{"X-Api-Key", "lk_nope_nope"}, 401, "invalid-api-key"},
		{"shlink tag rename, wrong key", "PUT", "/rest/v3/tags", []string{"X-Api-Key", "lk_nope_nope"}, 401, "invalid-api-key"},
		{"shlink redirect rules, wrong key", "POST", "/rest/v3/short-urls/abc/redirect-rules", []string{"X-Api-Key", "lk_nope_nope"}, 401, "invalid-api-key"},
		{"shlink domain redirects, wrong key", "PATCH", "/rest/v3/domains/redirects", []string{"X-Api-Key", "lk_nope_nope"}, 401, "invalid-api-key"},
		{"bitly shorten, wrong token", "POST", "/v4/shorten", []string{"Authorization", "Bearer lk_nope_nope"}, 403, "FORBIDDEN"},
		{"bitly bitlinks, wrong token", "POST", "/v4/bitlinks", []string{"Authorization", "lk_nope_nope"}, 403, "FORBIDDEN"},
		{"bitly expand, wrong token", "POST", "/v4/expand", []string{"Authorization", "Bearer lk_nope_nope"}, 403, "FORBIDDEN"},
		{"bitly update, wrong token", "PATCH", "/v4/bitlinks/bit.ly/abc", []string{"Authorization", "Bearer lk_nope_nope"}, 403, "FORBIDDEN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := do(s, c.method, c.uri, "application/json", junk, c.headers...)
			body := string(ctx.Response.Body())
			if ctx.Response.StatusCode() != c.status || !strings.Contains(body, c.says) {
				t.Fatalf("%d %s; want %d saying %q", ctx.Response.StatusCode(), body, c.status, c.says)
			}
		})
	}
}

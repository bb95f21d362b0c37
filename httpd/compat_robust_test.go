package httpd

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/linkraft/linkraft/fsm"
)

// TestCompatMalformedNamesAnswer4xx: requests whose tag, code or bitlink
// is empty or holds a slash name no linkraft route once an adapter puts
// it in a native path. Each API answers its own 4xx (its credential
// failure to a request without a valid key, not found to one with), in
// its error shape, and nothing is logged at ERROR.
func TestCompatMalformedNamesAnswer4xx(t *testing.T) {
	var buf bytes.Buffer
	s := newTestServer(t, func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(&buf, nil)) })
	waitRaised(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	const shlinkShape, yourlsShape, bitlyShape = `"type":"https://shlink.io/api/error/`, `"errorCode"`, `"message":`
	// YOURLS answers an unknown short URL's stats as yourls_get_link_stats
	// does: a statusCode and a message, no errorCode.
	const yourlsStatsShape = `"statusCode":404`
	cases := []struct {
		method, uri, body, shape string
		headers                  []string
		status                   int
	}{
		{"DELETE", "/rest/v3/tags?tags[]=a%2Fb", "", shlinkShape, []string{"X-Api-Key", ""}, 401},
		{"DELETE", "/rest/v3/tags?tags[]=", "", shlinkShape, []string{"X-Api-Key", ""}, 401},
		{"DELETE", "/rest/v3/tags?tags[]=a%2Fb", "", shlinkShape, []string{"X-Api-Key", "bogus"}, 401},
		{"PUT", "/rest/v3/tags", `{"oldName":"a/b","newName":"c"}`, shlinkShape, []string{"X-Api-Key", key}, 404},
		{"PUT", "/rest/v3/tags", `{"oldName":"/","newName":"c"}`, shlinkShape, []string{"X-Api-Key", key}, 404},
		{"GET", "/yourls-api.php?action=expand&format=json&shorturl=a/b", "", yourlsShape, []string{"Authorization", ""}, 403},
		{"GET", "/yourls-api.php?action=url-stats&format=json&shorturl=a/b&signature=" + key, "", yourlsStatsShape, []string{"Authorization", ""}, 404},
		{"POST", "/v4/expand", `{"bitlink_id":"sho.rt/"}`, bitlyShape, []string{"Authorization", "Bearer " + key}, 404},
		{"POST", "/v4/expand", `{"bitlink_id":"sho.rt/a/b"}`, bitlyShape, []string{"Authorization", "Bearer " + key}, 404},
		{"GET", "/v4/bitlinks/sho.rt/", "", bitlyShape, []string{"Authorization", "Bearer " + key}, 404},
	}
	for _, c := range cases {
		ctype := ""
		if c.body != "" {
			ctype = "application/json"
		}
		ctx := do(s, c.method, c.uri, ctype, c.body, c.headers...)
		if st := ctx.Response.StatusCode(); st != c.status || !strings.Contains(string(ctx.Response.Body()), c.shape) {
			t.Errorf("%s %s %s: %d %s; want %d in the API's error shape (%s)", c.method, c.uri, c.body, st, ctx.Response.Body(), c.status, c.shape)
		}
	}
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("logged at ERROR: %s", line)
		}
	}
}

// TestCompatEscapedSlashNamesNoOtherRoute: a name holding an escaped
// slash never reaches the native route its unescaped path happens to
// match (abc%2Fhistory is not abc's history): it is a name no link has.
func TestCompatEscapedSlashNamesNoOtherRoute(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "default")
	mustCreate(t, s, `{"url":"https://example.com/abc","custom_code":"abc"}`)
	for _, uri := range []string{"/rest/v3/short-urls/abc%2Fhistory", "/rest/v3/short-urls/abc%2Fvisits"} {
		ctx := do(s, "GET", uri, "", "", "X-Api-Key", key)
		if st := ctx.Response.StatusCode(); st != 404 {
			t.Errorf("GET %s: %d %s; want 404", uri, st, ctx.Response.Body())
		}
	}
}

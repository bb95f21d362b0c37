package httpd

import (
	"strings"
	"testing"

	"github.com/linkraft/linkraft/fsm"
)

// TestKuttEditAddressAndPassword follows Kutt's editLink validator
// (server/handlers/validators.handler.js) and its links.handler.js edit:
// a new address renames the link, one in use is "Custom URL is already in
// use." with 400, an empty or unchanged address changes nothing, and a
// password is set, kept when sent back as dots, removed when empty.
func TestKuttEditAddressAndPassword(t *testing.T) {
	s := newTestServer(t, nil)
	waitRenames(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	kutt := func(method, uri, body string) (int, map[string]any) {
		ctx := do(s, method, uri, "application/json", body, "X-API-Key", key)
		return ctx.Response.StatusCode(), decodeBody(t, ctx.Response.Body())
	}
	_, link := kutt("POST", "/api/v2/links", `{"target":"https://example.com/k","customurl":"kutt-old"}`)
	kutt("POST", "/api/v2/links", `{"target":"https://example.com/k2","customurl":"kutt-busy"}`)
	id, _ := link["id"].(string)
	edit := "/api/v2/links/" + id
	cases := []struct {
		name, body string
		status     int
		want       map[string]any
	}{
		// editLink: address "Custom URL is already in use." when query.link.find finds one.
		{"address in use", `{"address":"kutt-busy"}`, 400, map[string]any{"error": "Custom URL is already in use."}},
		// editLink: preservedURLs → "You can't use this custom URL."
		{"reserved address", `{"address":"api"}`, 400, map[string]any{"error": "You can't use this custom URL."}},
		// edit: a falsy or unchanged field is dropped; nothing left is "Should at least update one field."
		{"empty address", `{"address":""}`, 400, map[string]any{"error": "Should at least update one field."}},
		{"rename", `{"address":"kutt-new"}`, 200, map[string]any{"address": "kutt-new", "id": id, "link": "http://sho.rt/kutt-new", "target": "https://example.com/k"}},
		// linkraft retires a renamed code for good: Kutt's answer for a taken address.
		{"back to the old address", `{"address":"kutt-old"}`, 400, map[string]any{"error": "Custom URL is already in use."}},
		{"set a password", `{"password":"correct horse"}`, 200, map[string]any{"password": true}},
		// edit: a password of only "•" (the form's mask) is dropped.
		{"password sent back masked", `{"password":"••••••••","description":"D"}`, 200, map[string]any{"password": true, "description": "D"}},
		// edit: a falsy password on a protected link sets it to null.
		{"remove the password", `{"password":""}`, 200, map[string]any{"password": false}},
		{"empty password on a link without one", `{"password":""}`, 400, map[string]any{"error": "Should at least update one field."}},
		{"password not a string", `{"password":7}`, 400, map[string]any{}},
		// Kutt validators.handler.js editLink description: at most 2040; linkraft keeps 512.
		{"description over 2040", `{"description":"` + strings.Repeat("d", 2041) + `"}`, 400,
			map[string]any{"error": "Description length must be between 1 and 2040."}},
		{"description over 512", `{"description":"` + strings.Repeat("d", 513) + `"}`, 400,
			map[string]any{"error": "linkraft keeps a description of up to 512 characters"}},
		{"description of 512", `{"description":"` + strings.Repeat("d", 512) + `"}`, 200,
			map[string]any{"description": strings.Repeat("d", 512)}},
	}
	for _, c := range cases {
		status, m := kutt("PATCH", edit, c.body)
		if status != c.status {
			t.Errorf("%s: status %d, want %d: %v", c.name, status, c.status, m)
			continue
		}
		for path, want := range c.want {
			if v := field(m, path); v != want {
				t.Errorf("%s: %s = %#v, want %#v (%v)", c.name, path, v, want, m)
			}
		}
	}
	if ctx := do(s, "GET", "/kutt-old", "", ""); ctx.Response.StatusCode() != 404 {
		t.Errorf("the old address after the rename: %d", ctx.Response.StatusCode())
	}
	if ctx := do(s, "GET", "/kutt-new", "", ""); !strings.HasPrefix(location(ctx), "https://example.com/k") {
		t.Errorf("the new address redirects to %q", location(ctx))
	}
}

package httpd

import (
	"cmp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/valyala/fasthttp"

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
	waitRaisedTo(t, s, fsm.LevelDisabled)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	if ctx := do(s, "POST", "/admin/domains", "application/json", `{"domain":"brand.example"}`); status(ctx) != 200 {
		t.Fatalf("domain: %d %s", status(ctx), ctx.Response.Body())
	}
	future := time.Now().AddDate(0, 1, 0).UTC().Format("2006-01-02T15:04:05+00:00")
	past := time.Now().AddDate(0, 0, -1).UTC().Format("2006-01-02T15:04:05+00:00")
	cases := []struct{ name, code, domain, edit string }{
		// Shlink test-api ResolveShortUrlTest::shortUrlIsProperlyResolvedEvenWhenNotEnabled
		{"future validSince", "abc123", "", `{"validSince":"` + future + `"}`},
		{"maxVisits reached", "abc124", "", `{"maxVisits":1}`},
		{"past validUntil", "abc125", "", `{"validUntil":"` + past + `"}`},
		{"past validUntil on a domain", "abc126", "brand.example", `{"validUntil":"` + past + `"}`},
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
			if ctx := do(s, "PATCH", path, "application/json", c.edit, "X-Api-Key", key); status(ctx) != 200 {
				t.Fatalf("edit: %d %s", status(ctx), ctx.Response.Body())
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
// and makes a disabled link (CreateShortUrlTest::createsShortUrlWithValidUntil),
// or disables one by an edit and enables it by the next
// (EditShortUrlTest::metadataCanBeReset); so does linkraft once the
// cluster keeps disabled links (fsm.LevelDisabled). The link redirects as
// an expired one (410: docs/COMPATIBILITY.md), is read, listed unless
// excludePastValidUntil, and outlives the purge of expired links.
// linkraft's own API still refuses a past expires_at, whatever header a
// client sends.
func TestShlinkTestAPIPastValidUntil(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaisedTo(t, s, fsm.LevelDisabled)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	mustCreate(t, s, `{"url":"https://example.com/abc","custom_code":"abc123","workspace":"team"}`)
	shlinkTime := func(at time.Time) string { return at.UTC().Format("2006-01-02T15:04:05+00:00") }
	past, future := shlinkTime(time.Now().AddDate(0, 0, -1)), shlinkTime(time.Now().AddDate(0, 1, 0))
	redirect := func(code string, want int) {
		t.Helper()
		if ctx := do(s, "GET", "/"+code, "", "", "Host", "sho.rt"); status(ctx) != want {
			t.Errorf("redirect of %s: %d, want %d", code, status(ctx), want)
		}
	}
	shlink := func(method, uri, body string, want int) map[string]any {
		t.Helper()
		ctx := do(s, method, uri, "application/json", body, "X-Api-Key", key)
		if status(ctx) != want {
			t.Fatalf("%s %s %s: %d %s, want %d", method, uri, body, status(ctx), ctx.Response.Body(), want)
		}
		return decodeBody(t, ctx.Response.Body())
	}
	listed := func(query string) []string {
		t.Helper()
		var codes []string
		for _, u := range field(shlink("GET", "/rest/v3/short-urls"+query, "", 200), "shortUrls.data").([]any) {
			codes = append(codes, u.(map[string]any)["shortCode"].(string))
		}
		slices.Sort(codes)
		return codes
	}

	made := shlink("POST", "/rest/v3/short-urls", `{"longUrl":"https://app.shlink.io","customSlug":"off","validUntil":"`+past+`"}`, 200)
	if field(made, "meta.validUntil") != past {
		t.Errorf("created: meta %v, want validUntil %s", made["meta"], past)
	}
	redirect("off", 410)
	if got := field(shlink("GET", "/rest/v3/short-urls/off", "", 200), "meta.validUntil"); got != past {
		t.Errorf("read: validUntil %v, want %s", got, past)
	}
	if got := listed(""); !slices.Equal(got, []string{"abc123", "off"}) {
		t.Errorf("list: %v, want [abc123 off]", got)
	}
	if got := listed("?excludePastValidUntil=true"); !slices.Equal(got, []string{"abc123"}) {
		t.Errorf("list without past validUntil: %v, want [abc123]", got)
	}
	if s.fsm.NeedsPurge(fsm.PurgeCommand{ExpiredBefore: time.Now().Add(48 * time.Hour).UnixMilli()}) {
		t.Error("the purge of expired links would remove the disabled link")
	}

	// Enabled by an edit to a later validUntil, disabled again by one to a
	// past one, enabled by clearing it.
	shlink("PATCH", "/rest/v3/short-urls/off", `{"validUntil":"`+future+`"}`, 200)
	redirect("off", 302)
	shlink("PATCH", "/rest/v3/short-urls/abc123", `{"validUntil":"`+past+`"}`, 200)
	redirect("abc123", 410)
	shlink("PATCH", "/rest/v3/short-urls/abc123", `{"validUntil":null}`, 200)
	redirect("abc123", 302)

	// linkraft's own API: a past expiry is a likely mistake, and no
	// client can claim to be a compatible API or a peer.
	for _, c := range []struct{ method, uri, body string }{
		{"POST", "/api/v1/urls", `{"url":"https://example.com/x","expires_at":"` + past + `"}`},
		{"PATCH", "/api/v1/urls/abc123", `{"expires_at":"` + past + `"}`},
	} {
		ctx := do(s, c.method, c.uri, "application/json", c.body, "X-Linkraft-Past-Expiry", "1")
		if status(ctx) != 400 || !strings.Contains(string(ctx.Response.Body()), "in the past") {
			t.Errorf("native %s %s: %d %s, want 400", c.method, c.uri, status(ctx), ctx.Response.Body())
		}
	}
}

// TestPastExpiryNeedsTheLevel: until the cluster is raised to
// fsm.LevelDisabled, the compatible APIs are not let take a past expiry
// (the Shlink adapter then refuses it as before: an older build would
// purge the link a day later), and nothing marks the request.
func TestPastExpiryNeedsTheLevel(t *testing.T) {
	for _, level := range []int{fsm.LevelTargets, fsm.LevelDisabled} {
		state := fsm.New()
		for i, cmd := range []fsm.Command{fsm.InitCommand{}, fsm.RaiseCommand{To: level}} {
			if err, _ := state.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: cmd.Encode()}).(error); err != nil {
				t.Fatal(err)
			}
		}
		var ctx fasthttp.RequestCtx
		n := &nativeAPI{auth: &authority{fsm: state}}
		want := level >= fsm.LevelDisabled
		if got := n.AllowPastExpiry(&ctx); got != want || pastExpiryAllowed(&ctx) != want {
			t.Errorf("raised to %d: allowed %v, marked %v; want %v", level, got, pastExpiryAllowed(&ctx), want)
		}
	}
}

package httpd

import (
	"slices"
	"testing"

	"github.com/linkraft/linkraft/fsm"
)

// keysOf is the sorted field names of a decoded object.
func keysOf(v any) []string {
	m, _ := v.(map[string]any)
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestShlinkExactFieldSets: Shlink 5's objects have their fields and no
// others: a ShortUrl is ShortUrl::toArray, the visits overview two
// VisitsSummary, a tag's stats TagInfo.
func TestShlinkExactFieldSets(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	get := func(method, uri, body string) map[string]any {
		t.Helper()
		ctx := do(s, method, uri, "application/json", body, "X-Api-Key", key)
		if st := ctx.Response.StatusCode(); st != 200 {
			t.Fatalf("%s %s: %d %s", method, uri, st, ctx.Response.Body())
		}
		return decodeBody(t, ctx.Response.Body())
	}
	shortURL := []string{"crawlable", "dateCreated", "domain", "forwardQuery", "hasRedirectRules", "longUrl", "meta",
		"shortCode", "shortUrl", "tags", "title", "visitsSummary"}
	created := get("POST", "/rest/v3/short-urls", `{"longUrl":"https://example.com/exact","customSlug":"exact-1","tags":["x"]}`)
	for name, obj := range map[string]any{
		"create": created,
		"get":    get("GET", "/rest/v3/short-urls/exact-1", ""),
		"edit":   get("PATCH", "/rest/v3/short-urls/exact-1", `{"title":"T"}`),
		"list":   field(get("GET", "/rest/v3/short-urls", ""), "shortUrls.data").([]any)[0],
	} {
		if got := keysOf(obj); !slices.Equal(got, shortURL) {
			t.Errorf("%s: ShortUrl fields %v, want %v", name, got, shortURL)
		}
	}
	if got, want := keysOf(field(get("GET", "/rest/v3/visits", ""), "visits")), []string{"nonOrphanVisits", "orphanVisits"}; !slices.Equal(got, want) {
		t.Errorf("visits overview fields %v, want %v", got, want)
	}
	stats := field(get("GET", "/rest/v3/tags/stats", ""), "tags.data").([]any)
	if got, want := keysOf(stats[0]), []string{"shortUrlsCount", "tag", "visitsSummary"}; !slices.Equal(got, want) {
		t.Errorf("tag stats fields %v, want %v", got, want)
	}
}

// TestShlinkParameterForms: Shlink's invalid-data names every invalid
// field with Shlink's own detail; DELETE /tags reads PHP's indexed array;
// /rest/health is answered without a version, as Shlink routes it.
func TestShlinkParameterForms(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	for uri, want := range map[string][]string{
		"/rest/v3/short-urls?tagsMode=some&orderBy=visits-UP&itemsPerPage=0": {"itemsPerPage", "orderBy", "tagsMode"},
		"/rest/v3/short-urls?startDate=yesterday&excludeTagsMode=none":       {"excludeTagsMode", "startDate"},
		"/rest/v3/visits/non-orphan?startDate=x&page=0&excludeBots=maybe":    {"excludeBots", "page", "startDate"},
	} {
		ctx := do(s, "GET", uri, "", "", "X-Api-Key", key)
		m := decodeBody(t, ctx.Response.Body())
		var got []string
		for _, e := range field(m, "invalidElements").([]any) {
			got = append(got, e.(string))
		}
		slices.Sort(got)
		if status(ctx) != 400 || m["type"] != "https://shlink.io/api/error/invalid-data" || m["detail"] != "Provided data is not valid" || !slices.Equal(got, want) {
			t.Errorf("%s: %d %s; want 400 invalid-data naming %v", uri, status(ctx), ctx.Response.Body(), want)
		}
	}
	mustCreate(t, s, `{"url":"https://example.com/t","custom_code":"tagged-1","workspace":"team","tags":["gone","kept"]}`)
	if ctx := do(s, "DELETE", "/rest/v3/tags?tags%5B0%5D=gone", "", "", "X-Api-Key", key); status(ctx) != 204 {
		t.Fatalf("DELETE /tags?tags[0]=gone: %d %s", status(ctx), ctx.Response.Body())
	}
	if tags := field(decodeBody(t, do(s, "GET", "/rest/v3/short-urls/tagged-1", "", "", "X-Api-Key", key).Response.Body()), "tags"); len(tags.([]any)) != 1 {
		t.Errorf("after DELETE /tags?tags[0]=gone the link's tags are %v, want [kept]", tags)
	}
	ctx := do(s, "GET", "/rest/health", "", "", "X-Api-Key", "")
	if status(ctx) != 200 || field(decodeBody(t, ctx.Response.Body()), "status") != "pass" {
		t.Errorf("GET /rest/health: %d %s", status(ctx), ctx.Response.Body())
	}
}

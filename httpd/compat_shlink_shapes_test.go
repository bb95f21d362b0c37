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

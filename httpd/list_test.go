package httpd

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestListOffsetAndCount: a list starts at an offset and, with
// count=true, says how many links pass its filters and their clicks, on
// every page; bad values are refused with 400 (docs/API.md, "Listing").
func TestListOffsetAndCount(t *testing.T) {
	s := newTestServer(t, nil)
	var codes []string // newest first
	for i := range 7 {
		tags := `["odd"]`
		if i%2 == 0 {
			tags = `["even"]`
		}
		code := mustCreate(t, s, fmt.Sprintf(`{"url":"https://example.com/%d","tags":%s,"title":"item %d"}`, i, tags, i))
		codes = append([]string{code}, codes...)
	}
	do(s, "GET", "/"+codes[0], "", "")
	do(s, "GET", "/"+codes[0], "", "")
	do(s, "GET", "/"+codes[3], "", "")
	realNode(s).Clicks().Flush(context.Background())
	pageOf := func(v map[string]any) []string {
		var out []string
		for _, l := range v["links"].([]any) {
			out = append(out, l.(map[string]any)["short_code"].(string))
		}
		return out
	}
	for _, tc := range []struct {
		name, query string
		want        []string
		total       any // nil: not counted
		clicks      any
	}{
		{"offset", "offset=2&limit=2", codes[2:4], nil, nil},
		{"offset with a count", "offset=5&limit=5&count=true", codes[5:], 7.0, 3.0},
		{"offset past the end", "offset=9&count=true", nil, 7.0, 3.0},
		{"count of a tag", "tag=EVEN&limit=1&offset=1&count=true", []string{codes[2]}, 4.0, 2.0},
		{"count of a text search", "q=item%205&count=true", []string{codes[1]}, 1.0, 0.0},
		{"count by clicks", "sort=clicks&limit=1&offset=1&count=true", []string{codes[3]}, 7.0, 3.0},
		{"count false", "count=false&limit=1", codes[:1], nil, nil},
	} {
		ctx := do(s, "GET", "/api/v1/urls?"+tc.query, "", "")
		if status(ctx) != 200 {
			t.Errorf("%s: %d %s", tc.name, status(ctx), ctx.Response.Body())
			continue
		}
		v := body(t, ctx)
		if got := pageOf(v); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if v["total"] != tc.total || v["total_clicks"] != tc.clicks {
			t.Errorf("%s: total %v, clicks %v, want %v and %v", tc.name, v["total"], v["total_clicks"], tc.total, tc.clicks)
		}
	}
	for _, tc := range []struct{ name, query, says string }{
		{"negative offset", "offset=-1", "offset"},
		{"offset not a number", "offset=x", "offset"},
		{"offset and cursor", "offset=1&cursor=5", "together"},
		{"count not a boolean", "count=yes", "count"},
	} {
		ctx := do(s, "GET", "/api/v1/urls?"+tc.query, "", "")
		if status(ctx) != 400 || !strings.Contains(string(ctx.Response.Body()), tc.says) {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.name, status(ctx), ctx.Response.Body(), tc.says)
		}
	}
}

package httpd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"

	"github.com/linkraft/linkraft/fsm"
)

// listFixture is a node with seven links of workspace "team" (codes lnk0
// to lnk6, lnk6 the newest; the even ones tagged "even"; lnk3 clicked
// three times, lnk5 twice, lnk1 once) and one of another workspace, and a key that
// sees only "team".
func listFixture(t *testing.T) (*Server, string) {
	t.Helper()
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	for i := range 7 {
		tags := `[]`
		if i%2 == 0 {
			tags = `["even"]`
		}
		mustCreate(t, s, fmt.Sprintf(`{"url":"https://example.com/%d","custom_code":"lnk%d","workspace":"team","title":"item %d","tags":%s}`, i, i, i, tags))
	}
	mustCreate(t, s, `{"url":"https://example.com/other","custom_code":"unseen","workspace":"other"}`)
	for code, n := range map[string]int{"lnk3": 3, "lnk5": 2, "lnk1": 1, "unseen": 5} {
		for range n {
			do(s, "GET", "/"+code, "", "")
		}
	}
	realNode(s).Clicks().Flush(context.Background())
	return s, key
}

// TestKuttListPages follows Kutt's GET /api/v2/links: {total, limit,
// skip, data}, limit 10 unless asked and at most 50, search over the
// target and description (Kutt server/handlers/helpers.handler.js
// parseQuery, links.handler.js get).
func TestKuttListPages(t *testing.T) {
	s, key := listFixture(t)
	for _, tc := range []struct {
		name, query string
		total       float64
		limit, skip float64
		codes       []string
	}{
		{"default page", "", 7, 10, 0, []string{"lnk6", "lnk5", "lnk4", "lnk3", "lnk2", "lnk1", "lnk0"}},
		{"limit and skip", "limit=2&skip=3", 7, 2, 3, []string{"lnk3", "lnk2"}},
		{"limit above 50 is 50", "limit=500", 7, 50, 0, []string{"lnk6", "lnk5", "lnk4", "lnk3", "lnk2", "lnk1", "lnk0"}},
		{"limit 0 is the default", "limit=0&skip=6", 7, 10, 6, []string{"lnk0"}},
		{"limit not a number is the default", "limit=many", 7, 10, 0, []string{"lnk6", "lnk5", "lnk4", "lnk3", "lnk2", "lnk1", "lnk0"}},
		{"skip past the end", "skip=40", 7, 10, 40, []string{}},
		{"search", "search=item%204", 1, 10, 0, []string{"lnk4"}},
		{"search no link matches", "search=nothing-like-it", 0, 10, 0, []string{}},
	} {
		ctx := do(s, "GET", "/api/v2/links?"+tc.query, "", "", "X-API-Key", key)
		var answer struct {
			Total, Limit, Skip float64
			Data               []struct {
				Address string `json:"address"`
			}
		}
		if status(ctx) != 200 || json.Unmarshal(ctx.Response.Body(), &answer) != nil {
			t.Errorf("%s: %d %s", tc.name, status(ctx), ctx.Response.Body())
			continue
		}
		codes := []string{}
		for _, d := range answer.Data {
			codes = append(codes, d.Address)
		}
		if answer.Total != tc.total || answer.Limit != tc.limit || answer.Skip != tc.skip || !slices.Equal(codes, tc.codes) {
			t.Errorf("%s: total %v limit %v skip %v %v, want %v %v %v %v", tc.name, answer.Total, answer.Limit, answer.Skip, codes,
				tc.total, tc.limit, tc.skip, tc.codes)
		}
	}
}

// shlinkPagination is Shlink's pagination block.
type shlinkPagination struct {
	CurrentPage, PagesCount, ItemsPerPage, ItemsInCurrentPage, TotalItems int
}

// TestShlinkListPagination: a page's codes and its pagination
// {currentPage, pagesCount, itemsPerPage, itemsInCurrentPage, totalItems},
// read from linkraft's offsets and counts, or from a scan for filters
// linkraft's list does not have (Shlink test-api
// ListShortUrlsTest::shortUrlsAreProperlyListed, its pagination).
func TestShlinkListPagination(t *testing.T) {
	s, key := listFixture(t)
	for _, tc := range []struct {
		name, query string
		codes       []string
		want        shlinkPagination
	}{
		{"first page", "", []string{"lnk6", "lnk5", "lnk4", "lnk3", "lnk2", "lnk1", "lnk0"}, shlinkPagination{1, 1, 10, 7, 7}},
		{"second page of two", "page=2&itemsPerPage=2", []string{"lnk4", "lnk3"}, shlinkPagination{2, 4, 2, 2, 7}},
		{"last page, part full", "page=4&itemsPerPage=2", []string{"lnk0"}, shlinkPagination{4, 4, 2, 1, 7}},
		{"page past the end", "page=9&itemsPerPage=2", []string{}, shlinkPagination{9, 4, 2, 0, 7}},
		{"every item", "itemsPerPage=-1", []string{"lnk6", "lnk5", "lnk4", "lnk3", "lnk2", "lnk1", "lnk0"}, shlinkPagination{1, 1, 7, 7, 7}},
		{"oldest first", "orderBy=dateCreated-ASC&itemsPerPage=3", []string{"lnk0", "lnk1", "lnk2"}, shlinkPagination{1, 3, 3, 3, 7}},
		{"oldest first, second page", "orderBy=dateCreated-ASC&itemsPerPage=3&page=2", []string{"lnk3", "lnk4", "lnk5"}, shlinkPagination{2, 3, 3, 3, 7}},
		{"most visited", "orderBy=visits-DESC&itemsPerPage=2", []string{"lnk3", "lnk5"}, shlinkPagination{1, 4, 2, 2, 7}},
		{"least visited, last page", "orderBy=visits-ASC&itemsPerPage=3&page=3", []string{"lnk3"}, shlinkPagination{3, 3, 3, 1, 7}},
		{"one tag", "tags[]=even&itemsPerPage=3&page=2", []string{"lnk0"}, shlinkPagination{2, 2, 3, 1, 4}},
		{"search", "searchTerm=item%202", []string{"lnk2"}, shlinkPagination{1, 1, 10, 1, 1}},
		// Read by a scan: linkraft's list has no excluded tags.
		{"excluded tag", "excludeTags[]=even&itemsPerPage=2&page=2", []string{"lnk1"}, shlinkPagination{2, 2, 2, 1, 3}},
		{"ordered by code", "orderBy=shortCode-ASC&itemsPerPage=2", []string{"lnk0", "lnk1"}, shlinkPagination{1, 4, 2, 2, 7}},
	} {
		ctx := do(s, "GET", "/rest/v3/short-urls?"+tc.query, "", "", "X-Api-Key", key)
		var answer struct {
			ShortURLs struct {
				Data []struct {
					ShortCode string `json:"shortCode"`
				} `json:"data"`
				Pagination shlinkPagination `json:"pagination"`
			} `json:"shortUrls"`
		}
		if status(ctx) != 200 || json.Unmarshal(ctx.Response.Body(), &answer) != nil {
			t.Errorf("%s: %d %s", tc.name, status(ctx), ctx.Response.Body())
			continue
		}
		codes := []string{}
		for _, d := range answer.ShortURLs.Data {
			codes = append(codes, d.ShortCode)
		}
		if !slices.Equal(codes, tc.codes) || answer.ShortURLs.Pagination != tc.want {
			t.Errorf("%s: %v %+v, want %v %+v", tc.name, codes, answer.ShortURLs.Pagination, tc.codes, tc.want)
		}
	}
}

// TestYOURLSStatsAndTotals follows YOURLS' action=stats (filter top,
// bottom, last or rand; limit links from start; the totals of every link)
// and action=db-stats (YOURLS includes/functions-api.php
// yourls_api_stats, yourls_api_db_stats).
func TestYOURLSStatsAndTotals(t *testing.T) {
	s, key := listFixture(t)
	stats := func(t *testing.T, q url.Values) map[string]any {
		t.Helper()
		q.Set("signature", key)
		q.Set("format", "json")
		ctx := do(s, "GET", "/yourls-api.php?"+q.Encode(), "", "", "Authorization", "")
		if status(ctx) != 200 {
			t.Fatalf("%v: %d %s", q, status(ctx), ctx.Response.Body())
		}
		return decodeBody(t, ctx.Response.Body())
	}
	urlsOf := func(m map[string]any) []string {
		links, _ := m["links"].(map[string]any)
		out := []string{}
		for i := 1; i <= len(links); i++ {
			out = append(out, links[fmt.Sprintf("link_%d", i)].(map[string]any)["url"].(string))
		}
		return out
	}
	u := func(ns ...int) []string {
		out := []string{}
		for _, n := range ns {
			out = append(out, fmt.Sprintf("https://example.com/%d", n))
		}
		return out
	}
	db := stats(t, url.Values{"action": {"db-stats"}})
	if field(db, "db-stats.total_links") != "7" || field(db, "db-stats.total_clicks") != "6" {
		t.Errorf("db-stats: %v, want 7 links and 6 clicks of the key's workspace", db)
	}
	for _, tc := range []struct {
		name, filter, limit, start string
		want                       []string
	}{
		{"top", "top", "2", "", u(3, 5)},
		{"unknown filter is top", "best", "1", "1", u(5)},
		{"bottom, oldest first among equals", "bottom", "2", "", u(0, 2)},
		{"bottom from start", "bottom", "2", "5", u(5, 3)},
		{"last", "last", "3", "1", u(5, 4, 3)},
		{"no limit lists none", "last", "", "", u()},
		{"start past the end", "top", "3", "7", u()},
	} {
		m := stats(t, url.Values{"action": {"stats"}, "filter": {tc.filter}, "limit": {tc.limit}, "start": {tc.start}})
		if got := urlsOf(m); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if field(m, "stats.total_links") != "7" || field(m, "stats.total_clicks") != "6" {
			t.Errorf("%s: stats %v", tc.name, m["stats"])
		}
	}
	for limit, want := range map[string]int{"3": 3, "7": 7, "20": 7} {
		got := urlsOf(stats(t, url.Values{"action": {"stats"}, "filter": {"rand"}, "limit": {limit}}))
		sorted := slices.Clone(got)
		slices.Sort(sorted)
		if len(got) != want || len(slices.Compact(sorted)) != want {
			t.Errorf("rand, limit %s: %v, want %d different links", limit, got, want)
		}
	}
}

package e2e

import (
	"fmt"
	"testing"
)

// TestShlinkTestAPITags: Shlink's tag lists, stats, renames and deletes
// (ListTagsTest, TagsStatsTest, UpdateTagTest, RenameTagTest,
// DeleteTagsTest) on the suite's fixture and visits. A tag exists in
// linkraft only while a link carries it, so the fixture's baz, which no
// link carries, is never listed (docs/COMPATIBILITY.md, GET /tags), and a
// tag's visitsSummary counts clicks, with no bots (docs/COMPATIBILITY.md,
// GET /tags/stats).
func TestShlinkTestAPITags(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	s := newShlinkSuite(t, shlinkFixture{visits: true})
	pagination := func(current, pages, perPage, inPage, total int) string {
		return fmt.Sprintf(`{"currentPage":%d,"pagesCount":%d,"itemsPerPage":%d,"itemsInCurrentPage":%d,"totalItems":%d}`,
			current, pages, perPage, inPage, total)
	}
	tags := func(data, key, query, list, page string) shlinkCase {
		return shlinkCase{test: "ListTagsTest::expectedListOfTagsIsReturned (" + data + ")", key: key, method: "GET",
			path: "/rest/v3/tags" + query, status: 200, want: map[string]string{"tags.data": list, "tags.pagination": page}}
	}
	stat := func(tag string, links, clicks int) string {
		return fmt.Sprintf(`{"tag":%q,"shortUrlsCount":%d,"visitsSummary":{"total":%d,"nonBots":%d,"bots":0}}`, tag, links, clicks, clicks)
	}
	stats := func(data, key, query, list, page string) shlinkCase {
		return shlinkCase{test: "TagsStatsTest::expectedListOfTagsIsReturned (" + data + ")", key: key, method: "GET",
			path: "/rest/v3/tags/stats" + query, status: 200, want: map[string]string{"tags.data": list, "tags.pagination": page,
				"tags.data.0.visitsCount": "-"}}
	}
	s.run([]shlinkCase{
		tags("admin API key", "", "", `["bar","foo"]`, pagination(1, 1, 2, 2, 2)),
		tags("admin api key with pagination", "", "?page=2&itemsPerPage=2", `[]`, pagination(2, 1, 2, 0, 2)),
		tags("author API key", "author_api_key", "", `["bar","foo"]`, pagination(1, 1, 2, 2, 2)),
		tags("domain API key", "domain_api_key", "", `["foo"]`, pagination(1, 1, 1, 1, 1)),
		// TagsParams' searchTerm and orderBy (swagger's GET /tags).
		tags("searchTerm, any case", "", "?searchTerm=Fo", `["foo"]`, pagination(1, 1, 1, 1, 1)),
		tags("orderBy tag-DESC", "", "?orderBy=tag-DESC", `["foo","bar"]`, pagination(1, 1, 2, 2, 2)),
		stats("admin API key", "", "", "["+stat("bar", 1, 1)+","+stat("foo", 3, 4)+"]", pagination(1, 1, 2, 2, 2)),
		stats("admin API key with pagination", "", "?page=1&itemsPerPage=2", "["+stat("bar", 1, 1)+","+stat("foo", 3, 4)+"]", pagination(1, 1, 2, 2, 2)),
		stats("author API key", "author_api_key", "", "["+stat("bar", 1, 1)+","+stat("foo", 2, 4)+"]", pagination(1, 1, 2, 2, 2)),
		stats("author API key with pagination", "author_api_key", "?page=2&itemsPerPage=1", "["+stat("foo", 2, 4)+"]", pagination(2, 2, 1, 1, 2)),
		stats("domain API key", "domain_api_key", "", "["+stat("foo", 1, 0)+"]", pagination(1, 1, 1, 1, 1)),
		stats("orderBy shortUrlsCount-DESC", "", "?orderBy=shortUrlsCount-DESC", "["+stat("foo", 3, 4)+","+stat("bar", 1, 1)+"]", pagination(1, 1, 2, 2, 2)),
		stats("a page below 1", "", "?page=0&itemsPerPage=-1", "["+stat("bar", 1, 1)+","+stat("foo", 3, 4)+"]", pagination(1, 1, 2, 2, 2)),
	})

	var renames []shlinkCase
	for _, c := range []struct{ name, body, fields string }{
		{"[]", `{}`, `["newName","oldName"]`},
		{"oldName", `{"oldName":"foo"}`, `["newName"]`},
		{"newName", `{"newName":"foo"}`, `["oldName"]`},
	} {
		renames = append(renames, shlinkCase{test: "UpdateTagTest::notProvidingTagsReturnsBadRequest (" + c.name + ")", method: "PUT",
			path: "/rest/v3/tags", body: c.body, status: 400, want: map[string]string{"type": `"https://shlink.io/api/error/invalid-data"`,
				"detail": `"Provided data is not valid"`, "title": `"Invalid data"`, "invalidElements": c.fields}})
	}
	for _, v := range []string{"1", "2", "3"} {
		renames = append(renames,
			shlinkCase{test: "UpdateTagTest::tryingToRenameInvalidTagReturnsNotFound (version " + v + ")", method: "PUT",
				path: "/rest/v" + v + "/tags", body: `{"oldName":"invalid_tag","newName":"foo"}`, status: 404, want: map[string]string{
					"type": `"https://shlink.io/api/error/tag-not-found"`, "status": "404", "title": `"Tag not found"`,
					"detail": `"Tag with name \"invalid_tag\" could not be found"`}},
			shlinkCase{test: "UpdateTagTest::errorIsThrownWhenTryingToRenameTagToAnotherTagName (version " + v + ")", method: "PUT",
				path: "/rest/v" + v + "/tags", body: `{"oldName":"foo","newName":"bar"}`, status: 409, want: map[string]string{
					"type": `"https://shlink.io/api/error/tag-conflict"`, "status": "409", "title": `"Tag conflict"`,
					"detail": `"You cannot rename tag foo to bar, because it already exists"`}})
	}
	forbidden := func(test, key, method, path, body, detail string) shlinkCase {
		return shlinkCase{test: test, key: key, method: method, path: path, body: body, status: 403, want: map[string]string{
			"type": `"https://shlink.io/api/error/forbidden-tag-operation"`, "title": `"Forbidden tag operation"`,
			"detail": `"` + detail + `"`, "status": "403"}}
	}
	renames = append(renames,
		shlinkCase{test: "UpdateTagTest::tagIsProperlyRenamedWhenRenamingToItself", method: "PUT", path: "/rest/v3/tags",
			body: `{"oldName":"foo","newName":"foo"}`, status: 204},
		forbidden("RenameTagTest::anErrorIsReturnedWithNonAdminApiKeys (author)", "author_api_key", "PUT", "/rest/v3/tags",
			`{"oldName":"foo","newName":"foo_renamed"}`, "You are not allowed to rename tags"),
		forbidden("RenameTagTest::anErrorIsReturnedWithNonAdminApiKeys (domain)", "domain_api_key", "PUT", "/rest/v3/tags",
			`{"oldName":"foo","newName":"foo_renamed"}`, "You are not allowed to rename tags"),
		forbidden("DeleteTagsTest::anErrorIsReturnedWithNonAdminApiKeys (author)", "author_api_key", "DELETE", "/rest/v2/tags?tags%5B0%5D=foo",
			"", "You are not allowed to delete tags"),
		forbidden("DeleteTagsTest::anErrorIsReturnedWithNonAdminApiKeys (domain)", "domain_api_key", "DELETE", "/rest/v2/tags?tags%5B0%5D=foo",
			"", "You are not allowed to delete tags"),
		forbidden("DeleteTagsTest::anErrorIsReturnedWithNonAdminApiKeys (version 3)", "domain_api_key", "DELETE", "/rest/v3/tags?tags%5B0%5D=foo",
			"", "You are not allowed to delete tags"),
		shlinkCase{test: "DeleteTagsTest::anErrorIsReturnedWithNonAdminApiKeys (a key of neither role may)", key: "no_orphans_api_key",
			method: "DELETE", path: "/rest/v3/tags?tags%5B0%5D=bar", status: 204},
		tags("after bar was deleted", "", "", `["foo"]`, pagination(1, 1, 1, 1, 1)),
	)
	s.run(renames)

	// A tag in another script (CreateShortUrlTest::createsNewShortUrlWithTags,
	// "Aäa") is found by every route that names a tag in its path, where it
	// comes percent-encoded: its visits, and linkraft's own rename and delete.
	tagged := func(test, tags string) shlinkCase {
		return shlinkCase{test: test + " (read back)", method: "GET", path: "/rest/v3/short-urls/tagged-1", status: 200,
			want: map[string]string{"tags": tags}}
	}
	s.run([]shlinkCase{
		{test: "CreateShortUrlTest::createsNewShortUrlWithTags (tags with special chars)", method: "POST", path: "/rest/v3/short-urls",
			body: `{"longUrl":"https://example.com/t","customSlug":"tagged-1","tags":["Aäa","keep"]}`, status: 200,
			want: map[string]string{"tags": `["aäa","keep"]`}},
		{test: "TagVisitsTest::expectedVisitsAreReturned (a tag in another script)", method: "GET", path: "/rest/v3/tags/a%C3%A4a/visits",
			status: 200, want: map[string]string{"visits.data": "[]"}},
		{test: "a tag in another script renamed through linkraft's API", key: "operator", method: "PUT", path: "/api/v1/tags/a%C3%A4a",
			body: `{"name":"bäb"}`, status: 200},
		tagged("a tag in another script renamed through linkraft's API", `["bäb","keep"]`),
		{test: "UpdateTagTest (a tag in another script renamed)", method: "PUT", path: "/rest/v3/tags",
			body: `{"oldName":"bäb","newName":"cäc"}`, status: 204},
		tagged("UpdateTagTest (a tag in another script renamed)", `["cäc","keep"]`),
		{test: "a tag in another script deleted through linkraft's API", key: "operator", method: "DELETE", path: "/api/v1/tags/c%C3%A4c",
			status: 200},
		tagged("a tag in another script deleted through linkraft's API", `["keep"]`),
	})
}

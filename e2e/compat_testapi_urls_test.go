package e2e

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// The fixture's links as ListShortUrlsTest names them, each code with
// "@domain" when it has one.
const (
	shlinkCustomDomain       = "ghi789@example.com"                 // SHORT_URL_CUSTOM_DOMAIN
	shlinkCustomSlug         = "custom"                             // SHORT_URL_CUSTOM_SLUG
	shlinkMeta               = "def456"                             // SHORT_URL_META
	shlinkCustomSlugAndDomin = "custom-with-domain@some-domain.com" // SHORT_URL_CUSTOM_SLUG_AND_DOMAIN
	shlinkWithTitle          = "abc123"                             // SHORT_URL_SHLINK_WITH_TITLE
	shlinkDocs               = "ghi789"                             // SHORT_URL_DOCS
)

// TestShlinkTestAPIShortURLs: Shlink's list, resolve, edit and delete of
// short URLs (ListShortUrlsTest, ResolveShortUrlTest, EditShortUrlTest,
// DeleteShortUrlTest) on the suite's fixture.
func TestShlinkTestAPIShortURLs(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	s := newShlinkSuite(t, shlinkFixture{boundary: true})
	codes := func(c ...string) string { return strings.Join(c, ",") }
	list := func(data, query, want string, key ...string) shlinkCase {
		c := shlinkCase{test: "ListShortUrlsTest::shortUrlsAreProperlyListed (" + data + ")", method: "GET",
			path: "/rest/v3/short-urls?" + query, status: 200, want: map[string]string{"codes": want}}
		if len(key) > 0 {
			c.key = key[0]
		}
		return c
	}
	all := list("[]", "", codes(shlinkCustomDomain, shlinkCustomSlug, shlinkMeta, shlinkCustomSlugAndDomin, shlinkWithTitle, shlinkDocs))
	all.want["shortUrls.pagination"] = `{"currentPage":1,"pagesCount":1,"itemsPerPage":10,"itemsInCurrentPage":6,"totalItems":6}`
	// SHORT_URL_SHLINK_WITH_TITLE, field by field but for dateCreated (the
	// fixture's is 2018) and maxVisits (see loadFixture).
	for k, v := range map[string]string{"shortUrl": `"http://s.test/abc123"`, "longUrl": `"https://shlink.io"`,
		"visitsSummary": `{"total":0,"nonBots":0,"bots":0}`, "tags": `["foo"]`, "domain": "null", "title": `"My cool title"`,
		"meta": `{"validSince":null,"validUntil":null,"maxVisits":null}`, "crawlable": "true", "forwardQuery": "true",
		"hasRedirectRules": "false", "deviceLongUrls": "-", "visitsCount": "-"} {
		all.want["shortUrls.data.4."+k] = v
	}
	boundary := url.QueryEscape(s.boundary)
	s.run([]shlinkCase{
		all,
		list("shortCode", "orderBy=shortCode", codes(shlinkWithTitle, shlinkCustomSlug, shlinkCustomSlugAndDomin, shlinkMeta, shlinkDocs, shlinkCustomDomain)),
		list("shortCode-DESC", "orderBy=shortCode-DESC", codes(shlinkDocs, shlinkCustomDomain, shlinkMeta, shlinkCustomSlugAndDomin, shlinkCustomSlug, shlinkWithTitle)),
		// Ties in the order the links were made (docs/COMPATIBILITY.md, List),
		// which is not the fixture's order of persisting.
		list("title-DESC", "orderBy=title-DESC", codes(shlinkWithTitle, shlinkDocs, shlinkCustomSlugAndDomin, shlinkMeta, shlinkCustomSlug, shlinkCustomDomain)),
		list("startDate", "startDate="+boundary, codes(shlinkCustomDomain, shlinkCustomSlug, shlinkMeta)),
		list("endDate", "endDate="+boundary, codes(shlinkCustomSlugAndDomin, shlinkWithTitle, shlinkDocs)),
		list("tags foo", "tags%5B0%5D=foo", codes(shlinkCustomDomain, shlinkMeta, shlinkWithTitle)),
		list("tags bar", "tags%5B0%5D=bar", codes(shlinkMeta)),
		list("tags foo, bar", "tags%5B0%5D=foo&tags%5B1%5D=bar", codes(shlinkCustomDomain, shlinkMeta, shlinkWithTitle)),
		list("tags foo, bar, any", "tags%5B0%5D=foo&tags%5B1%5D=bar&tagsMode=any", codes(shlinkCustomDomain, shlinkMeta, shlinkWithTitle)),
		list("tags foo, bar, all", "tags%5B0%5D=foo&tags%5B1%5D=bar&tagsMode=all", codes(shlinkMeta)),
		list("tags foo, bar, baz", "tags%5B0%5D=foo&tags%5B1%5D=bar&tags%5B2%5D=baz", codes(shlinkCustomDomain, shlinkMeta, shlinkWithTitle)),
		list("tags foo, bar, baz, all", "tags%5B0%5D=foo&tags%5B1%5D=bar&tags%5B2%5D=baz&tagsMode=all", ""),
		list("tags foo and endDate", "tags%5B0%5D=foo&endDate="+boundary, codes(shlinkWithTitle)),
		list("searchTerm alejandro", "searchTerm=alejandro", codes(shlinkCustomDomain, shlinkMeta)),
		list("searchTerm cool", "searchTerm=cool", codes(shlinkWithTitle)),
		list("searchTerm example.com", "searchTerm=example.com", codes(shlinkCustomDomain)),
		// A tag's name is searched too, in any case (ShortUrlListRepository).
		list("searchTerm BA, a tag", "searchTerm=BA", codes(shlinkMeta)),
		list("domain example.com", "domain=example.com", codes(shlinkCustomDomain)),
		list("domain DEFAULT", "domain=DEFAULT", codes(shlinkCustomSlug, shlinkMeta, shlinkWithTitle, shlinkDocs)),
		list("excludeTags foo", "excludeTags%5B0%5D=foo", codes(shlinkCustomSlug, shlinkCustomSlugAndDomin, shlinkDocs)),
		list("excludeTags foo, bar", "excludeTags%5B0%5D=foo&excludeTags%5B1%5D=bar", codes(shlinkCustomSlug, shlinkCustomSlugAndDomin, shlinkDocs)),
		list("excludeTags bar, foo, all", "excludeTags%5B0%5D=bar&excludeTags%5B1%5D=foo&excludeTagsMode=all",
			codes(shlinkCustomDomain, shlinkCustomSlug, shlinkCustomSlugAndDomin, shlinkWithTitle, shlinkDocs)),
		list("apiKeyName author_api_key", "apiKeyName=author_api_key", codes(shlinkCustomSlug, shlinkMeta, shlinkWithTitle)),
		list("apiKeyName invalid", "apiKeyName=invalid", ""),
		list("apiKeyName valid_api_key, author_api_key", "apiKeyName=valid_api_key", codes(shlinkCustomSlug, shlinkMeta, shlinkWithTitle), "author_api_key"),
		list("apiKeyName valid_api_key, domain_api_key", "apiKeyName=valid_api_key", codes(shlinkCustomDomain), "domain_api_key"),
		list("apiKeyName valid_api_key: the admin key names itself", "apiKeyName=valid_api_key", codes(shlinkCustomDomain, shlinkCustomSlugAndDomin, shlinkDocs)),
		list("author_api_key", "", codes(shlinkCustomSlug, shlinkMeta, shlinkWithTitle), "author_api_key"),
		list("author_api_key, searched", "searchTerm=shlink.io", codes(shlinkCustomSlug, shlinkWithTitle), "author_api_key"),
		list("domain_api_key", "", codes(shlinkCustomDomain), "domain_api_key"),
		listInvalid("tagsMode=invalid", `["tagsMode"]`),
		listInvalid("orderBy=invalid", `["orderBy"]`),
		listInvalid("orderBy=invalid&tagsMode=invalid", `["orderBy","tagsMode"]`),
	})
	// ListShortUrlsTest's excludeMaxVisitsReached leaves out the link its
	// fixture visited past maxVisits; here custom, visited up to its two.
	maxed := list("excludeMaxVisitsReached", "excludeMaxVisitsReached=true",
		codes(shlinkCustomDomain, shlinkMeta, shlinkCustomSlugAndDomin, shlinkWithTitle, shlinkDocs))
	maxed.eventually = true
	s.run([]shlinkCase{
		{test: "ListShortUrlsTest (a visit of custom)", key: "-", method: "GET", path: "/custom", status: 302},
		{test: "ListShortUrlsTest (a second visit of custom)", key: "-", method: "GET", path: "/custom", status: 302},
		maxed,
	})
	s.run(shlinkNotFound("ResolveShortUrlTest::tryingToResolveInvalidUrlReturnsNotFoundError", "GET", ""))
	s.run(shlinkNotFound("EditShortUrlTest::tryingToEditInvalidUrlReturnsNotFoundError", "PATCH", ""))

	// EditShortUrlTest::metadataCanBeReset, each edit read back on the next
	// node; the data set of a past validUntil is left to
	// httpd's TestShlinkTestAPIPastValidUntil.
	at := func(d time.Duration) string { return time.Now().Add(d).UTC().Format("2006-01-02T15:04:05+00:00") }
	month, year, lastYear := at(30*24*time.Hour), at(365*24*time.Hour), at(-365*24*time.Hour)
	reset := `{"validSince":null,"validUntil":null,"maxVisits":null}`
	for _, meta := range []string{
		`{"validSince":"` + month + `"}`,
		`{"maxVisits":20}`,
		`{"validUntil":"` + year + `","maxVisits":100}`,
		`{"validSince":"` + lastYear + `","validUntil":"` + year + `","maxVisits":100}`,
	} {
		s.run([]shlinkCase{
			{test: "EditShortUrlTest::metadataCanBeReset (" + meta + ")", method: "PATCH", path: "/rest/v3/short-urls/abc123",
				body: meta, status: 200, want: map[string]string{"shortCode": `"abc123"`}},
			{test: "EditShortUrlTest::metadataCanBeReset (read after " + meta + ")", method: "GET", path: "/rest/v3/short-urls/abc123",
				status: 200, want: metaSubset(meta)},
			{test: "EditShortUrlTest::metadataCanBeReset (reset after " + meta + ")", method: "PATCH", path: "/rest/v3/short-urls/abc123",
				body: reset, status: 200},
			{test: "EditShortUrlTest::metadataCanBeReset (read after the reset)", method: "GET", path: "/rest/v3/short-urls/abc123",
				status: 200, want: map[string]string{"meta": reset}},
		})
	}
	blog := `"https://blog.alejandrocelaya.com/2019/04/27/considerations-to-properly-use-open-source-software-projects/"`
	s.run([]shlinkCase{
		{test: "EditShortUrlTest::longUrlCanBeEdited", method: "PATCH", path: "/rest/v3/short-urls/abc123",
			body: `{"longUrl":"https://shlink.io"}`, status: 200, want: map[string]string{"longUrl": `"https://shlink.io"`}},
		{test: "EditShortUrlTest::providingInvalidDataReturnsBadRequest", method: "PATCH", path: "/rest/v3/short-urls/invalid",
			body: `{"maxVisits":"not_a_number"}`, status: 400, want: map[string]string{"type": `"https://shlink.io/api/error/invalid-data"`,
				"title": `"Invalid data"`, "detail": `"Provided data is not valid"`, "status": "400", "invalidElements": `["maxVisits"]`}},
		{test: "EditShortUrlTest::metadataIsEditedOnProperShortUrlBasedOnDomain (domain)", method: "PATCH",
			path: "/rest/v3/short-urls/ghi789?domain=example.com", body: `{"maxVisits":100}`, status: 200,
			want: map[string]string{"domain": `"example.com"`, "longUrl": blog, "meta.maxVisits": "100"}},
		{test: "EditShortUrlTest::metadataIsEditedOnProperShortUrlBasedOnDomain (no domain)", method: "PATCH",
			path: "/rest/v3/short-urls/ghi789", body: `{"maxVisits":100}`, status: 200,
			want: map[string]string{"domain": "null", "longUrl": `"https://shlink.io/documentation/"`, "meta.maxVisits": "100"}},
		// Tags and titles are normalised as on create (CreateShortUrlTest::createsNewShortUrlWithTags,
		// ::titleIsCroppedIfTooLong), and an edit of nothing answers the link
		// (docs/COMPATIBILITY.md, Edit).
		{test: "EditShortUrlTest (tags as on create)", method: "PATCH", path: "/rest/v3/short-urls/abc123",
			body: `{"tags":["fo o","  Bar"]}`, status: 200, want: map[string]string{"tags": `["fo-o","bar"]`}},
		{test: "EditShortUrlTest (a title as on create)", method: "PATCH", path: "/rest/v3/short-urls/abc123",
			body: `{"title":"  T  "}`, status: 200, want: map[string]string{"title": `"T"`}},
		{test: "EditShortUrlTest (an edit of nothing)", method: "PATCH", path: "/rest/v3/short-urls/abc123",
			body: `{}`, status: 200, want: map[string]string{"shortCode": `"abc123"`, "title": `"T"`, "tags": `["fo-o","bar"]`}},
	})

	s.run(shlinkNotFound("DeleteShortUrlTest::notFoundErrorIsReturnWhenDeletingInvalidUrl", "DELETE", ""))
	var byVersion []shlinkCase
	for _, v := range []string{"1", "2", "3"} {
		byVersion = append(byVersion, shlinkCase{test: "DeleteShortUrlTest::expectedTypeIsReturnedBasedOnApiVersion (" + v + ")",
			method: "DELETE", path: "/rest/v" + v + "/short-urls/invalid-short-code", status: 404,
			want: map[string]string{"type": `"https://shlink.io/api/error/short-url-not-found"`}})
	}
	s.run(byVersion)
	deleted := "DeleteShortUrlTest::properShortUrlIsDeletedWhenDomainIsProvided"
	s.run([]shlinkCase{
		{test: deleted + " (with domain, before)", method: "GET", path: "/rest/v3/short-urls/ghi789?domain=example.com", status: 200},
		{test: deleted + " (without domain, before)", method: "GET", path: "/rest/v3/short-urls/ghi789", status: 200},
		{test: deleted + " (delete)", method: "DELETE", path: "/rest/v3/short-urls/ghi789?domain=example.com", status: 204, want: map[string]string{"body": ""}},
		{test: deleted + " (with domain, after)", method: "GET", path: "/rest/v3/short-urls/ghi789?domain=example.com", status: 404},
		{test: deleted + " (with domain, after, on the next node)", method: "GET", path: "/rest/v3/short-urls/ghi789?domain=example.com", status: 404},
		{test: deleted + " (without domain, after)", method: "GET", path: "/rest/v3/short-urls/ghi789", status: 200},
	})
}

// listInvalid is ListShortUrlsTest::errorIsReturnedWhenProvidingInvalidValues
// for one query.
func listInvalid(query, fields string) shlinkCase {
	return shlinkCase{test: "ListShortUrlsTest::errorIsReturnedWhenProvidingInvalidValues (" + query + ")", method: "GET",
		path: "/rest/v3/short-urls?" + query, status: 400, want: map[string]string{"invalidElements": fields, "title": `"Invalid data"`,
			"type": `"https://shlink.io/api/error/invalid-data"`, "status": "400", "detail": `"Provided data is not valid"`}}
}

// metaSubset is what a read must show of the meta an edit set: the
// answer's meta.<field> for each.
func metaSubset(meta string) map[string]string {
	want := map[string]string{}
	for _, kv := range strings.Split(strings.Trim(meta, "{}"), ",") {
		k, v, _ := strings.Cut(kv, ":")
		want["meta."+strings.Trim(k, `"`)] = v
	}
	return want
}

// shlinkNotFound is a test's cases of ApiTestDataProviders::invalidUrlsProvider:
// a code no link has, or has on another domain or for another key, at the
// path of the short URL plus suffix.
func shlinkNotFound(test, method, suffix string) []shlinkCase {
	var cases []shlinkCase
	for _, c := range []struct{ name, code, domain, detail, key string }{
		{"invalid shortcode", "invalid", "", `No URL found with short code \"invalid\"`, ""},
		{"invalid shortcode without domain", "abc123", "example.com", `No URL found with short code \"abc123\" for domain \"example.com\"`, ""},
		{"invalid shortcode and custom domain", "custom-with-domain", "example.com",
			`No URL found with short code \"custom-with-domain\" for domain \"example.com\"`, ""},
		{"valid shortcode with invalid API key", "ghi789", "", `No URL found with short code \"ghi789\"`, "author_api_key"},
		{"valid shortcode and custom domain with invalid API key", "custom-with-domain", "some-domain.com",
			`No URL found with short code \"custom-with-domain\" for domain \"some-domain.com\"`, "domain_api_key"},
	} {
		path := "/rest/v3/short-urls/" + c.code + suffix
		domain := "-"
		if c.domain != "" {
			path += "?domain=" + c.domain
			domain = `"` + c.domain + `"`
		}
		body := ""
		if method == "PATCH" {
			body = "{}"
		}
		cases = append(cases, shlinkCase{test: test + " (" + c.name + ")", key: c.key, method: method, path: path, body: body,
			status: 404, want: map[string]string{"status": "404", "type": `"https://shlink.io/api/error/short-url-not-found"`,
				"detail": `"` + c.detail + `"`, "title": `"Short URL not found"`, "shortCode": `"` + c.code + `"`, "domain": domain}})
	}
	return cases
}

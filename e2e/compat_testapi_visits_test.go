package e2e

import (
	"net/url"
	"strconv"
	"testing"
	"time"
)

// TestShlinkTestAPIVisits: Shlink's visits of a short URL, a tag, a
// domain, orphan and non-orphan visits, their stats and their deletes
// (ShortUrlVisitsTest, TagVisitsTest, DomainVisitsTest, OrphanVisitsTest,
// NonOrphanVisitsTest, GlobalVisitsTest, VisitStatsTest,
// DeleteShortUrlVisitsTest, DeleteOrphanVisitsTest) on the suite's
// fixture and VisitsFixture's visits: seven of links (one by a bot) and
// three orphan ones (one by a bot).
func TestShlinkTestAPIVisits(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	s := newShlinkSuite(t, shlinkFixture{visits: true})
	count := func(test, key, path string, total, inPage int) shlinkCase {
		want := map[string]string{"visits.data": "len:" + strconv.Itoa(inPage)}
		if total >= 0 {
			want["visits.pagination.totalItems"] = strconv.Itoa(total)
		}
		return shlinkCase{test: test, key: key, method: "GET", path: path, status: 200, want: want}
	}
	rows := func(test, key, path string, n int) shlinkCase { return count(test, key, path, -1, n) }
	tagNotFound := func(data, key, tag string) shlinkCase {
		return shlinkCase{test: "TagVisitsTest::notFoundErrorIsReturnedForInvalidTags (" + data + ")", key: key, method: "GET",
			path: "/rest/v3/tags/" + tag + "/visits", status: 404, want: map[string]string{"status": "404",
				"type": `"https://shlink.io/api/error/tag-not-found"`, "title": `"Tag not found"`,
				"detail": `"Tag with name \"` + tag + `\" could not be found"`}}
	}
	domainNotFound := func(data, key, domain string) shlinkCase {
		return shlinkCase{test: "DomainVisitsTest::notFoundErrorIsReturnedForInvalidTags (" + data + ")", key: key, method: "GET",
			path: "/rest/v3/domains/" + domain + "/visits", status: 404, want: map[string]string{"status": "404",
				"type": `"https://shlink.io/api/error/domain-not-found"`, "title": `"Domain not found"`,
				"detail": `"Domain with authority \"` + domain + `\" could not be found"`, "authority": `"` + domain + `"`}}
	}
	s.run(shlinkNotFound("ShortUrlVisitsTest::tryingToGetVisitsForInvalidUrlReturnsNotFoundError", "GET", "/visits"))
	tv, dv := "TagVisitsTest::expectedVisitsAreReturned", "DomainVisitsTest::expectedVisitsAreReturned"
	s.run([]shlinkCase{
		count("ShortUrlVisitsTest::properVisitsAreReturnedWhenDomainIsProvided (domain)", "", "/rest/v3/short-urls/ghi789/visits?domain=example.com", 0, 0),
		count("ShortUrlVisitsTest::properVisitsAreReturnedWhenDomainIsProvided (no domain)", "", "/rest/v3/short-urls/ghi789/visits", 2, 2),
		count("ShortUrlVisitsTest::properVisitsAreReturnedWhenExcludingBots (bots excluded)", "", "/rest/v3/short-urls/def456/visits?excludeBots=true", 1, 1),
		count("ShortUrlVisitsTest::properVisitsAreReturnedWhenExcludingBots (bots not excluded)", "", "/rest/v3/short-urls/def456/visits", 2, 2),
		rows(tv+" (foo with admin API key)", "", "/rest/v3/tags/foo/visits", 5),
		rows(tv+" (foo with admin API key and no bots)", "", "/rest/v3/tags/foo/visits?excludeBots=true", 4),
		rows(tv+" (bar with admin API key)", "", "/rest/v3/tags/bar/visits", 2),
		rows(tv+" (bar with admin API key and no bots)", "", "/rest/v3/tags/bar/visits?excludeBots=true", 1),
		rows(tv+" (foo with author API key)", "author_api_key", "/rest/v3/tags/foo/visits", 5),
		rows(tv+" (foo with author API key and no bots)", "author_api_key", "/rest/v3/tags/foo/visits?excludeBots=true", 4),
		rows(tv+" (bar with author API key)", "author_api_key", "/rest/v3/tags/bar/visits", 2),
		rows(tv+" (bar with author API key and no bots)", "author_api_key", "/rest/v3/tags/bar/visits?excludeBots=true", 1),
		rows(tv+" (foo with domain API key)", "domain_api_key", "/rest/v3/tags/foo/visits", 0),
		rows(tv+" (foo with specific domain)", "", "/rest/v3/tags/foo/visits?domain=example.com", 0),
		rows(tv+" (foo with default domain)", "", "/rest/v3/tags/foo/visits?domain=DEFAULT", 5),
		// Shlink answers baz, a tag without links, with no rows; linkraft has no
		// such tag (docs/COMPATIBILITY.md, the visits of a tag).
		tagNotFound("baz with admin API key: a tag no link carries", "", "baz"),
		tagNotFound("admin API key with invalid tag", "", "invalid_tag"),
		tagNotFound("domain API key with valid tag not used", "domain_api_key", "bar"),
		tagNotFound("author API key with valid tag not used", "author_api_key", "baz"),
		rows(dv+" (example.com with admin API key)", "", "/rest/v3/domains/example.com/visits", 0),
		rows(dv+" (DEFAULT with admin API key)", "", "/rest/v3/domains/DEFAULT/visits", 7),
		rows(dv+" (DEFAULT with admin API key and no bots)", "", "/rest/v3/domains/DEFAULT/visits?excludeBots=true", 6),
		rows(dv+" (DEFAULT with domain API key)", "domain_api_key", "/rest/v3/domains/DEFAULT/visits", 0),
		rows(dv+" (DEFAULT with author API key)", "author_api_key", "/rest/v3/domains/DEFAULT/visits", 5),
		rows(dv+" (DEFAULT with author API key and no bots)", "author_api_key", "/rest/v3/domains/DEFAULT/visits?excludeBots=true", 4),
		rows(dv+" (the default domain by name)", "", "/rest/v3/domains/s.test/visits", 7),
		domainNotFound("admin API key with invalid domain", "", "invalid_domain.com"),
		domainNotFound("domain API key with not-owned valid domain", "domain_api_key", "this-domain-is-detached.com"),
		domainNotFound("author API key with valid domain not used in URLs", "author_api_key", "this-domain-is-detached.com"),
	})
	var versions []shlinkCase
	for _, v := range []string{"1", "2", "3"} {
		versions = append(versions, shlinkCase{test: "DomainVisitsTest::expectedNotFoundTypeIsReturnedForApiVersion (" + v + ")",
			method: "GET", path: "/rest/v" + v + "/domains/invalid.com/visits", status: 404,
			want: map[string]string{"type": `"https://shlink.io/api/error/domain-not-found"`}})
	}
	s.run(versions)

	// OrphanVisitsTest compares whole rows; linkraft's rows keep no path,
	// user agent or full referrer (docs/COMPATIBILITY.md, orphan visits), so
	// the rows' type, bot flag and the fields both have are compared.
	ov, nv := "OrphanVisitsTest::properVisitsAreReturnedBasedInQuery", "NonOrphanVisitsTest::properVisitsAreReturnedBasedInQuery"
	orphan := func(data, query string, total, inPage int, types ...string) shlinkCase {
		c := count(ov+" ("+data+")", "", "/rest/v3/visits/orphan"+query, total, inPage)
		for i, typ := range types {
			c.want["visits.data."+strconv.Itoa(i)+".type"] = `"` + typ + `"`
			c.want["visits.data."+strconv.Itoa(i)+".redirectUrl"] = "null"
			c.want["visits.data."+strconv.Itoa(i)+".visitLocation"] = "null"
		}
		return c
	}
	base := orphan("base_url only", "?type=base_url", 1, 1, "base_url")
	base.want["visits.data.0.potentialBot"] = "false"
	base.want["visits.data.0.referer"] = `"https://s.test/"`
	invalidShortURL := orphan("invalid_short_url only", "?type=invalid_short_url", 1, 1, "invalid_short_url")
	invalidShortURL.want["visits.data.0.potentialBot"] = "true"
	tomorrow := url.QueryEscape(time.Now().Add(24 * time.Hour).UTC().Format("2006-01-02T15:04:05+00:00"))
	s.run([]shlinkCase{
		orphan("all data", "", 3, 3),
		orphan("limit items", "?itemsPerPage=2", 3, 2),
		orphan("limit items and page", "?itemsPerPage=2&page=2", 3, 1),
		orphan("exclude bots", "?excludeBots=true", 2, 2),
		orphan("exclude bots and limit items", "?excludeBots=true&itemsPerPage=1", 2, 1),
		base,
		orphan("regular_404 only", "?type=regular_404", 1, 1, "regular_404"),
		invalidShortURL,
		orphan("example domain only", "?domain=example.com", 1, 1, "invalid_short_url"),
		orphan("default domain only", "?domain=s.test", 2, 2),
		orphan("default domain only with DEFAULT keyword", "?domain=DEFAULT", 2, 2),
		{test: "OrphanVisitsTest::errorIsReturnedForInvalidType", method: "GET", path: "/rest/v3/visits/orphan?type=invalid", status: 400},
		count("OrphanVisitsTest::noVisitsAreReturnedForRestrictedApiKey", "no_orphans_api_key", "/rest/v3/visits/orphan", 0, 0),
		count(nv+" (all data)", "", "/rest/v3/visits/non-orphan", 7, 7),
		count(nv+" (middle page)", "", "/rest/v3/visits/non-orphan?page=2&itemsPerPage=3", 7, 3),
		count(nv+" (last page)", "", "/rest/v3/visits/non-orphan?page=3&itemsPerPage=3", 7, 1),
		count(nv+" (bots excluded)", "", "/rest/v3/visits/non-orphan?excludeBots=true", 6, 6),
		count(nv+" (bots excluded and pagination)", "", "/rest/v3/visits/non-orphan?excludeBots=true&page=1&itemsPerPage=4", 6, 4),
		count(nv+" (date filter)", "", "/rest/v3/visits/non-orphan?startDate="+tomorrow, 0, 0),
		count(nv+" (domain filter)", "", "/rest/v3/visits/non-orphan?domain=example.com", 0, 0),
		count(nv+" (default domain filter)", "", "/rest/v3/visits/non-orphan?domain=DEFAULT", 7, 7),
	})

	// GlobalVisitsTest and VisitStatsTest: orphan visits are counted for an
	// admin key alone; Shlink also counts them for its author and domain
	// roles (docs/COMPATIBILITY.md, GET /rest/v3/visits).
	none := `{"total":0,"nonBots":0,"bots":0}`
	s.run([]shlinkCase{
		{test: "VisitStatsTest::expectedStatsAreReturned (valid API key)", method: "GET", path: "/rest/v3/visits", status: 200,
			want: map[string]string{"visits": `{"nonOrphanVisits":{"total":7,"nonBots":6,"bots":1},"orphanVisits":{"total":3,"nonBots":2,"bots":1}}`}},
		{test: "VisitStatsTest::expectedStatsAreReturned (domain-only API key)", key: "domain_api_key", method: "GET", path: "/rest/v3/visits",
			status: 200, want: map[string]string{"visits": `{"nonOrphanVisits":` + none + `,"orphanVisits":` + none + `}`}},
		{test: "VisitStatsTest::expectedStatsAreReturned (author API key)", key: "author_api_key", method: "GET", path: "/rest/v3/visits",
			status: 200, want: map[string]string{"visits": `{"nonOrphanVisits":{"total":5,"nonBots":4,"bots":1},"orphanVisits":` + none + `}`}},
		{test: "GlobalVisitsTest::returnsExpectedVisitsStats (no orphans API key)", key: "no_orphans_api_key", method: "GET", path: "/rest/v3/visits",
			status: 200, want: map[string]string{"visits.nonOrphanVisits.total": "7", "visits.orphanVisits.total": "0"}},
	})

	dv2 := "DeleteShortUrlVisitsTest::returnsErrorForInvalidShortUrls"
	notFound := func(test, path, detail string) shlinkCase {
		return shlinkCase{test: test, method: "DELETE", path: path, status: 404, want: map[string]string{
			"type": `"https://shlink.io/api/error/short-url-not-found"`, "detail": `"` + detail + `"`}}
	}
	totals := func(test string, nonOrphan, orphan int) []shlinkCase {
		return []shlinkCase{
			count(test+" (visits of links)", "", "/rest/v3/visits/non-orphan", nonOrphan, nonOrphan),
			count(test+" (orphan visits)", "", "/rest/v3/visits/orphan", orphan, orphan),
		}
	}
	cases := []shlinkCase{
		notFound(dv2+" (not exists)", "/rest/v3/short-urls/does-not-exist/visits", `No URL found with short code \"does-not-exist\"`),
		notFound(dv2+" (needs domain)", "/rest/v3/short-urls/custom-with-domain/visits", `No URL found with short code \"custom-with-domain\"`),
		notFound(dv2+" (invalid domain)", "/rest/v3/short-urls/abc123/visits?domain=ff.test", `No URL found with short code \"abc123\" for domain \"ff.test\"`),
		notFound(dv2+" (wrong domain)", "/rest/v3/short-urls/custom-with-domain/visits?domain=ff.test",
			`No URL found with short code \"custom-with-domain\" for domain \"ff.test\"`),
		{test: "DeleteShortUrlVisitsTest::cannotDeleteVisitsForShortUrlWithWrongApiKeyPermissions", key: "domain_api_key", method: "DELETE",
			path: "/rest/v3/short-urls/abc123/visits", status: 404},
	}
	cases = append(cases, totals("DeleteShortUrlVisitsTest::deletesVisitsForShortUrlWithoutAffectingTheRest (before)", 7, 3)...)
	cases = append(cases, shlinkCase{test: "DeleteShortUrlVisitsTest::deletesVisitsForShortUrlWithoutAffectingTheRest", method: "DELETE",
		path: "/rest/v3/short-urls/abc123/visits", status: 200, want: map[string]string{"deletedVisits": "3"}})
	cases = append(cases, totals("DeleteShortUrlVisitsTest::deletesVisitsForShortUrlWithoutAffectingTheRest (after)", 4, 3)...)
	cases = append(cases, shlinkCase{test: "DeleteOrphanVisitsTest::doesNotDeleteOrphanVisitsForRestrictedApiKey", key: "no_orphans_api_key",
		method: "DELETE", path: "/rest/v3/visits/orphan", status: 200, want: map[string]string{"deletedVisits": "0"}})
	cases = append(cases, totals("DeleteOrphanVisitsTest::doesNotDeleteOrphanVisitsForRestrictedApiKey (after)", 4, 3)...)
	cases = append(cases, shlinkCase{test: "DeleteOrphanVisitsTest::deletesOrphanVisitsWithoutAffectingTheRest", method: "DELETE",
		path: "/rest/v3/visits/orphan", status: 200, want: map[string]string{"deletedVisits": "3"}})
	cases = append(cases, totals("DeleteOrphanVisitsTest::deletesOrphanVisitsWithoutAffectingTheRest (after)", 4, 0)...)
	s.run(cases)
}

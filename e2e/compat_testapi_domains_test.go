package e2e

import (
	"strings"
	"testing"
)

// TestShlinkTestAPIDomainsAndRules: Shlink's domains, their redirects and
// a short URL's redirect rules (ListDomainsTest, DomainRedirectsTest,
// ListRedirectRulesTest, SetRedirectRulesTest) on the suite's fixture.
func TestShlinkTestAPIDomainsAndRules(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	s := newShlinkSuite(t, shlinkFixture{})
	none := `{"baseUrlRedirect":null,"regular404Redirect":null,"invalidShortUrlRedirect":null}`
	domain := func(name string, isDefault bool, redirects string) string {
		d := `{"domain":"` + name + `","isDefault":false,"redirects":` + redirects + `}`
		if isDefault {
			d = `{"domain":"` + name + `","isDefault":true,"redirects":` + redirects + `}`
		}
		return d
	}
	list := func(data, key, domains string) shlinkCase {
		return shlinkCase{test: "ListDomainsTest::domainsAreProperlyListed (" + data + ")", key: key, method: "GET", path: "/rest/v3/domains",
			status: 200, want: map[string]string{"domains.data": domains, "domains.defaultRedirects": none}}
	}
	// linkraft lists every registered domain: the fixture's
	// this_domain_is_detached.com (here with dashes, a host name), which
	// Shlink leaves out as it has no links and no redirects, too.
	s.run([]shlinkCase{
		list("admin API key", "", "["+domain("s.test", true, none)+","+
			domain("detached-with-redirects.com", false, `{"baseUrlRedirect":"https://foo.com","regular404Redirect":"https://bar.com","invalidShortUrlRedirect":null}`)+","+
			domain("example.com", false, none)+","+domain("some-domain.com", false, none)+","+domain("this-domain-is-detached.com", false, none)+"]"),
		list("author API key", "author_api_key", "["+domain("s.test", true, none)+"]"),
		list("domain API key", "domain_api_key", "["+domain("example.com", false, none)+"]"),
	})

	var redirects []shlinkCase
	for _, c := range []struct{ name, body string }{
		{"no domain", `{}`}, {"empty domain", `{"domain":""}`}, {"null domain", `{"domain":null}`},
		{"invalid domain", `{"domain":"not a domain"}`}, {"invalid IP", `{"domain":"540.38.386.0"}`},
		{"invalid port", `{"domain":"example.com:888888"}`},
	} {
		redirects = append(redirects, shlinkCase{test: "DomainRedirectsTest::anErrorIsReturnedWhenTryingToEditAnInvalidDomain (" + c.name + ")",
			method: "PATCH", path: "/rest/v3/domains/redirects", body: c.body, status: 400, want: map[string]string{
				"type": `"https://shlink.io/api/error/invalid-data"`, "detail": `"Provided data is not valid"`, "title": `"Invalid data"`,
				"status": "400", "invalidElements": `["domain"]`}})
	}
	edit := func(name, body, want string) shlinkCase {
		return shlinkCase{test: "DomainRedirectsTest::allowsToEditDomainRedirects (" + name + ")", method: "PATCH",
			path: "/rest/v3/domains/redirects", body: body, status: 200, want: map[string]string{"json": want}}
	}
	// The redirects name their scheme: linkraft takes no redirect without
	// one (docs/COMPATIBILITY.md, "A longUrl, a redirect rule's target and a
	// domain redirect"), where the suite sends foo.com.
	redirects = append(redirects,
		edit("new domain", `{"domain":"my-new-domain.com","regular404Redirect":"https://foo.com"}`,
			`{"baseUrlRedirect":null,"regular404Redirect":"https://foo.com","invalidShortUrlRedirect":null}`),
		edit("default domain", `{"domain":"s.test","regular404Redirect":"https://foo-for-default.com"}`,
			`{"baseUrlRedirect":null,"regular404Redirect":"https://foo-for-default.com","invalidShortUrlRedirect":null}`),
		edit("existing domain with redirects", `{"domain":"detached-with-redirects.com","baseUrlRedirect":null,"invalidShortUrlRedirect":"https://foo.com"}`,
			`{"baseUrlRedirect":null,"regular404Redirect":"https://bar.com","invalidShortUrlRedirect":"https://foo.com"}`),
		edit("existing domain with no redirects", `{"domain":"example.com","baseUrlRedirect":null,"invalidShortUrlRedirect":"https://foo.com"}`,
			`{"baseUrlRedirect":null,"regular404Redirect":null,"invalidShortUrlRedirect":"https://foo.com"}`),
		shlinkCase{test: "DomainRedirectsTest::allowsToEditDomainRedirects (a redirect without a scheme)", method: "PATCH",
			path: "/rest/v3/domains/redirects", body: `{"domain":"example.com","regular404Redirect":"foo.com"}`, status: 400,
			want: map[string]string{"type": `"https://shlink.io/api/error/invalid-data"`, "invalidElements": `["regular404Redirect"]`}},
		list("after the edits, on the next node", "domain_api_key", "["+domain("example.com", false, none)+"]"),
	)
	s.run(redirects)

	notFound := map[string]string{"status": "404", "shortCode": `"invalid"`, "detail": `"No URL found with short code \"invalid\""`,
		"title": `"Short URL not found"`, "type": `"https://shlink.io/api/error/short-url-not-found"`}
	rules := func(r string) string { return `{"redirectRules":[` + r + `]}` }
	invalid := func(name, body string) shlinkCase {
		return shlinkCase{test: "SetRedirectRulesTest::errorIsReturnedWhenInvalidDataIsProvided (" + name + ")", method: "POST",
			path: "/rest/v3/short-urls/abc123/redirect-rules", body: body, status: 400, want: map[string]string{"status": "400",
				"detail": `"Provided data is not valid"`, "title": `"Invalid data"`, "type": `"https://shlink.io/api/error/invalid-data"`}}
	}
	set := func(name, code, list, want string) shlinkCase {
		return shlinkCase{test: "SetRedirectRulesTest::setsListOfRulesForShortUrl (" + name + ")", method: "POST",
			path: "/rest/v3/short-urls/" + code + "/redirect-rules", body: rules(list), status: 200,
			want: map[string]string{"redirectRules": "[" + want + "]"}}
	}
	rule := func(long string, priority string, conditions ...string) string {
		return `{"longUrl":"` + long + `","priority":` + priority + `,"conditions":[` + strings.Join(conditions, ",") + `]}`
	}
	cond := func(typ, key, value string) string {
		k, v := "null", "null"
		if key != "" {
			k = `"` + key + `"`
		}
		if value != "" {
			v = `"` + value + `"`
		}
		return `{"type":"` + typ + `","matchKey":` + k + `,"matchValue":` + v + `}`
	}
	en := cond("language", "", "en")
	s.run([]shlinkCase{
		{test: "ListRedirectRulesTest::errorIsReturnedWhenInvalidUrlIsFetched", method: "GET", path: "/rest/v3/short-urls/invalid/redirect-rules",
			status: 404, want: notFound},
		{test: "ListRedirectRulesTest::returnsListOfRulesForShortUrl (abc123)", method: "GET", path: "/rest/v3/short-urls/abc123/redirect-rules",
			status: 200, want: map[string]string{"redirectRules": "[]", "defaultLongUrl": `"https://shlink.io"`}},
		{test: "SetRedirectRulesTest::errorIsReturnedWhenInvalidUrlIsProvided", method: "POST", path: "/rest/v3/short-urls/invalid/redirect-rules",
			status: 404, want: notFound},
		invalid("invalid data", `{"redirectRules":["foo"]}`),
		invalid("invalid long URL", rules(`{"longUrl":"invalid"}`)),
		invalid("non-array conditions", rules(`{"longUrl":"https://example.com","conditions":"foo"}`)),
		invalid("invalid condition type", rules(`{"longUrl":"https://example.com","conditions":[`+cond("invalid", "", "foo")+`]}`)),
		invalid("invalid device type", rules(`{"longUrl":"https://example.com","conditions":[`+cond("device", "", "invalid-device")+`]}`)),
		invalid("invalid IP address", rules(`{"longUrl":"https://example.com","conditions":[`+cond("ip-address", "", "not an IP address")+`]}`)),
		invalid("invalid country code", rules(`{"longUrl":"https://example.com","conditions":[`+cond("geolocation-country-code", "", "not a country code")+`]}`)),
		set("def456, none", "def456", "", ""),
		// any-value-query-param is refused, never dropped, and two query-param
		// conditions come back ordered by key (docs/COMPATIBILITY.md, Redirect
		// rules and what linkraft lacks).
		{test: "SetRedirectRulesTest::setsListOfRulesForShortUrl (abc123: any-value-query-param)", method: "POST",
			path:   "/rest/v3/short-urls/abc123/redirect-rules",
			body:   rules(rule("https://example.com/english-and-foo-query", "1", en, cond("any-value-query-param", "foo", ""))),
			status: 400, want: map[string]string{"type": `"https://shlink.io/api/error/invalid-data"`}},
		set("abc123: two query params", "abc123",
			rule("https://example.com/multiple-query-params", "1", cond("query-param", "hello", "world"), cond("query-param", "foo", "bar")),
			rule("https://example.com/multiple-query-params", "1", cond("query-param", "foo", "bar"), cond("query-param", "hello", "world"))),
		set("static IP", "abc123", rule("https://example.com", "1", cond("ip-address", "", "1.2.3.4")),
			rule("https://example.com", "1", cond("ip-address", "", "1.2.3.4"))),
		set("CIDR block", "abc123", rule("https://example.com", "1", cond("ip-address", "", "1.2.3.0/24")),
			rule("https://example.com", "1", cond("ip-address", "", "1.2.3.0/24"))),
		set("IP wildcard pattern", "abc123", rule("https://example.com", "1", cond("ip-address", "", "1.2.3.*")),
			rule("https://example.com", "1", cond("ip-address", "", "1.2.3.*"))),
		set("in-between IP wildcard pattern", "abc123", rule("https://example.com", "1", cond("ip-address", "", "1.2.*.4")),
			rule("https://example.com", "1", cond("ip-address", "", "1.2.*.4"))),
		set("country code", "abc123", rule("https://example.com", "1", cond("geolocation-country-code", "", "US")),
			rule("https://example.com", "1", cond("geolocation-country-code", "", "US"))),
		// ListRedirectRulesTest's def456, less the rules linkraft cannot hold
		// (any-value-query-param, the linux device), set then read back on
		// the next node.
		set("def456, as ListRedirectRulesTest's fixture", "def456",
			rule("https://example.com/only-english", "1", en)+","+rule("android://foo/bar", "2", cond("device", "", "android"))+","+
				rule("fb://profile/33138223345", "3", cond("device", "", "ios"))+","+
				rule("https://example.com/static-ip-address", "4", cond("ip-address", "", "1.2.3.4")),
			rule("https://example.com/only-english", "1", en)+","+rule("android://foo/bar", "2", cond("device", "", "android"))+","+
				rule("fb://profile/33138223345", "3", cond("device", "", "ios"))+","+
				rule("https://example.com/static-ip-address", "4", cond("ip-address", "", "1.2.3.4"))),
		{test: "ListRedirectRulesTest::returnsListOfRulesForShortUrl (def456)", method: "GET", path: "/rest/v3/short-urls/def456/redirect-rules",
			status: 200, want: map[string]string{"redirectRules": "len:4", "redirectRules.1.longUrl": `"android://foo/bar"`,
				"redirectRules.3.conditions": "[" + cond("ip-address", "", "1.2.3.4") + "]"}},
	})
}

// TestShlinkRobots: Shlink's RobotsTest (module/Core/test-api) on the
// suite's fixture, whose abc123 and custom are crawlable: every node
// allows them and disallows the rest. Shlink names no order (its query
// has none); linkraft lists the codes sorted (docs/API.md, robots.txt).
func TestShlinkRobots(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	s := newShlinkSuite(t, shlinkFixture{})
	const want = "# For more information about the robots.txt standard, see:\n# https://www.robotstxt.org/orig.html\n\n" +
		"User-agent: *\nAllow: /abc123\nAllow: /custom\nDisallow: /\n"
	for range s.rr.nodes {
		r := s.rr.call(t, "GET", "/robots.txt", "", nil)
		if r.status != 200 || string(r.body) != want {
			t.Errorf("RobotsTest::expectedListOfCrawlableShortCodesIsReturned: %d %q, want %q", r.status, r.body, want)
		}
	}
}

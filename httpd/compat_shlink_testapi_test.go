package httpd

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

// Cases of Shlink's own API test suite (module/Rest/test-api), each run
// through a real node as the suite sends it.

// TestShlinkTestAPIMiddlewares: what Shlink's middlewares answer on every
// route: the malformed body, CORS, implicit OPTIONS and the request id.
func TestShlinkTestAPIMiddlewares(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	cases := []struct {
		name                       string
		method, uri, body, headers string // headers: "Name: value" lines
		status                     int
		want                       map[string]string // a header or "body.<field>"; "-" for absent
	}{
		// Shlink test-api BodyParserTest::returnsErrorWhenRequestBodyIsInvalidJson
		{"invalid JSON", "POST", "/rest/v3/short-urls", `{"foo`, "", 400, map[string]string{
			"body.type": "https://shlink.io/api/error/malformed-request-body", "body.title": "Malformed request body",
			"body.detail": "Provided request does not contain a valid JSON body.", "body.status": "400"}},
		// Shlink test-api CorsTest::responseDoesNotIncludeCorsHeadersWhenOriginIsNotSent
		{"no origin", "GET", "/rest/v3/short-urls", "", "", 200, map[string]string{
			"Access-Control-Allow-Origin": "-", "Access-Control-Allow-Methods": "-", "Access-Control-Max-Age": "-",
			"Access-Control-Allow-Headers": "-", "Access-Control-Allow-Credentials": "-"}},
		// Shlink test-api CorsTest::responseIncludesCorsHeadersIfOriginIsSent (foo.com, bar.io, baz.dev)
		{"origin", "GET", "/rest/v3/short-urls", "", "Origin: foo.com", 200, map[string]string{
			"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "-", "Access-Control-Max-Age": "-",
			"Access-Control-Allow-Headers": "-"}},
		{"origin on a path no route takes", "GET", "/rest/v3/foo/bar", "", "Origin: bar.io", 404, map[string]string{
			"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "-", "body.status": "404", "body.title": "Not Found"}},
		// Shlink test-api CorsTest::preflightRequestsIncludeExtraCorsHeaders
		{"preflight of a path no route takes", "OPTIONS", "/rest/v3/foo/bar", "", "Origin: foo.com\nAccess-Control-Request-Headers: Authorization", 204, map[string]string{
			"Access-Control-Allow-Origin": "*", "Access-Control-Max-Age": "3600",
			"Access-Control-Allow-Methods": "GET,POST,PUT,PATCH,DELETE", "Access-Control-Allow-Headers": "Authorization"}},
		{"preflight of short-urls", "OPTIONS", "/rest/v3/short-urls", "", "Origin: foo.com\nAccess-Control-Request-Headers: Authorization", 204, map[string]string{
			"Access-Control-Allow-Origin": "*", "Access-Control-Max-Age": "3600",
			"Access-Control-Allow-Methods": "GET,POST", "Access-Control-Allow-Headers": "Authorization"}},
		{"preflight of tags", "OPTIONS", "/rest/v3/tags", "", "Origin: foo.com\nAccess-Control-Request-Headers: Authorization", 204, map[string]string{
			"Access-Control-Allow-Methods": "GET,DELETE,PUT", "Access-Control-Allow-Headers": "Authorization"}},
		{"preflight of health", "OPTIONS", "/rest/v3/health", "", "Origin: foo.com\nAccess-Control-Request-Headers: Authorization", 204, map[string]string{
			"Access-Control-Allow-Methods": "GET", "Access-Control-Allow-Headers": "Authorization"}},
		// Shlink test-api ImplicitOptionsTest::optionsRequestsReturnEmptyResponse and
		// ::optionsRequestsReturnAllowedMethodsForEndpoint
		{"implicit options", "OPTIONS", "/rest/v3/short-urls", "", "", 204, map[string]string{
			"Allow": "GET,POST", "Access-Control-Allow-Origin": "-", "body": ""}},
		// Shlink test-api RequestIdTest::keepsProvidedRequestId
		{"request id kept", "GET", "/rest/v3/health", "", "X-Request-Id: foobar", 200, map[string]string{"X-Request-Id": "foobar"}},
		{"request id on a path no route takes", "GET", "/rest/v2/nothing", "", "X-Request-Id: abc-1", 404, map[string]string{"X-Request-Id": "abc-1"}},
		{"request id with a line break is not echoed", "GET", "/rest/v3/health", "", "X-Request-Id: a b", 200, map[string]string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			headers := []string{"X-Api-Key", key}
			for _, line := range strings.Split(c.headers, "\n") {
				if name, value, ok := strings.Cut(line, ": "); ok {
					headers = append(headers, name, value)
				}
			}
			ctx := do(s, c.method, c.uri, "application/json", c.body, headers...)
			if got := status(ctx); got != c.status {
				t.Fatalf("status %d, want %d: %s", got, c.status, ctx.Response.Body())
			}
			for name, want := range c.want {
				var got string
				var has bool
				switch {
				case name == "body":
					got, has = string(ctx.Response.Body()), true
				case strings.HasPrefix(name, "body."):
					v := field(decodeBody(t, ctx.Response.Body()), strings.TrimPrefix(name, "body."))
					got, has = fmt.Sprint(v), v != nil
				default:
					got, has = string(ctx.Response.Header.Peek(name)), ctx.Response.Header.Peek(name) != nil
				}
				if want == "-" && has || want != "-" && got != want {
					t.Errorf("%s = %q (present %v), want %q", name, got, has, want)
				}
			}
			// Shlink test-api RequestIdTest::generatesRequestId
			if id := string(ctx.Response.Header.Peek("X-Request-Id")); id == "" || strings.ContainsAny(id, " \r\n") {
				t.Errorf("X-Request-Id %q", id)
			}
		})
	}
}

// TestShlinkTestAPIInvalidData: every request Shlink refuses as invalid
// data gets its type, title and detail, and names the fields it can.
func TestShlinkTestAPIInvalidData(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	mustCreate(t, s, `{"url":"https://example.com/abc","custom_code":"abc123","workspace":"team","tags":["foo"]}`)
	rule := func(r string) string { return `{"redirectRules":[` + r + `]}` }
	cases := []struct {
		name, method, uri, body string
		fields                  []string // the invalidElements, nil to leave unchecked
	}{
		// Shlink test-api CreateShortUrlTest::failsToCreateShortUrlWithoutLongUrl
		{"missing long url v2", "POST", "/rest/v2/short-urls", `{}`, []string{"longUrl"}},
		{"missing long url v3", "POST", "/rest/v3/short-urls", `{}`, []string{"longUrl"}},
		{"empty long url v2", "POST", "/rest/v2/short-urls", `{"longUrl":null}`, []string{"longUrl"}},
		{"empty long url v3", "POST", "/rest/v3/short-urls", `{"longUrl":"  "}`, []string{"longUrl"}},
		{"missing url schema v2", "POST", "/rest/v2/short-urls", `{"longUrl":"foo.com"}`, []string{"longUrl"}},
		{"missing url schema v3", "POST", "/rest/v3/short-urls", `{"longUrl":"foo.com"}`, []string{"longUrl"}},
		// Shlink test-api CreateShortUrlTest::failsToCreateShortUrlWithInvalidDomain
		{"domain with a bad port", "POST", "/rest/v2/short-urls", `{"longUrl":"https://app.shlink.io","domain":"localhost:80000"}`, []string{"domain"}},
		{"domain of junk", "POST", "/rest/v2/short-urls", `{"longUrl":"https://app.shlink.io","domain":"???/&%$&"}`, []string{"domain"}},
		{"domain of an address no one registered", "POST", "/rest/v2/short-urls", `{"longUrl":"https://app.shlink.io","domain":"127.0.0.1"}`, []string{"domain"}},
		// Several bad fields are all named.
		{"every bad field", "POST", "/rest/v3/short-urls", `{"validSince":"soon","customSlug":"a?b"}`, []string{"customSlug", "longUrl", "validSince"}},
		{"a field of the wrong type", "POST", "/rest/v3/short-urls", `{"longUrl":"https://e.example","maxVisits":"not_a_number"}`, []string{"maxVisits"}},
		// Shlink test-api EditShortUrlTest::providingInvalidDataReturnsBadRequest
		{"edit with a bad maxVisits", "PATCH", "/rest/v3/short-urls/invalid", `{"maxVisits":"not_a_number"}`, []string{"maxVisits"}},
		// Shlink test-api UpdateTagTest::notProvidingTagsReturnsBadRequest
		{"rename without names", "PUT", "/rest/v3/tags", `{}`, []string{"newName", "oldName"}},
		{"rename without newName", "PUT", "/rest/v3/tags", `{"oldName":"foo"}`, []string{"newName"}},
		{"rename without oldName", "PUT", "/rest/v3/tags", `{"newName":"foo"}`, []string{"oldName"}},
		// Shlink test-api SetRedirectRulesTest::errorIsReturnedWhenInvalidDataIsProvided
		{"rules: invalid data", "POST", "/rest/v3/short-urls/abc123/redirect-rules", `{"redirectRules":["foo"]}`, []string{"redirectRules"}},
		{"rules: invalid long URL", "POST", "/rest/v3/short-urls/abc123/redirect-rules", rule(`{"longUrl":"invalid"}`), nil},
		{"rules: non-array conditions", "POST", "/rest/v3/short-urls/abc123/redirect-rules", rule(`{"longUrl":"https://example.com","conditions":"foo"}`), []string{"redirectRules"}},
		{"rules: invalid condition type", "POST", "/rest/v3/short-urls/abc123/redirect-rules",
			rule(`{"longUrl":"https://example.com","conditions":[{"type":"invalid","matchKey":null,"matchValue":"foo"}]}`), []string{"redirectRules"}},
		{"rules: invalid device type", "POST", "/rest/v3/short-urls/abc123/redirect-rules",
			rule(`{"longUrl":"https://example.com","conditions":[{"type":"device","matchValue":"invalid-device","matchKey":null}]}`), []string{"redirectRules"}},
		{"rules: invalid IP address", "POST", "/rest/v3/short-urls/abc123/redirect-rules",
			rule(`{"longUrl":"https://example.com","conditions":[{"type":"ip-address","matchKey":null,"matchValue":"not an IP address"}]}`), nil},
		{"rules: invalid country code", "POST", "/rest/v3/short-urls/abc123/redirect-rules",
			rule(`{"longUrl":"https://example.com","conditions":[{"type":"geolocation-country-code","matchKey":null,"matchValue":"not a country code"}]}`), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := do(s, c.method, c.uri, "application/json", c.body, "X-Api-Key", key)
			m := decodeBody(t, ctx.Response.Body())
			if status(ctx) != 400 || m["type"] != "https://shlink.io/api/error/invalid-data" || m["title"] != "Invalid data" ||
				m["detail"] != "Provided data is not valid" || m["status"] != 400.0 {
				t.Fatalf("%d %s; want Shlink's invalid data", status(ctx), ctx.Response.Body())
			}
			if c.fields == nil {
				return
			}
			var got []string
			for _, f := range m["invalidElements"].([]any) {
				got = append(got, f.(string))
			}
			slices.Sort(got)
			if !slices.Equal(got, c.fields) {
				t.Errorf("invalidElements %v, want %v", got, c.fields)
			}
		})
	}
}

// TestShlinkTestAPITags: Shlink's tag lists are paginated, searched and
// ordered as its TagsParams reads them.
func TestShlinkTestAPITags(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	for i, tags := range []string{`["foo","bar"]`, `["foo"]`, `["foo"]`} {
		mustCreate(t, s, fmt.Sprintf(`{"url":"https://example.com/%d","workspace":"team","tags":%s}`, i, tags))
	}
	pagination := func(current, pages, perPage, inPage, total int) string {
		return fmt.Sprintf(`{"currentPage":%d,"itemsInCurrentPage":%d,"itemsPerPage":%d,"pagesCount":%d,"totalItems":%d}`,
			current, inPage, perPage, pages, total)
	}
	bar := `{"shortUrlsCount":1,"tag":"bar","visitsSummary":{"bots":0,"nonBots":0,"total":0}}`
	foo := `{"shortUrlsCount":3,"tag":"foo","visitsSummary":{"bots":0,"nonBots":0,"total":0}}`
	cases := []struct{ name, uri, data, pagination string }{
		// Shlink test-api ListTagsTest::expectedListOfTagsIsReturned (admin API key)
		{"every tag", "/rest/v3/tags", `["bar","foo"]`, pagination(1, 1, 2, 2, 2)},
		// Shlink test-api ListTagsTest::expectedListOfTagsIsReturned (admin api key with pagination)
		{"second page", "/rest/v3/tags?page=2&itemsPerPage=1", `["foo"]`, pagination(2, 2, 1, 1, 2)},
		{"searched", "/rest/v3/tags?searchTerm=Fo", `["foo"]`, pagination(1, 1, 1, 1, 1)},
		{"descending", "/rest/v3/tags?orderBy=tag-DESC", `["foo","bar"]`, pagination(1, 1, 2, 2, 2)},
		{"a page past the end", "/rest/v3/tags?page=3&itemsPerPage=1", `[]`, pagination(3, 2, 1, 0, 2)},
		// Shlink test-api TagsStatsTest::expectedListOfTagsIsReturned (admin API key)
		{"stats", "/rest/v3/tags/stats", "[" + bar + "," + foo + "]", pagination(1, 1, 2, 2, 2)},
		// Shlink test-api TagsStatsTest::expectedListOfTagsIsReturned (admin API key with pagination)
		{"stats paginated", "/rest/v3/tags/stats?page=1&itemsPerPage=1", "[" + bar + "]", pagination(1, 2, 1, 1, 2)},
		{"stats by links", "/rest/v3/tags/stats?orderBy=shortUrlsCount-DESC", "[" + foo + "," + bar + "]", pagination(1, 1, 2, 2, 2)},
		{"stats with a page below 1", "/rest/v3/tags/stats?page=0&itemsPerPage=-1", "[" + bar + "," + foo + "]", pagination(1, 1, 2, 2, 2)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := do(s, "GET", c.uri, "", "", "X-Api-Key", key)
			if status(ctx) != 200 {
				t.Fatalf("%d %s", status(ctx), ctx.Response.Body())
			}
			tags := field(decodeBody(t, ctx.Response.Body()), "tags").(map[string]any)
			data, _ := json.Marshal(tags["data"])
			pg, _ := json.Marshal(tags["pagination"])
			if string(data) != c.data || string(pg) != c.pagination || len(tags) != 2 {
				t.Errorf("tags %s %s (%d fields), want %s %s", data, pg, len(tags), c.data, c.pagination)
			}
		})
	}
}

// TestShlinkTestAPIVisitsNotFound: visits of a domain or tag the key does
// not know are Shlink's not-found problems.
func TestShlinkTestAPIVisitsNotFound(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	if ctx := do(s, "POST", "/admin/domains", "application/json", `{"domain":"brand.example"}`); status(ctx) != 200 {
		t.Fatalf("domain: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "POST", "/admin/domains", "application/json", `{"domain":"detached.example"}`); status(ctx) != 200 {
		t.Fatalf("domain: %d %s", status(ctx), ctx.Response.Body())
	}
	mustCreate(t, s, `{"url":"https://example.com/b","workspace":"team","domain":"brand.example","tags":["foo"]}`)
	cases := []struct {
		name, uri string
		status    int
		want      map[string]any
	}{
		// Shlink test-api DomainVisitsTest::notFoundErrorIsReturnedForInvalidTags (admin API key with invalid domain)
		{"unknown domain", "/rest/v3/domains/invalid_domain.com/visits", 404, map[string]any{
			"type": "https://shlink.io/api/error/domain-not-found", "title": "Domain not found", "status": 404.0,
			"detail": `Domain with authority "invalid_domain.com" could not be found`, "authority": "invalid_domain.com"}},
		// Shlink test-api DomainVisitsTest::expectedNotFoundTypeIsReturnedForApiVersion
		{"unknown domain v1", "/rest/v1/domains/invalid.com/visits", 404, map[string]any{"type": "https://shlink.io/api/error/domain-not-found"}},
		{"unknown domain v2", "/rest/v2/domains/invalid.com/visits", 404, map[string]any{"type": "https://shlink.io/api/error/domain-not-found"}},
		// Shlink test-api DomainVisitsTest::notFoundErrorIsReturnedForInvalidTags (author API key with
		// valid domain not used in URLs): a registered domain none of the key's links use.
		{"a domain the key's links do not use", "/rest/v3/domains/detached.example/visits", 404, map[string]any{"authority": "detached.example"}},
		{"a domain the key's links use", "/rest/v3/domains/brand.example/visits", 200, nil},
		{"the default domain", "/rest/v3/domains/DEFAULT/visits", 200, nil},
		{"the default domain by name", "/rest/v3/domains/sho.rt/visits", 200, nil},
		// Shlink test-api TagVisitsTest::notFoundErrorIsReturnedForInvalidTags (admin API key with invalid tag)
		{"unknown tag", "/rest/v3/tags/invalid_tag/visits", 404, map[string]any{
			"type": "https://shlink.io/api/error/tag-not-found", "detail": `Tag with name "invalid_tag" could not be found`, "title": "Tag not found"}},
		{"a tag", "/rest/v3/tags/foo/visits", 200, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := do(s, "GET", c.uri, "", "", "X-Api-Key", key)
			if status(ctx) != c.status {
				t.Fatalf("%d %s, want %d", status(ctx), ctx.Response.Body(), c.status)
			}
			m := decodeBody(t, ctx.Response.Body())
			for k, want := range c.want {
				if m[k] != want {
					t.Errorf("%s = %#v, want %#v", k, m[k], want)
				}
			}
		})
	}
}

// TestShlinkTestAPICreate: Shlink's create takes its inputs as Shlink
// does: slugs slugified, tags normalised, titles trimmed and cropped, a
// path prefix and a code length honoured, a domain-limited key's domain
// applied.
func TestShlinkTestAPICreate(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	for _, d := range []string{"some-domain.com", "example.com"} {
		if ctx := do(s, "POST", "/admin/domains", "application/json", `{"domain":"`+d+`"}`); status(ctx) != 200 {
			t.Fatalf("domain: %d %s", status(ctx), ctx.Response.Body())
		}
	}
	ctx := do(s, "POST", "/admin/keys", "application/json", `{"name":"domain_api_key","scopes":["links:write","links:read"],"workspaces":["team"],"domains":["example.com"]}`)
	domainKey, _ := decodeBody(t, ctx.Response.Body())["key"].(string)
	if domainKey == "" {
		t.Fatalf("domain key: %d %s", status(ctx), ctx.Response.Body())
	}
	mustCreate(t, s, `{"url":"https://example.com/c","custom_code":"custom","workspace":"team"}`)
	mustCreate(t, s, `{"url":"https://example.com/c","custom_code":"custom-with-domain","workspace":"team","domain":"some-domain.com"}`)
	long := `"longUrl":"https://app.shlink.io"`
	pad := func(s string, n int) string { return strings.Repeat(s, n) }
	cases := []struct {
		name, body string
		apiKey     string
		status     int
		want       map[string]any // fields of the answer; a string ending in "*" is a prefix, "-" absent
	}{
		// Shlink test-api CreateShortUrlTest::createsNewShortUrlWithCustomSlug
		{"slug with spaces", `{` + long + `,"customSlug":"my cool slug"}`, key, 200, map[string]any{"shortCode": "my-cool-slug"}},
		// Shlink test-api CreateShortUrlTest::failsToCreateShortUrlWithDuplicatedSlug
		{"taken slug", `{` + long + `,"customSlug":"custom"}`, key, 400, map[string]any{
			"type": "https://shlink.io/api/error/non-unique-slug", "title": "Invalid custom slug", "status": 400.0,
			"detail": `Provided slug "custom" is already in use.`, "customSlug": "custom", "domain": "-"}},
		{"taken slug on a domain", `{` + long + `,"customSlug":"custom-with-domain","domain":"some-domain.com"}`, key, 400, map[string]any{
			"detail":     `Provided slug "custom-with-domain" is already in use for domain "some-domain.com".`,
			"customSlug": "custom-with-domain", "domain": "some-domain.com"}},
		// Shlink test-api CreateShortUrlTest::createsNewShortUrlWithTags
		{"simple tags", `{` + long + `,"tags":["foo","bar","baz"]}`, key, 200, map[string]any{"tags": []any{"foo", "bar", "baz"}}},
		{"tags with spaces", `{` + long + `,"tags":["fo o","  bar","b az"]}`, key, 200, map[string]any{"tags": []any{"fo-o", "bar", "b-az"}}},
		{"tags with special chars", `{` + long + `,"tags":["UUU","Aäa"]}`, key, 200, map[string]any{"tags": []any{"uuu", "aäa"}}},
		// Shlink test-api CreateShortUrlTest::lonUrlSupportsDifferentTypesOfSchemas, but for
		// file:, which linkraft refuses on purpose: it opens the visitor's own files
		// (docs/COMPATIBILITY.md).
		{"mailto", `{"longUrl":"mailto:foo@example.com"}`, key, 200, map[string]any{"longUrl": "mailto:foo@example.com"}},
		{"https", `{"longUrl":"https://example.com"}`, key, 200, map[string]any{"longUrl": "https://example.com"}},
		{"deeplink", `{"longUrl":"shlink://some/path"}`, key, 200, map[string]any{"longUrl": "shlink://some/path"}},
		{"file", `{"longUrl":"file:///foo/bar"}`, key, 400, map[string]any{
			"type": "https://shlink.io/api/error/invalid-data", "invalidElements": []any{"longUrl"}}},
		// Shlink test-api CreateShortUrlTest::titleIsCroppedIfTooLong: cropped at 512
		// characters.
		{"short title", `{` + long + `,"title":"foo"}`, key, 200, map[string]any{"title": "foo"}},
		{"padded title", `{` + long + `,"title":"` + pad(" ", 298) + "bar" + pad(" ", 299) + `"}`, key, 200, map[string]any{"title": "bar"}},
		{"title of 511", `{` + long + `,"title":"` + pad("a", 511) + `"}`, key, 200, map[string]any{"title": pad("a", 511)}},
		{"title of 512", `{` + long + `,"title":"` + pad("b", 512) + `"}`, key, 200, map[string]any{"title": pad("b", 512)}},
		{"title of 513", `{` + long + `,"title":"` + pad("c", 513) + `"}`, key, 200, map[string]any{"title": pad("c", 512)}},
		{"title of 600", `{` + long + `,"title":"` + pad("d", 600) + `"}`, key, 200, map[string]any{"title": pad("d", 512)}},
		{"title of 800", `{` + long + `,"title":"` + pad("e", 800) + `"}`, key, 200, map[string]any{"title": pad("e", 512)}},
		// linkraft also keeps at most 1024 bytes (docs/COMPATIBILITY.md): 512 characters of
		// 3 bytes are cropped to the 341 that fit.
		{"title of 512 wide characters", `{` + long + `,"title":"` + pad("€", 512) + `"}`, key, 200, map[string]any{"title": pad("€", 341)}},
		// Shlink test-api CreateShortUrlTest::prefixCanBeSet
		{"prefix", `{"longUrl":"https://example.com","pathPrefix":"foo/b  ar-baz","customSlug":null}`, key, 200, map[string]any{"shortCode": "foo-b--ar-baz*"}},
		{"prefix and slug", `{"longUrl":"https://example.com","pathPrefix":"foo/b  ar-baz","customSlug":"my-custom-slug"}`, key, 200,
			map[string]any{"shortCode": "foo-b--ar-bazmy-custom-slug"}},
		// Shlink's shortCodeLength (at least 4) is honoured.
		{"code length", `{` + long + `,"shortCodeLength":9}`, key, 200, map[string]any{"shortCode": "?????????"}},
		{"code length below 4", `{` + long + `,"shortCodeLength":3}`, key, 400, map[string]any{"invalidElements": []any{"shortCodeLength"}}},
		// Shlink test-api CreateShortUrlTest::defaultDomainIsDroppedIfProvided
		{"the default domain by name", `{` + long + `,"domain":"sho.rt"}`, key, 200, map[string]any{"domain": nil}},
		// Shlink test-api CreateShortUrlTest::apiKeyDomainIsEnforced
		{"domain key, no domain", `{` + long + `}`, domainKey, 200, map[string]any{"domain": "example.com"}},
		{"domain key, another domain", `{` + long + `,"domain":"this-will-be-overwritten.com"}`, domainKey, 200, map[string]any{"domain": "example.com"}},
		{"domain key, its domain", `{` + long + `,"domain":"example.com"}`, domainKey, 200, map[string]any{"domain": "example.com"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := do(s, "POST", "/rest/v2/short-urls", "application/json", c.body, "X-Api-Key", c.apiKey)
			if status(ctx) != c.status {
				t.Fatalf("%d %s, want %d", status(ctx), ctx.Response.Body(), c.status)
			}
			m := decodeBody(t, ctx.Response.Body())
			for k, want := range c.want {
				got, has := m[k]
				w, _ := want.(string)
				switch {
				case w == "-":
					if has {
						t.Errorf("%s = %#v, want none", k, got)
					}
				case strings.HasSuffix(w, "*"):
					if g, _ := got.(string); !strings.HasPrefix(g, strings.TrimSuffix(w, "*")) || len(g) <= len(w)-1 {
						t.Errorf("%s = %#v, want %s and more", k, got, w)
					}
				case strings.Trim(w, "?") == "" && w != "":
					if g, _ := got.(string); len(g) != len(w) {
						t.Errorf("%s = %#v, want %d characters", k, got, len(w))
					}
				case !has || fmt.Sprint(got) != fmt.Sprint(want):
					t.Errorf("%s = %#v, want %#v", k, got, want)
				}
			}
		})
	}
	// Shlink test-api SingleStepCreateShortUrlTest::createsNewShortUrlWithFormat (txt)
	ctx = do(s, "GET", "/rest/v3/short-urls/shorten?format=txt&longUrl=https%3A%2F%2Fapp.shlink.io&apiKey="+key, "", "", "Authorization", "")
	if status(ctx) != 200 || string(ctx.Response.Header.ContentType()) != "text/plain" || !strings.HasPrefix(string(ctx.Response.Body()), "http://sho.rt/") {
		t.Errorf("shorten txt: %d %q %s", status(ctx), ctx.Response.Header.ContentType(), ctx.Response.Body())
	}
}

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

// TestShlinkTestAPIListsAndRestrictedKeys: Shlink's list searches and
// filters as Shlink does; a key that may not see orphan visits sees and
// deletes none; a one-call create without its apiKey names it.
func TestShlinkTestAPIListsAndRestrictedKeys(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	if ctx := do(s, "POST", "/admin/domains", "application/json", `{"domain":"example.com"}`); status(ctx) != 200 {
		t.Fatalf("domain: %d %s", status(ctx), ctx.Response.Body())
	}
	for _, body := range []string{
		`{"url":"https://shlink.io/a","custom_code":"first","workspace":"team","tags":["foo"]}`,
		`{"url":"https://shlink.io/b","custom_code":"second","workspace":"team","title":"My title"}`,
		`{"url":"https://shlink.io/c","custom_code":"third","workspace":"team","domain":"example.com"}`,
		`{"url":"https://shlink.io/d","custom_code":"fourth","workspace":"team","tags":["bar"]}`,
	} {
		mustCreate(t, s, body)
	}
	codes := func(m map[string]any) string {
		var out []string
		for _, u := range field(m, "shortUrls.data").([]any) {
			out = append(out, u.(map[string]any)["shortCode"].(string))
		}
		return strings.Join(out, ",")
	}
	cases := []struct{ name, query, want string }{
		// Shlink test-api ListShortUrlsTest::shortUrlsAreProperlyListed (searchTerm example.com: the domain)
		{"search by domain", "searchTerm=example.com", "third"},
		{"search by tag", "searchTerm=BA", "fourth"},
		{"search by title", "searchTerm=my%20t", "second"},
		// Shlink test-api ListShortUrlsTest::shortUrlsAreProperlyListed (domain DEFAULT)
		{"default domain", "domain=DEFAULT&orderBy=dateCreated-ASC", "first,second,fourth"},
		// Shlink test-api ListShortUrlsTest::shortUrlsAreProperlyListed (orderBy title-DESC: ties in
		// the order the links were made)
		{"by title, ties in creation order", "orderBy=title-DESC", "second,first,third,fourth"},
	}
	for _, c := range cases {
		ctx := do(s, "GET", "/rest/v3/short-urls?"+c.query, "", "", "X-Api-Key", key)
		if got := codes(decodeBody(t, ctx.Response.Body())); status(ctx) != 200 || got != c.want {
			t.Errorf("%s: %d %s, want %s", c.name, status(ctx), got, c.want)
		}
	}
	// Shlink test-api OrphanVisitsTest::noVisitsAreReturnedForRestrictedApiKey
	ctx := do(s, "GET", "/rest/v3/visits/orphan", "", "", "X-Api-Key", key)
	if m := decodeBody(t, ctx.Response.Body()); status(ctx) != 200 || field(m, "visits.pagination.totalItems") != 0.0 ||
		len(field(m, "visits.data").([]any)) != 0 {
		t.Errorf("orphan visits of a restricted key: %d %s", status(ctx), ctx.Response.Body())
	}
	// Shlink test-api DeleteOrphanVisitsTest::doesNotDeleteOrphanVisitsForRestrictedApiKey
	ctx = do(s, "DELETE", "/rest/v3/visits/orphan", "", "", "X-Api-Key", key)
	if m := decodeBody(t, ctx.Response.Body()); status(ctx) != 200 || m["deletedVisits"] != 0.0 {
		t.Errorf("orphan visits deleted by a restricted key: %d %s", status(ctx), ctx.Response.Body())
	}
	// Shlink test-api SingleStepCreateShortUrlTest::authorizationErrorIsReturnedIfNoApiKeyIsSent
	ctx = do(s, "GET", "/rest/v3/short-urls/shorten?longUrl=https%3A%2F%2Fapp.shlink.io&format=json", "", "", "Authorization", "")
	if m := decodeBody(t, ctx.Response.Body()); status(ctx) != 401 || m["type"] != "https://shlink.io/api/error/missing-authentication" ||
		m["detail"] != `Expected authentication to be provided in "apiKey" query param` || m["title"] != "Invalid authorization" {
		t.Errorf("shorten without apiKey: %d %s", status(ctx), ctx.Response.Body())
	}
	// Shlink test-api SetRedirectRulesTest::errorIsReturnedWhenInvalidUrlIsProvided
	ctx = do(s, "POST", "/rest/v3/short-urls/invalid/redirect-rules", "", "", "X-Api-Key", key)
	if m := decodeBody(t, ctx.Response.Body()); status(ctx) != 404 || m["type"] != "https://shlink.io/api/error/short-url-not-found" ||
		m["detail"] != `No URL found with short code "invalid"` || m["shortCode"] != "invalid" {
		t.Errorf("rules of an unknown code: %d %s", status(ctx), ctx.Response.Body())
	}
}

// TestShlinkTestAPIDomainsOfADomainKey: Shlink test-api
// ListDomainsTest::domainsAreProperlyListed (domain API key): a key limited
// to domains is shown those alone, without redirects.
func TestShlinkTestAPIDomainsOfADomainKey(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	for _, d := range []string{"example.com", "some-domain.com"} {
		if ctx := do(s, "POST", "/admin/domains", "application/json", `{"domain":"`+d+`","root_redirect":"https://`+d+`/home"}`); status(ctx) != 200 {
			t.Fatalf("domain: %d %s", status(ctx), ctx.Response.Body())
		}
	}
	ctx := do(s, "POST", "/admin/keys", "application/json", `{"name":"domain_api_key","scopes":["links:read"],"workspaces":["team"],"domains":["example.com"]}`)
	domainKey, _ := decodeBody(t, ctx.Response.Body())["key"].(string)
	_, authorKey := addKey(t, s, fsm.ScopeLinksRead, 0, "team")
	null := `{"baseUrlRedirect":null,"invalidShortUrlRedirect":null,"regular404Redirect":null}`
	for name, c := range map[string]struct{ key, want string }{
		"domain API key": {domainKey, `[{"domain":"example.com","isDefault":false,"redirects":` + null + `}]`},
		"author API key": {authorKey, `[{"domain":"sho.rt","isDefault":true,"redirects":` + null + `}]`},
	} {
		ctx := do(s, "GET", "/rest/v3/domains", "", "", "X-Api-Key", c.key)
		data, _ := json.Marshal(field(decodeBody(t, ctx.Response.Body()), "domains.data"))
		if status(ctx) != 200 || string(data) != c.want {
			t.Errorf("%s: %d %s, want %s", name, status(ctx), data, c.want)
		}
	}
}

// TestShlinkTestAPITagsInOtherScripts: a tag in another script (Shlink
// test-api CreateShortUrlTest::createsNewShortUrlWithTags, "aäa") is found
// by every route that names a tag in its path, where it comes
// percent-encoded: its visits, and linkraft's own rename and delete.
func TestShlinkTestAPITagsInOtherScripts(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	if ctx := do(s, "POST", "/rest/v3/short-urls", "application/json", `{"longUrl":"https://example.com/t","customSlug":"tagged-1","tags":["Aäa","keep"]}`,
		"X-Api-Key", key); status(ctx) != 200 {
		t.Fatalf("create: %d %s", status(ctx), ctx.Response.Body())
	}
	steps := []struct {
		name, method, uri, body string
		status                  int
		tags                    string // the link's tags after the step
	}{
		{"its visits", "GET", "/rest/v3/tags/a%C3%A4a/visits", "", 200, `["aäa","keep"]`},
		{"renamed", "PUT", "/api/v1/tags/a%C3%A4a", `{"name":"bäb"}`, 200, `["bäb","keep"]`},
		{"renamed through Shlink", "PUT", "/rest/v3/tags", `{"oldName":"bäb","newName":"cäc"}`, 204, `["cäc","keep"]`},
		{"deleted", "DELETE", "/api/v1/tags/c%C3%A4c", "", 200, `["keep"]`},
	}
	for _, st := range steps {
		headers := []string{"X-Api-Key", key}
		if strings.HasPrefix(st.uri, "/api/") {
			headers = nil // the admin token
		}
		ctx := do(s, st.method, st.uri, "application/json", st.body, headers...)
		if status(ctx) != st.status {
			t.Fatalf("%s: %d %s, want %d", st.name, status(ctx), ctx.Response.Body(), st.status)
		}
		tags, _ := json.Marshal(field(decodeBody(t, do(s, "GET", "/api/v1/urls/tagged-1", "", "").Response.Body()), "tags"))
		if string(tags) != st.tags {
			t.Errorf("%s: tags %s, want %s", st.name, tags, st.tags)
		}
	}
}

// TestShlinkTestAPIEdit: Shlink's edit sets and resets a link's metadata,
// normalises its tags and title as a create does, and answers an edit of
// nothing with the link.
func TestShlinkTestAPIEdit(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	mustCreate(t, s, `{"url":"https://example.com/abc","custom_code":"abc123","workspace":"team"}`)
	month := time.Now().AddDate(0, 1, 0).UTC().Truncate(time.Second).Format("2006-01-02T15:04:05+00:00")
	year := time.Now().AddDate(1, 0, 0).UTC().Truncate(time.Second).Format("2006-01-02T15:04:05+00:00")
	reset := `{"validSince":null,"validUntil":null,"maxVisits":null}`
	cases := []struct{ name, edit, want string }{ // want: fields of the answer, as JSON
		// Shlink test-api EditShortUrlTest::metadataCanBeReset
		{"validSince", `{"validSince":"` + month + `"}`, `{"meta":{"maxVisits":null,"validSince":"` + month + `","validUntil":null}}`},
		{"reset", reset, `{"meta":{"maxVisits":null,"validSince":null,"validUntil":null}}`},
		{"maxVisits", `{"maxVisits":20}`, `{"meta":{"maxVisits":20,"validSince":null,"validUntil":null}}`},
		{"reset again", reset, `{"meta":{"maxVisits":null,"validSince":null,"validUntil":null}}`},
		{"validUntil and maxVisits", `{"validUntil":"` + year + `","maxVisits":100}`, `{"meta":{"maxVisits":100,"validSince":null,"validUntil":"` + year + `"}}`},
		{"reset at last", reset, `{"meta":{"maxVisits":null,"validSince":null,"validUntil":null}}`},
		// Tags and titles as on create (CreateShortUrlTest::createsNewShortUrlWithTags, ::titleIsCroppedIfTooLong).
		{"tags", `{"tags":["fo o","  Bar"]}`, `{"tags":["fo-o","bar"]}`},
		{"title", `{"title":"  T  "}`, `{"title":"T"}`},
		{"nothing", `{}`, `{"shortCode":"abc123","title":"T"}`},
	}
	for _, c := range cases {
		ctx := do(s, "PATCH", "/rest/v3/short-urls/abc123", "application/json", c.edit, "X-Api-Key", key)
		if status(ctx) != 200 {
			t.Fatalf("%s: %d %s", c.name, status(ctx), ctx.Response.Body())
		}
		got := decodeBody(t, ctx.Response.Body())
		var want map[string]any
		_ = json.Unmarshal([]byte(c.want), &want)
		for k, w := range want {
			g, _ := json.Marshal(got[k])
			wj, _ := json.Marshal(w)
			if string(g) != string(wj) {
				t.Errorf("%s: %s = %s, want %s", c.name, k, g, wj)
			}
		}
	}
}

// TestShlinkTestAPIDomainRedirectsInvalid: Shlink test-api
// DomainRedirectsTest::anErrorIsReturnedWhenTryingToEditAnInvalidDomain.
func TestShlinkTestAPIDomainRedirectsInvalid(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, admin := addKey(t, s, fsm.ScopeAdmin, 0, fsm.AllWorkspaces)
	for name, body := range map[string]string{
		"no domain":      `{}`,
		"empty domain":   `{"domain":""}`,
		"null domain":    `{"domain":null}`,
		"invalid domain": `{"domain":"not a domain"}`,
		"invalid IP":     `{"domain":"540.38.386.0"}`,
		"invalid port":   `{"domain":"example.com:888888"}`,
	} {
		ctx := do(s, "PATCH", "/rest/v3/domains/redirects", "application/json", body, "X-Api-Key", admin)
		m := decodeBody(t, ctx.Response.Body())
		if status(ctx) != 400 || m["type"] != "https://shlink.io/api/error/invalid-data" || m["detail"] != "Provided data is not valid" ||
			fmt.Sprint(m["invalidElements"]) != "[domain]" {
			t.Errorf("%s: %d %s", name, status(ctx), ctx.Response.Body())
		}
	}
}

// TestShlinkTestAPIAuthorKey: Shlink's author_api_key (AUTHORED_SHORT_URLS),
// here a key made with own_links_only, lists, counts and reads only the
// links it created; apiKeyName filters by a key's name for an admin key,
// and is ignored for another key that names someone else.
func TestShlinkTestAPIAuthorKey(t *testing.T) {
	s := newTestServer(t, nil)
	waitTargets(t, s)
	admin := shlinkNamedKey(t, s, `{"name":"valid_api_key","scopes":["admin"],"workspaces":["*"]}`)
	author := shlinkNamedKey(t, s, `{"name":"author_api_key","scopes":["links:read","links:write","stats:read"],`+
		`"workspaces":["*"],"own_links_only":true}`)
	for _, c := range []struct{ key, body string }{
		{author, `{"longUrl":"https://shlink.io/1","customSlug":"custom","tags":["foo"]}`},
		{author, `{"longUrl":"https://shlink.io/2","customSlug":"meta"}`},
		{admin, `{"longUrl":"https://shlink.io/3","customSlug":"abc123","tags":["bar"]}`},
	} {
		if ctx := do(s, "POST", "/rest/v3/short-urls", "application/json", c.body, "X-Api-Key", c.key); status(ctx) != 200 {
			t.Fatalf("create %s: %d %s", c.body, status(ctx), ctx.Response.Body())
		}
	}
	list := func(key, query string) (string, any) {
		ctx := do(s, "GET", "/rest/v3/short-urls?orderBy=dateCreated-ASC&"+query, "", "", "X-Api-Key", key)
		m := decodeBody(t, ctx.Response.Body())
		if status(ctx) != 200 {
			t.Fatalf("list %s: %d %s", query, status(ctx), ctx.Response.Body())
		}
		var codes []string
		for _, u := range field(m, "shortUrls.data").([]any) {
			codes = append(codes, u.(map[string]any)["shortCode"].(string))
		}
		return strings.Join(codes, ","), field(m, "shortUrls.pagination.totalItems")
	}
	for _, c := range []struct{ name, key, query, want string }{
		// Shlink test-api ListShortUrlsTest::shortUrlsAreProperlyListed (['apiKeyName'=>'author_api_key'])
		{"admin filters by the author's name", admin, "apiKeyName=author_api_key", "custom,meta"},
		// Shlink test-api ListShortUrlsTest::shortUrlsAreProperlyListed (['apiKeyName'=>'invalid'] → [])
		{"no key of that name", admin, "apiKeyName=invalid", ""},
		// Shlink test-api ListShortUrlsTest::shortUrlsAreProperlyListed ("If the author_api_key is used,
		// the apiKeyName param is ignored")
		{"the author names another key", author, "apiKeyName=valid_api_key", "custom,meta"},
		// Shlink test-api ListShortUrlsTest::shortUrlsAreProperlyListed (different API keys: author_api_key)
		{"the author's list", author, "", "custom,meta"},
		{"the author's list, searched", author, "searchTerm=shlink.io", "custom,meta"},
		{"the admin's list", admin, "", "custom,meta,abc123"},
		{"the admin names itself", admin, "apiKeyName=valid_api_key", "abc123"},
	} {
		got, total := list(c.key, c.query)
		if want := float64(len(strings.FieldsFunc(c.want, func(r rune) bool { return r == ',' }))); got != c.want || total != want {
			t.Errorf("%s: %q (total %v), want %q", c.name, got, total, c.want)
		}
	}
	// Shlink test-api ListTagsTest::expectedListOfTagsIsReturned (author_api_key: its links' tags only)
	if ctx := do(s, "GET", "/rest/v3/tags", "", "", "X-Api-Key", author); status(ctx) != 200 ||
		!strings.Contains(string(ctx.Response.Body()), `"foo"`) || strings.Contains(string(ctx.Response.Body()), `"bar"`) {
		t.Errorf("the author's tags: %d %s", status(ctx), ctx.Response.Body())
	}
	// Another key's link is, to the author, a link that does not exist.
	for _, c := range []struct{ method, path string }{
		{"GET", "/rest/v3/short-urls/abc123"},
		{"PATCH", "/rest/v3/short-urls/abc123"},
		{"DELETE", "/rest/v3/short-urls/abc123"},
		{"GET", "/rest/v3/short-urls/abc123/visits"},
	} {
		ctx := do(s, c.method, c.path, "application/json", `{"title":"x"}`, "X-Api-Key", author)
		if m := decodeBody(t, ctx.Response.Body()); status(ctx) != 404 || m["type"] != "https://shlink.io/api/error/short-url-not-found" {
			t.Errorf("%s %s with the author key: %d %s", c.method, c.path, status(ctx), ctx.Response.Body())
		}
	}
}

// shlinkNamedKey makes a key with the admin token from a POST /admin/keys
// body and returns its secret.
func shlinkNamedKey(t *testing.T, s *Server, body string) string {
	t.Helper()
	ctx := do(s, "POST", "/admin/keys", "application/json", body)
	m := decodeBody(t, ctx.Response.Body())
	if status(ctx) != 201 {
		t.Fatalf("key %s: %d %s", body, status(ctx), ctx.Response.Body())
	}
	return m["key"].(string)
}

// TestShlinkTestAPIForbiddenTagOperations follows Shlink test-api
// RenameTagTest::anErrorIsReturnedWithNonAdminApiKeys and
// DeleteTagsTest::anErrorIsReturnedWithNonAdminApiKeys: a key of one of
// Shlink's roles (limited to a domain, or to the links it created) may not
// rename or delete tags; a key of neither may.
func TestShlinkTestAPIForbiddenTagOperations(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	if ctx := do(s, "POST", "/admin/domains", "application/json", `{"domain":"example.com"}`); status(ctx) != 200 {
		t.Fatalf("domain: %d %s", status(ctx), ctx.Response.Body())
	}
	newKey := func(body string) string {
		ctx := do(s, "POST", "/admin/keys", "application/json", body)
		key, _ := decodeBody(t, ctx.Response.Body())["key"].(string)
		if key == "" {
			t.Fatalf("key %s: %d %s", body, status(ctx), ctx.Response.Body())
		}
		return key
	}
	domainKey := newKey(`{"name":"domain_api_key","scopes":["links:read","links:write"],"workspaces":["team"],"domains":["example.com"]}`)
	authorKey := newKey(`{"name":"author_api_key","scopes":["links:read","links:write"],"workspaces":["team"],"own_links_only":true}`)
	_, plainKey := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite, 0, "team")
	for _, c := range []struct {
		name, key, method, uri, body, detail string
		status                               int
	}{
		{"rename, domain key", domainKey, "PUT", "/rest/v3/tags", `{"oldName":"foo","newName":"foo_renamed"}`, "You are not allowed to rename tags", 403},
		{"rename, author key", authorKey, "PUT", "/rest/v3/tags", `{"oldName":"foo","newName":"foo_renamed"}`, "You are not allowed to rename tags", 403},
		{"delete, domain key", domainKey, "DELETE", "/rest/v3/tags?tags%5B0%5D=foo", "", "You are not allowed to delete tags", 403},
		{"delete, author key", authorKey, "DELETE", "/rest/v3/tags?tags%5B0%5D=foo", "", "You are not allowed to delete tags", 403},
		{"delete, a key of no role", plainKey, "DELETE", "/rest/v3/tags?tags%5B0%5D=foo", "", "", 204},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := do(s, c.method, c.uri, "application/json", c.body, "X-Api-Key", c.key)
			if status(ctx) != c.status {
				t.Fatalf("%d %s, want %d", status(ctx), ctx.Response.Body(), c.status)
			}
			if c.status == 403 {
				m := decodeBody(t, ctx.Response.Body())
				if m["type"] != "https://shlink.io/api/error/forbidden-tag-operation" || m["title"] != "Forbidden tag operation" || m["detail"] != c.detail {
					t.Errorf("answer %v", m)
				}
			}
		})
	}
}

package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestShlinkTestAPICreate: Shlink's create takes its inputs as Shlink
// does (CreateShortUrlTest, SingleStepCreateShortUrlTest): slugs
// slugified, tags normalised, titles trimmed and cropped, a path prefix
// and a code length honoured, a domain-limited key's domain applied, an
// existing link found, and invalid data named.
func TestShlinkTestAPICreate(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	s := newShlinkSuite(t, shlinkFixture{})
	// A link made through linkraft's own API, without dedupe, in the
	// workspace the key's Shlink creates go to.
	native := s.rr.call(t, "POST", "/api/v1/urls", `{"url":"https://example.com/made-natively"}`, bearer(s.keys["valid_api_key"]))
	nativeCode, _ := dig(mustObject(t, native, http.StatusCreated), "short_code")

	long := `"longUrl":"https://app.shlink.io"`
	pad := strings.Repeat
	create := func(test, body string, status int, want map[string]string) shlinkCase {
		return shlinkCase{test: "CreateShortUrlTest::" + test, method: "POST", path: "/rest/v2/short-urls", body: body,
			status: status, want: want}
	}
	invalid := func(test, path, body, fields string) shlinkCase {
		return shlinkCase{test: test, method: "POST", path: path, body: body, status: 400, want: map[string]string{
			"type": `"https://shlink.io/api/error/invalid-data"`, "title": `"Invalid data"`,
			"detail": `"Provided data is not valid"`, "status": "400", "invalidElements": fields}}
	}
	cases := []shlinkCase{
		create("createsNewShortUrlWhenOnlyLongUrlIsProvided", `{`+long+`}`, 200, map[string]string{
			"longUrl": `"https://app.shlink.io"`, "shortUrl": "prefix:http://s.test/",
			"meta": `{"maxVisits":null,"validSince":null,"validUntil":null}`, "domain": "null", "tags": "[]",
			"visitsSummary": `{"bots":0,"nonBots":0,"total":0}`, "deviceLongUrls": "-", "visitsCount": "-"}),
		create("createsNewShortUrlWithCustomSlug", `{`+long+`,"customSlug":"my cool slug"}`, 200, map[string]string{"shortCode": `"my-cool-slug"`}),
		create("failsToCreateShortUrlWithDuplicatedSlug (without domain)", `{`+long+`,"customSlug":"custom"}`, 400, map[string]string{
			"type": `"https://shlink.io/api/error/non-unique-slug"`, "title": `"Invalid custom slug"`, "status": "400",
			"detail": `"Provided slug \"custom\" is already in use."`, "customSlug": `"custom"`, "domain": "-"}),
		create("failsToCreateShortUrlWithDuplicatedSlug (with domain)", `{`+long+`,"customSlug":"custom-with-domain","domain":"some-domain.com"}`, 400,
			map[string]string{"detail": `"Provided slug \"custom-with-domain\" is already in use for domain \"some-domain.com\"."`,
				"customSlug": `"custom-with-domain"`, "domain": `"some-domain.com"`}),
		{test: "CreateShortUrlTest::expectedTypeIsReturnedForConflictingSlugBasedOnApiVersion (1)", method: "POST", path: "/rest/v1/short-urls",
			body: `{` + long + `,"customSlug":"custom"}`, status: 400, want: map[string]string{"type": `"https://shlink.io/api/error/non-unique-slug"`}},
		{test: "CreateShortUrlTest::expectedTypeIsReturnedForConflictingSlugBasedOnApiVersion (3)", method: "POST", path: "/rest/v3/short-urls",
			body: `{` + long + `,"customSlug":"custom"}`, status: 400, want: map[string]string{"type": `"https://shlink.io/api/error/non-unique-slug"`}},
		create("createsNewShortUrlWithTags (simple tags)", `{`+long+`,"tags":["foo","bar","baz"]}`, 200, map[string]string{"tags": `["foo","bar","baz"]`}),
		create("createsNewShortUrlWithTags (tags with spaces)", `{`+long+`,"tags":["fo o","  bar","b az"]}`, 200, map[string]string{"tags": `["fo-o","bar","b-az"]`}),
		create("createsNewShortUrlWithTags (tags with special chars)", `{`+long+`,"tags":["UUU","Aäa"]}`, 200, map[string]string{"tags": `["uuu","aäa"]`}),
		create("createsNewShortUrlWithVisitsLimit", `{`+long+`,"maxVisits":3}`, 200, map[string]string{"meta.maxVisits": "3"}),
		create("createsShortUrlWithValidSince", `{`+long+`,"validSince":"2100-01-01T00:00:00+00:00"}`, 200,
			map[string]string{"meta.validSince": `"2100-01-01T00:00:00+00:00"`}),
		// lonUrlSupportsDifferentTypesOfSchemas, but for file:, which linkraft
		// refuses on purpose: it reads the visitor's own files
		// (docs/COMPATIBILITY.md, "Input rules that stay linkraft's").
		create("lonUrlSupportsDifferentTypesOfSchemas (mailto)", `{"longUrl":"mailto:foo@example.com"}`, 200, map[string]string{"longUrl": `"mailto:foo@example.com"`}),
		create("lonUrlSupportsDifferentTypesOfSchemas (https)", `{"longUrl":"https://example.com"}`, 200, map[string]string{"longUrl": `"https://example.com"`}),
		create("lonUrlSupportsDifferentTypesOfSchemas (deeplink)", `{"longUrl":"shlink://some/path"}`, 200, map[string]string{"longUrl": `"shlink://some/path"`}),
		create("lonUrlSupportsDifferentTypesOfSchemas (file)", `{"longUrl":"file:///foo/bar"}`, 400, map[string]string{
			"type": `"https://shlink.io/api/error/invalid-data"`, "invalidElements": `["longUrl"]`}),
		// A code of emoji is taken (docs/API.md "Custom codes").
		create("canCreateShortUrlsWithEmojis", `{"longUrl":"https://emojipedia.org/fire/","customSlug":"🦣🦣🦣"}`, 200, map[string]string{
			"shortCode": `"🦣🦣🦣"`, "shortUrl": `"http://s.test/🦣🦣🦣"`}),
		create("titleIsCroppedIfTooLong (foo)", `{`+long+`,"title":"foo"}`, 200, map[string]string{"title": `"foo"`}),
		create("titleIsCroppedIfTooLong (padded)", `{`+long+`,"title":"`+pad(" ", 298)+"bar"+pad(" ", 299)+`"}`, 200, map[string]string{"title": `"bar"`}),
		create("titleIsCroppedIfTooLong (511)", `{`+long+`,"title":"`+pad("a", 511)+`"}`, 200, map[string]string{"title": `"` + pad("a", 511) + `"`}),
		create("titleIsCroppedIfTooLong (512)", `{`+long+`,"title":"`+pad("b", 512)+`"}`, 200, map[string]string{"title": `"` + pad("b", 512) + `"`}),
		create("titleIsCroppedIfTooLong (513)", `{`+long+`,"title":"`+pad("c", 513)+`"}`, 200, map[string]string{"title": `"` + pad("c", 512) + `"`}),
		create("titleIsCroppedIfTooLong (600)", `{`+long+`,"title":"`+pad("d", 600)+`"}`, 200, map[string]string{"title": `"` + pad("d", 512) + `"`}),
		create("titleIsCroppedIfTooLong (800)", `{`+long+`,"title":"`+pad("e", 800)+`"}`, 200, map[string]string{"title": `"` + pad("e", 512) + `"`}),
		// linkraft also keeps at most 1024 bytes of a title (docs/COMPATIBILITY.md,
		// Create): 512 characters of 3 bytes are cropped to the 341 that fit.
		create("titleIsCroppedIfTooLong (512 wide characters)", `{`+long+`,"title":"`+pad("€", 512)+`"}`, 200, map[string]string{"title": `"` + pad("€", 341) + `"`}),
		create("prefixCanBeSet (no slug)", `{"longUrl":"https://example.com","pathPrefix":"foo/b  ar-baz","customSlug":null}`, 200,
			map[string]string{"shortCode": "prefix:foo-b--ar-baz"}),
		create("prefixCanBeSet (slug)", `{"longUrl":"https://example.com","pathPrefix":"foo/b  ar-baz","customSlug":"my-custom-slug"}`, 200,
			map[string]string{"shortCode": `"foo-b--ar-bazmy-custom-slug"`}),
		// Shlink's shortCodeLength, at least 4 (swagger's ShortUrl create body).
		create("shortCodeLength (swagger)", `{`+long+`,"shortCodeLength":9}`, 200, map[string]string{"shortCode": "len:9"}),
		create("shortCodeLength below 4 (swagger)", `{`+long+`,"shortCodeLength":3}`, 400, map[string]string{"invalidElements": `["shortCodeLength"]`}),
		create("defaultDomainIsDroppedIfProvided", `{`+long+`,"domain":"s.test"}`, 200, map[string]string{"domain": "null"}),
		{test: "CreateShortUrlTest::apiKeyDomainIsEnforced (no domain)", key: "domain_api_key", method: "POST", path: "/rest/v2/short-urls",
			body: `{` + long + `}`, status: 200, want: map[string]string{"domain": `"example.com"`}},
		{test: "CreateShortUrlTest::apiKeyDomainIsEnforced (invalid domain)", key: "domain_api_key", method: "POST", path: "/rest/v2/short-urls",
			body: `{` + long + `,"domain":"this-will-be-overwritten.com"}`, status: 200, want: map[string]string{"domain": `"example.com"`}},
		{test: "CreateShortUrlTest::apiKeyDomainIsEnforced (example domain)", key: "domain_api_key", method: "POST", path: "/rest/v2/short-urls",
			body: `{` + long + `,"domain":"example.com"}`, status: 200, want: map[string]string{"domain": `"example.com"`}},
		create("returnsAnExistingShortUrlWhenRequested (a link made through linkraft's own API)",
			`{"longUrl":"https://example.com/made-natively","findIfExists":true}`, 200, map[string]string{"shortCode": jsonString(nativeCode)}),
		create("returnsAnExistingShortUrlWhenRequested (only long URL)", `{"longUrl":"https://app.shlink.io","findIfExists":true}`, 200,
			map[string]string{"longUrl": `"https://app.shlink.io"`}),
		create("returnsErrorWhenRequestingReturnExistingButCustomSlugIsInUse (without domain)",
			`{"longUrl":"https://www.alejandrocelaya.com","customSlug":"custom","findIfExists":true}`, 400,
			map[string]string{"type": `"https://shlink.io/api/error/non-unique-slug"`}),
		create("returnsErrorWhenRequestingReturnExistingButCustomSlugIsInUse (with domain)",
			`{"longUrl":"https://www.alejandrocelaya.com","customSlug":"custom-with-domain","domain":"some-domain.com","findIfExists":true}`, 400,
			map[string]string{"type": `"https://shlink.io/api/error/non-unique-slug"`, "domain": `"some-domain.com"`}),
		create("createsNewShortUrlIfRequestedToFindButThereIsNoMatch", `{"longUrl":"https://www.alejandrocelaya.com/nothing-like-it","findIfExists":true}`, 200,
			map[string]string{"longUrl": `"https://www.alejandrocelaya.com/nothing-like-it"`}),
		invalid("CreateShortUrlTest::failsToCreateShortUrlWithoutLongUrl (missing long url v2)", "/rest/v2/short-urls", `{}`, `["longUrl"]`),
		invalid("CreateShortUrlTest::failsToCreateShortUrlWithoutLongUrl (missing long url v3)", "/rest/v3/short-urls", `{}`, `["longUrl"]`),
		invalid("CreateShortUrlTest::failsToCreateShortUrlWithoutLongUrl (empty long url v2)", "/rest/v2/short-urls", `{"longUrl":null}`, `["longUrl"]`),
		invalid("CreateShortUrlTest::failsToCreateShortUrlWithoutLongUrl (empty long url v3)", "/rest/v3/short-urls", `{"longUrl":"  "}`, `["longUrl"]`),
		invalid("CreateShortUrlTest::failsToCreateShortUrlWithoutLongUrl (missing url schema v2)", "/rest/v2/short-urls", `{"longUrl":"foo.com"}`, `["longUrl"]`),
		invalid("CreateShortUrlTest::failsToCreateShortUrlWithoutLongUrl (missing url schema v3)", "/rest/v3/short-urls", `{"longUrl":"foo.com"}`, `["longUrl"]`),
		invalid("CreateShortUrlTest::failsToCreateShortUrlWithInvalidDomain (a bad port)", "/rest/v2/short-urls",
			`{"longUrl":"https://app.shlink.io","domain":"localhost:80000"}`, `["domain"]`),
		invalid("CreateShortUrlTest::failsToCreateShortUrlWithInvalidDomain (junk)", "/rest/v2/short-urls",
			`{"longUrl":"https://app.shlink.io","domain":"???/&%$&"}`, `["domain"]`),
		invalid("CreateShortUrlTest::failsToCreateShortUrlWithInvalidDomain (an address no one registered)", "/rest/v2/short-urls",
			`{"longUrl":"https://app.shlink.io","domain":"127.0.0.1"}`, `["domain"]`),
		// Every bad field is named, as Shlink's input filter names them.
		invalid("CreateShortUrlTest (every bad field)", "/rest/v3/short-urls", `{"validSince":"soon","customSlug":"a?b"}`, `["longUrl","customSlug","validSince"]`),
		invalid("CreateShortUrlTest (a field of the wrong type)", "/rest/v3/short-urls", `{"longUrl":"https://e.example","maxVisits":"not_a_number"}`, `["maxVisits"]`),
		{test: "SingleStepCreateShortUrlTest::createsNewShortUrlWithExpectedResponse (txt format)", key: "-", method: "GET",
			path:   "/rest/v3/short-urls/shorten?format=txt&longUrl=https%3A%2F%2Fapp.shlink.io&apiKey=" + s.keys["valid_api_key"],
			status: 200, want: map[string]string{"Content-Type": "text/plain", "body": "prefix:http://s.test/"}},
		{test: "SingleStepCreateShortUrlTest::createsNewShortUrlWithExpectedResponse (json format)", key: "-", method: "GET",
			path:   "/rest/v3/short-urls/shorten?format=json&longUrl=https%3A%2F%2Fapp.shlink.io&apiKey=" + s.keys["valid_api_key"],
			status: 200, want: map[string]string{"Content-Type": "application/json", "longUrl": `"https://app.shlink.io"`}},
		{test: "SingleStepCreateShortUrlTest::createsNewShortUrlWithExpectedResponse (<empty> format)", key: "-", method: "GET",
			path:   "/rest/v3/short-urls/shorten?longUrl=https%3A%2F%2Fapp.shlink.io&apiKey=" + s.keys["valid_api_key"],
			status: 200, want: map[string]string{"Content-Type": "application/json", "shortUrl": "prefix:http://s.test/"}},
		{test: "SingleStepCreateShortUrlTest::authorizationErrorIsReturnedIfNoApiKeyIsSent", key: "-", method: "GET",
			path: "/rest/v3/short-urls/shorten?format=json&longUrl=https%3A%2F%2Fapp.shlink.io", status: 401, want: map[string]string{
				"type": `"https://shlink.io/api/error/missing-authentication"`, "title": `"Invalid authorization"`, "status": "401",
				"detail": `"Expected authentication to be provided in \"apiKey\" query param"`}},
	}
	s.run(cases)
	// The slugified slug is read, and redirects, on every node.
	for range s.rr.nodes {
		s.run([]shlinkCase{{test: "CreateShortUrlTest::createsNewShortUrlWithCustomSlug (read on the next node)", method: "GET",
			path: "/rest/v3/short-urls/my-cool-slug", status: 200, want: map[string]string{"longUrl": `"https://app.shlink.io"`}}})
		s.rr.next().requireRedirect(t, "my-cool-slug", "https://app.shlink.io")
	}
}

// mustObject is the JSON object of an answer of status want.
func mustObject(t *testing.T, r response, want int) map[string]any {
	t.Helper()
	m, ok := jsonObject(r)
	if r.status != want || !ok {
		t.Fatalf("%v, want %d and a JSON object", r, want)
	}
	return m
}

// jsonString is v as a JSON string.
func jsonString(v any) string {
	s, _ := v.(string)
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

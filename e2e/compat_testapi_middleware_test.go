package e2e

import (
	"testing"
	"time"
)

// TestShlinkTestAPIMiddlewares: what Shlink's middlewares answer on every
// route (module/Rest/test-api/Middleware): the malformed body, CORS,
// implicit OPTIONS, the request id and authentication.
func TestShlinkTestAPIMiddlewares(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	s := newShlinkSuite(t, shlinkFixture{})
	noCORS := map[string]string{"Access-Control-Allow-Origin": "-", "Access-Control-Allow-Methods": "-",
		"Access-Control-Max-Age": "-", "Access-Control-Allow-Headers": "-", "Access-Control-Allow-Credentials": "-"}
	preflight := "Origin: foo.com\nAccess-Control-Request-Headers: Authorization"
	missing := map[string]string{"type": `"https://shlink.io/api/error/missing-authentication"`, "status": "401",
		"title": `"Invalid authorization"`, "detail": `"Expected one of the following authentication headers, [\"X-Api-Key\"], but none were provided"`}
	invalid := map[string]string{"type": `"https://shlink.io/api/error/invalid-api-key"`, "status": "401",
		"title": `"Invalid API key"`, "detail": `"Provided API key does not exist or is invalid."`}
	s.run([]shlinkCase{
		{test: "BodyParserTest::returnsErrorWhenRequestBodyIsInvalidJson", method: "POST", path: "/rest/v3/short-urls", body: `{"foo`,
			status: 400, want: map[string]string{"type": `"https://shlink.io/api/error/malformed-request-body"`,
				"title": `"Malformed request body"`, "detail": `"Provided request does not contain a valid JSON body."`, "status": "400"}},
		{test: "CorsTest::responseDoesNotIncludeCorsHeadersWhenOriginIsNotSent", method: "GET", path: "/rest/v3/short-urls",
			status: 200, want: noCORS},
		{test: "CorsTest::responseIncludesCorsHeadersIfOriginIsSent (foo.com)", method: "GET", path: "/rest/v3/short-urls",
			header: "Origin: foo.com", status: 200, want: map[string]string{"Access-Control-Allow-Origin": "*",
				"Access-Control-Allow-Methods": "-", "Access-Control-Max-Age": "-", "Access-Control-Allow-Headers": "-",
				"Access-Control-Allow-Credentials": "-"}},
		{test: "CorsTest::responseIncludesCorsHeadersIfOriginIsSent (bar.io)", method: "GET", path: "/rest/v3/foo/bar",
			header: "Origin: bar.io", status: 404, want: map[string]string{"Access-Control-Allow-Origin": "*",
				"Access-Control-Allow-Methods": "-", "status": "404", "title": `"Not Found"`}},
		{test: "CorsTest::responseIncludesCorsHeadersIfOriginIsSent (baz.dev)", method: "GET", path: "/rest/v3/short-urls",
			header: "Origin: baz.dev", status: 200, want: map[string]string{"Access-Control-Allow-Origin": "*"}},
		{test: "CorsTest::preflightRequestsIncludeExtraCorsHeaders (invalid route)", method: "OPTIONS", path: "/rest/v3/foo/bar",
			header: preflight, status: 204, want: map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Max-Age": "3600",
				"Access-Control-Allow-Methods": "GET,POST,PUT,PATCH,DELETE", "Access-Control-Allow-Headers": "Authorization"}},
		{test: "CorsTest::preflightRequestsIncludeExtraCorsHeaders (short URLs route)", method: "OPTIONS", path: "/rest/v3/short-urls",
			header: preflight, status: 204, want: map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Max-Age": "3600",
				"Access-Control-Allow-Methods": "GET,POST", "Access-Control-Allow-Headers": "Authorization"}},
		{test: "CorsTest::preflightRequestsIncludeExtraCorsHeaders (tags route)", method: "OPTIONS", path: "/rest/v3/tags",
			header: preflight, status: 204, want: map[string]string{"Access-Control-Allow-Methods": "GET,DELETE,PUT",
				"Access-Control-Allow-Headers": "Authorization"}},
		{test: "CorsTest::preflightRequestsIncludeExtraCorsHeaders (health route)", method: "OPTIONS", path: "/rest/v3/health",
			header: preflight, status: 204, want: map[string]string{"Access-Control-Allow-Methods": "GET",
				"Access-Control-Allow-Headers": "Authorization"}},
		{test: "ImplicitOptionsTest::optionsRequestsReturnEmptyResponse", method: "OPTIONS", path: "/rest/v3/short-urls",
			status: 204, want: map[string]string{"body": "", "Access-Control-Allow-Origin": "-"}},
		{test: "ImplicitOptionsTest::optionsRequestsReturnAllowedMethodsForEndpoint", method: "OPTIONS", path: "/rest/v3/short-urls",
			status: 204, want: map[string]string{"Allow": "GET,POST"}},
		{test: "RequestIdTest::keepsProvidedRequestId", method: "GET", path: "/rest/v3/health", header: "X-Request-Id: foobar",
			status: 200, want: map[string]string{"X-Request-Id": "foobar"}},
		// The id is echoed on a path no route takes too; one with a space is
		// replaced, never echoed into the answer (docs/COMPATIBILITY.md, X-Request-Id).
		{test: "RequestIdTest::keepsProvidedRequestId (a path no route takes)", method: "GET", path: "/rest/v2/nothing",
			header: "X-Request-Id: abc-1", status: 404, want: map[string]string{"X-Request-Id": "abc-1"}},
		{test: "RequestIdTest::generatesRequestId (instead of one with a space)", method: "GET", path: "/rest/v3/health",
			header: "X-Request-Id: a b", status: 200, want: map[string]string{"X-Request-Id": "len:36"}},
		{test: "AuthenticationTest::authorizationErrorIsReturnedIfNoApiKeyIsSent (version 1)", key: "-", method: "GET",
			path: "/rest/v1/short-urls", status: 401, want: missing},
		{test: "AuthenticationTest::authorizationErrorIsReturnedIfNoApiKeyIsSent (version 2)", key: "-", method: "GET",
			path: "/rest/v2/short-urls", status: 401, want: missing},
		{test: "AuthenticationTest::authorizationErrorIsReturnedIfNoApiKeyIsSent (version 3)", key: "-", method: "GET",
			path: "/rest/v3/short-urls", status: 401, want: missing},
		{test: "AuthenticationTest::apiKeyErrorIsReturnedWhenProvidedApiKeyIsInvalid (key which does not exist)", key: "invalid",
			method: "GET", path: "/rest/v2/short-urls", status: 401, want: invalid},
		{test: "AuthenticationTest::apiKeyErrorIsReturnedWhenProvidedApiKeyIsInvalid (key which is disabled)", key: "disabled_api_key",
			method: "GET", path: "/rest/v2/short-urls", status: 401, want: invalid},
		{test: "AuthenticationTest::apiKeyErrorIsReturnedWhenProvidedApiKeyIsInvalid (version 3)", key: "disabled_api_key",
			method: "GET", path: "/rest/v3/short-urls", status: 401, want: invalid},
		// Shlink's health needs no key (docs/COMPATIBILITY.md's table: "no key (as Shlink)").
		{test: "AuthenticationTest (health needs no key)", key: "-", method: "GET", path: "/rest/v3/health",
			status: 200, want: map[string]string{"status": `"pass"`}},
	})
	// The expired key was made to expire two seconds after the fixture began.
	time.Sleep(time.Until(s.expiresAt.Add(100 * time.Millisecond)))
	s.run([]shlinkCase{
		{test: "AuthenticationTest::apiKeyErrorIsReturnedWhenProvidedApiKeyIsInvalid (key which is expired)", key: "expired_api_key",
			method: "GET", path: "/rest/v2/short-urls", status: 401, want: invalid},
	})
}

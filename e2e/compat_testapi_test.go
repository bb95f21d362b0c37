package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestShlinkTestAPIAcrossNodes runs cases of Shlink's own API test suite
// (module/Rest/test-api in shlinkio/shlink, named in each case) against a
// cluster of three linkraft processes, each request through the next
// node: a write through one node is read through another at once. The
// in-process ports of the whole suite are httpd's compat_shlink_testapi
// tests; these are the cases whose answer crosses nodes.
func TestShlinkTestAPIAcrossNodes(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes, key := compatCluster(t)
	rr := &roundRobin{nodes: nodes}
	call := func(method, path, body string, header http.Header) response {
		t.Helper()
		h := http.Header{"X-Api-Key": {key}}
		for k, v := range header {
			h[k] = v
		}
		return rr.call(t, method, path, body, h)
	}
	object := func(r response) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Fatalf("not a JSON object: %v", r)
		}
		return m
	}

	// A link made through linkraft's own API, without dedupe.
	native := call(http.MethodPost, "/api/v1/urls", `{"url":"https://example.com/made-natively","workspace":"team"}`, bearer(key))
	if native.status != http.StatusCreated {
		t.Fatalf("native create: %v", native)
	}
	nativeCode := object(native)["short_code"]

	cases := []struct {
		name, test         string // the case, and the Shlink test it follows
		method, path, body string
		header             http.Header
		status             int
		want               map[string]any // top-level fields of the JSON answer
		wantHeader         map[string]string
	}{
		{"slugified custom slug", "CreateShortUrlTest::createsNewShortUrlWithCustomSlug",
			"POST", "/rest/v3/short-urls", `{"longUrl":"https://example.com/slug","customSlug":"my cool slug"}`, nil,
			200, map[string]any{"shortCode": "my-cool-slug"}, nil},
		{"read on another node", "ResolveShortUrlTest::shortUrlIsProperlyResolvedEvenWhenNotEnabled",
			"GET", "/rest/v3/short-urls/my-cool-slug", "", nil, 200, map[string]any{"longUrl": "https://example.com/slug"}, nil},
		{"duplicated slug", "CreateShortUrlTest::failsToCreateShortUrlWithDuplicatedSlug",
			"POST", "/rest/v3/short-urls", `{"longUrl":"https://example.com/other","customSlug":"my-cool-slug"}`, nil,
			400, map[string]any{"type": "https://shlink.io/api/error/non-unique-slug", "detail": `Provided slug "my-cool-slug" is already in use.`}, nil},
		{"normalised tags", "CreateShortUrlTest::createsNewShortUrlWithTags",
			"POST", "/rest/v3/short-urls", `{"longUrl":"https://example.com/tags","tags":["fo o","  bar","b az"]}`, nil,
			200, map[string]any{"tags": []any{"fo-o", "bar", "b-az"}}, nil},
		{"the existing link, made natively", "CreateShortUrlTest::returnsAnExistingShortUrlWhenRequested",
			"POST", "/rest/v3/short-urls", `{"longUrl":"https://example.com/made-natively","findIfExists":true}`, nil,
			200, map[string]any{"shortCode": nativeCode}, nil},
		{"a tag filter in PHP's form", "ListShortUrlsTest::shortUrlsAreProperlyListed (tags)",
			"GET", "/rest/v3/short-urls?tags%5B0%5D=bar", "", nil, 200, nil, nil},
		{"tags paginated", "ListTagsTest::expectedListOfTagsIsReturned",
			"GET", "/rest/v3/tags?page=1&itemsPerPage=2", "", nil, 200, nil, nil},
		{"malformed body", "BodyParserTest::returnsErrorWhenRequestBodyIsInvalidJson",
			"POST", "/rest/v3/short-urls", `{"foo`, nil, 400, map[string]any{"type": "https://shlink.io/api/error/malformed-request-body"}, nil},
		{"no key", "AuthenticationTest::authorizationErrorIsReturnedIfNoApiKeyIsSent",
			"GET", "/rest/v3/short-urls", "", http.Header{"X-Api-Key": nil}, 401,
			map[string]any{"type": "https://shlink.io/api/error/missing-authentication"}, nil},
		{"a wrong key", "AuthenticationTest::apiKeyErrorIsReturnedWhenProvidedApiKeyIsInvalid",
			"GET", "/rest/v3/short-urls", "", http.Header{"X-Api-Key": {"lr_nope"}}, 401,
			map[string]any{"type": "https://shlink.io/api/error/invalid-api-key"}, nil},
		{"preflight echoes the asked headers", "CorsTest::preflightRequestsIncludeExtraCorsHeaders",
			"OPTIONS", "/rest/v3/short-urls", "", http.Header{"Origin": {"foo.com"}, "Access-Control-Request-Headers": {"Authorization"}},
			204, nil, map[string]string{"Access-Control-Allow-Headers": "Authorization", "Access-Control-Allow-Methods": "GET,POST"}},
		{"request id kept", "RequestIdTest::keepsProvidedRequestId",
			"GET", "/rest/v3/health", "", http.Header{"X-Request-Id": {"foobar"}}, 200, nil, map[string]string{"X-Request-Id": "foobar"}},
		{"delete", "DeleteShortUrlTest::properShortUrlIsDeleted",
			"DELETE", "/rest/v3/short-urls/my-cool-slug", "", nil, 204, nil, nil},
		{"deleted, on the next node", "DeleteShortUrlTest::notFoundErrorIsReturnWhenDeletingByInvalidValues",
			"GET", "/rest/v3/short-urls/my-cool-slug", "", nil, 404, map[string]any{"type": "https://shlink.io/api/error/short-url-not-found"}, nil},
	}
	for _, c := range cases {
		r := call(c.method, c.path, c.body, c.header)
		if r.status != c.status {
			t.Fatalf("%s (Shlink %s): %v, want %d", c.name, c.test, r, c.status)
		}
		for k, want := range c.want {
			if got := object(r)[k]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s (Shlink %s): %s = %v, want %v", c.name, c.test, k, got, want)
			}
		}
		for k, want := range c.wantHeader {
			if got := r.header.Get(k); got != want {
				t.Errorf("%s (Shlink %s): %s: %q, want %q", c.name, c.test, k, got, want)
			}
		}
		if id := r.header.Get("X-Request-Id"); id == "" { // RequestIdTest::generatesRequestId
			t.Errorf("%s: no X-Request-Id", c.name)
		}
		switch c.name {
		case "a tag filter in PHP's form":
			data := object(r)["shortUrls"].(map[string]any)["data"].([]any)
			if len(data) != 1 || !strings.HasSuffix(data[0].(map[string]any)["longUrl"].(string), "/tags") {
				t.Errorf("tags[0]=bar listed %v, want the one link tagged bar", data)
			}
		case "tags paginated":
			p, _ := object(r)["tags"].(map[string]any)["pagination"].(map[string]any)
			if p["itemsPerPage"] != 2.0 || p["totalItems"] != 3.0 {
				t.Errorf("tags pagination %v, want 2 per page of 3", p)
			}
		}
	}
}

// roundRobin sends each request through the next of its nodes, so that a
// write through one node is read through another right after.
type roundRobin struct {
	nodes []*node
	turn  int
}

// next is the node the next request goes through.
func (rr *roundRobin) next() *node {
	n := rr.nodes[rr.turn%len(rr.nodes)]
	rr.turn++
	return n
}

// call sends a request with a JSON body ("" for none) through the next
// node, with no credential but what header names.
func (rr *roundRobin) call(t *testing.T, method, path, body string, header http.Header) response {
	t.Helper()
	h := http.Header{"Authorization": nil, "Content-Type": {"application/json"}}
	for k, v := range header {
		h[k] = v
	}
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	return rr.next().request(t, method, path, h, b)
}

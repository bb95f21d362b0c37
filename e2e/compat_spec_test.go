package e2e

import (
	"crypto/md5"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// specCase is one documented call of Kutt, YOURLS or Bitly and what its
// answer must hold.
type specCase struct {
	spec               string // the part of the spec or docs it follows
	method, path, body string // "{name}" in path or body is a value kept before
	header             http.Header
	status             int
	want               map[string]string // as shlinkCase's
	keep               map[string]string // name → dotted path of a value to keep
	eventually         bool              // a count: retried until it holds
}

// specRun sends each case through the next node of rr, in order.
type specRun struct {
	t    *testing.T
	rr   *roundRobin
	kept map[string]string
}

func (s *specRun) run(cases []specCase) {
	s.t.Helper()
	for _, c := range cases {
		s.t.Run(c.spec, func(t *testing.T) {
			var r response
			var problems []string
			deadline := time.Now().Add(clickWaitTimeout)
			for {
				r = s.rr.call(t, c.method, s.fill(c.path), s.fill(c.body), c.header)
				want := map[string]string{}
				for k, v := range c.want {
					want[k] = s.fill(v)
				}
				problems = answerProblems(r, want)
				if r.status != c.status {
					problems = append(problems, fmt.Sprintf("%s %s: %v, want %d", c.method, c.path, r, c.status))
				}
				if len(problems) == 0 || !c.eventually || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			for _, p := range problems {
				t.Error(p)
			}
			doc, _ := jsonObject(r)
			for name, path := range c.keep {
				v, _ := dig(doc, path)
				s.kept[name] = fmt.Sprint(v)
			}
		})
	}
}

// fill puts the kept values in place of their "{name}".
func (s *specRun) fill(text string) string {
	for name, v := range s.kept {
		text = strings.ReplaceAll(text, "{"+name+"}", v)
	}
	return text
}

// newSpecRun starts three nodes with sho.rt as their default domain and
// a key of workspace team, kept as "key".
func newSpecRun(t *testing.T) *specRun {
	t.Helper()
	nodes := startCluster(t, 3, map[string]string{"base-url": "http://sho.rt"})
	k := createKey(t, nodes[0], `{"name":"specs","scopes":["links:read","links:write","stats:read"],"workspaces":["team"]}`)
	return &specRun{t: t, rr: &roundRobin{nodes: nodes}, kept: map[string]string{"key": k.Key}}
}

// visitCase is a visit of code through the next node, which must
// redirect to target (or, for "", find no link).
func visitCase(spec, code, target string) specCase {
	c := specCase{spec: spec + " (GET /" + code + ")", method: "GET", path: "/" + code,
		header: http.Header{"User-Agent": {"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"}},
		status: http.StatusFound, want: map[string]string{"Location": target}}
	if target == "" {
		c.status, c.want = http.StatusNotFound, nil
	}
	return c
}

// TestKuttSpecAcrossNodes runs Kutt v2's documented API (docs/api/api.js
// and the validators of server/handlers) against three linkraft
// processes, each request through the next node.
func TestKuttSpecAcrossNodes(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	s := newSpecRun(t)
	kutt := http.Header{"X-Api-Key": {s.kept["key"]}}
	c := func(spec, method, path, body string, status int, want map[string]string) specCase {
		return specCase{spec: spec, method: method, path: path, body: body, header: kutt, status: status, want: want}
	}
	created := c("api.js POST /links (validators createLink: addProtocol)", "POST", "/api/v2/links",
		`{"target":"example.com/kutt-spec","customurl":"kutt-spec","description":"Kutt spec"}`, 201, map[string]string{
			"target": `"http://example.com/kutt-spec"`, "address": `"kutt-spec"`, "description": `"Kutt spec"`, "banned": "false",
			"password": "false", "visit_count": "0", "link": `"http://sho.rt/kutt-spec"`, "expire_in": "null",
			"id": "prefix:6c6b7266-", "created_at": "prefix:20", "updated_at": "prefix:20"})
	created.keep = map[string]string{"id": "id"}
	s.run([]specCase{
		c("api.js GET /health", "GET", "/api/v2/health", "", 200, map[string]string{"body": "OK"}),
		{spec: "api.js security: X-API-KEY (none)", method: "GET", path: "/api/v2/links", status: 401,
			want: map[string]string{"error": `"Unauthorized."`}},
		created,
		c("api.js POST /links: reuse", "POST", "/api/v2/links", `{"target":"http://example.com/kutt-spec","reuse":true}`, 200,
			map[string]string{"id": `"{id}"`}),
		c("validators createLink: target missing", "POST", "/api/v2/links", `{}`, 400, map[string]string{"error": `"Target is missing."`}),
		c("validators createLink: customurl in use", "POST", "/api/v2/links", `{"target":"https://example.com/2","customurl":"kutt-spec"}`, 400,
			map[string]string{"error": `"Custom URL is already in use."`}),
		c("validators createLink: customurl over 64", "POST", "/api/v2/links",
			`{"target":"https://example.com/2","customurl":"`+strings.Repeat("a", 65)+`"}`, 400,
			map[string]string{"error": `"Custom URL length must be between 1 and 64."`}),
		c("validators createLink: password, expire_in", "POST", "/api/v2/links",
			`{"target":"https://example.com/kutt-protected","customurl":"kutt-protected","password":"s3cret-pass","expire_in":"2 hours"}`, 201,
			map[string]string{"password": "true", "expire_in": "prefix:20"}),
		c("validators createLink: a password of 3 (refused: docs/COMPATIBILITY.md, Kutt create)", "POST", "/api/v2/links",
			`{"target":"https://example.com/kutt-short-password","password":"abc"}`, 400, map[string]string{"error": "prefix:"}),
		c("api.js GET /links (parseQuery: limit above 50 is 50)", "GET", "/api/v2/links?limit=100", "", 200,
			map[string]string{"limit": "50", "skip": "0", "total": "2", "data": "len:2", "data.0.address": `"kutt-protected"`}),
		c("api.js GET /links: skip and limit", "GET", "/api/v2/links?limit=1&skip=1", "", 200,
			map[string]string{"limit": "1", "skip": "1", "data": "len:1", "data.0.address": `"kutt-spec"`}),
		c("links.handler.js get: search", "GET", "/api/v2/links?search=protected", "", 200,
			map[string]string{"total": "1", "data.0.address": `"kutt-protected"`}),
		c("api.js GET /links on /api (the unversioned mount)", "GET", "/api/links", "", 200, map[string]string{"total": "2"}),
		c("api.js PATCH /links/{id}: target and description", "PATCH", "/api/v2/links/{id}",
			`{"target":"https://example.com/kutt-edited","description":"edited"}`, 200,
			map[string]string{"target": `"https://example.com/kutt-edited"`, "description": `"edited"`}),
		c("validators editLink: nothing to change", "PATCH", "/api/v2/links/{id}", `{}`, 400,
			map[string]string{"error": `"Should at least update one field."`}),
		c("validators editLink: address", "PATCH", "/api/v2/links/{id}", `{"address":"kutt-renamed"}`, 200,
			map[string]string{"address": `"kutt-renamed"`, "id": `"{id}"`}),
		visitCase("the renamed link redirects on the next node", "kutt-renamed", "https://example.com/kutt-edited"),
		visitCase("the old address is retired", "kutt-spec", ""),
		c("api.js GET /links/{id}/stats (visit.queries.js)", "GET", "/api/v2/links/{id}/stats", "", 200, map[string]string{
			"lastDay.views": "len:24", "lastWeek.views": "len:7", "lastMonth.views": "len:30", "lastYear.views": "len:12",
			"address": `"kutt-renamed"`}),
		{spec: "api.js GET /links/{id}/stats: the visit counted", method: "GET", path: "/api/v2/links/{id}/stats", header: kutt,
			status: 200, want: map[string]string{"lastDay.total": "1", "visit_count": "1"}, eventually: true},
		c("api.js GET /users", "GET", "/api/v2/users", "", 200, map[string]string{"json": `{"apikey":"","email":"","domains":[]}`}),
		c("api.js POST /domains (refused: docs/COMPATIBILITY.md, Kutt)", "POST", "/api/v2/domains", `{"address":"kutt.example"}`, 501, nil),
		c("api.js DELETE /domains/{id} (refused: docs/COMPATIBILITY.md, Kutt)", "DELETE", "/api/v2/domains/1", "", 501, nil),
		c("api.js DELETE /links/{id}", "DELETE", "/api/v2/links/{id}", "", 200,
			map[string]string{"message": `"Link has been deleted successfully."`}),
		visitCase("the deleted link is gone on the next node", "kutt-renamed", ""),
		c("api.js DELETE /links/{id}: not found (docs/COMPATIBILITY.md: 404, not Kutt's 500)", "DELETE", "/api/v2/links/{id}", "", 404,
			map[string]string{"error": `"Could not find the link."`}),
	})
}

// TestBitlySpecAcrossNodes runs Bitly v4's shorten, bitlinks (create, get,
// update, delete), expand, groups, a group's bitlinks and clicks (the
// 4.0.0 OpenAPI, and the current API's DELETE) against three linkraft
// processes, each request through the next node.
func TestBitlySpecAcrossNodes(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	s := newSpecRun(t)
	bitly := http.Header{"Authorization": {"Bearer " + s.kept["key"]}}
	c := func(spec, method, path, body string, status int, want map[string]string) specCase {
		return specCase{spec: spec, method: method, path: path, body: body, header: bitly, status: status, want: want}
	}
	shorten := c("POST /v4/shorten", "POST", "/v4/shorten", `{"long_url":"https://example.com/bitly-spec"}`, 201,
		map[string]string{"long_url": `"https://example.com/bitly-spec"`, "id": "prefix:sho.rt/", "link": "prefix:http://sho.rt/"})
	shorten.keep = map[string]string{"bitlink": "id"}
	created := c("POST /v4/bitlinks: title and tags", "POST", "/v4/bitlinks",
		`{"long_url":"https://example.com/bitly-created","title":"Made","tags":["one","two"]}`, 201,
		map[string]string{"title": `"Made"`, "tags": `["one","two"]`, "archived": "false", "deeplinks": "[]"})
	created.keep = map[string]string{"created": "id"}
	groups := c("GET /v4/groups", "GET", "/v4/groups", "", 200, map[string]string{"groups": "len:1", "groups.0.guid": `"team"`})
	groups.keep = map[string]string{"guid": "groups.0.guid"}
	s.run([]specCase{
		shorten,
		c("POST /v4/shorten: the same long URL (200, the existing bitlink)", "POST", "/v4/shorten",
			`{"long_url":"https://example.com/bitly-spec"}`, 200, map[string]string{"id": `"{bitlink}"`}),
		c("POST /v4/shorten: no long_url", "POST", "/v4/shorten", `{}`, 400, map[string]string{"message": `"INVALID_ARG_LONG_URL"`}),
		created,
		c("POST /v4/bitlinks: deeplinks (refused: docs/COMPATIBILITY.md, Bitly)", "POST", "/v4/bitlinks",
			`{"long_url":"https://example.com/deep","deeplinks":[{"app_uri_path":"/x"}]}`, 400, map[string]string{"message": `"INVALID_ARG_DEEPLINKS"`}),
		c("POST /v4/expand", "POST", "/v4/expand", `{"bitlink_id":"{bitlink}"}`, 200,
			map[string]string{"long_url": `"https://example.com/bitly-spec"`, "id": `"{bitlink}"`}),
		c("GET /v4/bitlinks/{bitlink}", "GET", "/v4/bitlinks/{created}", "", 200, map[string]string{
			"long_url": `"https://example.com/bitly-created"`, "title": `"Made"`, "references.group": "prefix:http", "created_at": "prefix:20"}),
		c("PATCH /v4/bitlinks/{bitlink}", "PATCH", "/v4/bitlinks/{created}", `{"title":"Renamed","tags":["three"]}`, 200,
			map[string]string{"title": `"Renamed"`, "tags": `["three"]`}),
		c("PATCH /v4/bitlinks/{bitlink}: read on the next node", "GET", "/v4/bitlinks/{created}", "", 200,
			map[string]string{"title": `"Renamed"`, "tags": `["three"]`}),
		c("PATCH /v4/bitlinks/{bitlink}: archived (refused: docs/COMPATIBILITY.md, Bitly)", "PATCH", "/v4/bitlinks/{created}",
			`{"archived":true}`, 400, map[string]string{"message": `"INVALID_ARG_ARCHIVED"`}),
		c("GET /v4/user", "GET", "/v4/user", "", 200, map[string]string{"name": `"specs"`, "default_group_guid": `"team"`}),
		groups,
		c("GET /v4/groups/{group_guid}", "GET", "/v4/groups/{guid}", "", 200, map[string]string{"guid": `"team"`}),
		c("GET /v4/groups/{group_guid}/bitlinks", "GET", "/v4/groups/{guid}/bitlinks", "", 200,
			map[string]string{"links": "len:2", "links.0.id": `"{created}"`, "pagination.total": "2"}),
		c("GET /v4/groups/{group_guid}/bitlinks: size and page", "GET", "/v4/groups/{guid}/bitlinks?size=1&page=2", "", 200,
			map[string]string{"links": "len:1", "links.0.id": `"{bitlink}"`, "pagination.page": "2", "pagination.size": "1"}),
		c("GET /v4/groups/{group_guid}/bitlinks: tags", "GET", "/v4/groups/{guid}/bitlinks?tags=three", "", 200,
			map[string]string{"links": "len:1", "links.0.id": `"{created}"`}),
	})
	s.run([]specCase{
		visitCase("a click", strings.TrimPrefix(s.kept["created"], "sho.rt/"), "https://example.com/bitly-created"),
		{spec: "GET /v4/bitlinks/{bitlink}/clicks/summary", method: "GET", path: "/v4/bitlinks/{created}/clicks/summary?unit=day&units=-1",
			header: bitly, status: 200, want: map[string]string{"total_clicks": "1", "unit": `"day"`, "units": "-1"}, eventually: true},
		c("GET /v4/bitlinks/{bitlink}/clicks", "GET", "/v4/bitlinks/{created}/clicks?unit=day&units=1", "", 200,
			map[string]string{"link_clicks": "len:1", "link_clicks.0.clicks": "1", "unit": `"day"`}),
		c("GET /v4/bitlinks/{bitlink}/clicks: minute (refused: docs/COMPATIBILITY.md, Metrics)", "GET",
			"/v4/bitlinks/{created}/clicks?unit=minute", "", 400, map[string]string{"message": `"INVALID_ARG_UNIT"`}),
		c("GET /v4/bitlinks/{bitlink}/cities (not answered: docs/COMPATIBILITY.md, Bitly)", "GET", "/v4/bitlinks/{created}/cities", "", 501,
			map[string]string{"message": `"NOT_IMPLEMENTED"`}),
		c("DELETE /v4/bitlinks/{bitlink} (the current API's deleteBitlink)", "DELETE", "/v4/bitlinks/{bitlink}", "", 200,
			map[string]string{"links_deleted": `[{"id":"{bitlink}"}]`}),
		c("DELETE /v4/bitlinks/{bitlink}: read on the next node", "GET", "/v4/bitlinks/{bitlink}", "", 404,
			map[string]string{"message": `"NOT_FOUND"`}),
		{spec: "a wrong token (403 FORBIDDEN)", method: "GET", path: "/v4/user", header: http.Header{"Authorization": {"Bearer lr_nope"}},
			status: 403, want: map[string]string{"message": `"FORBIDDEN"`}},
	})
}

// TestYOURLSSpecAcrossNodes runs YOURLS' API actions (shorturl, expand,
// url-stats, stats, db-stats, version: includes/functions-api.php) in its
// formats (json, xml, simple, jsonp, and any other read as simple) and
// with its credentials (a signature, a time-limited signature:
// functions-auth.php) against three linkraft processes, each request
// through the next node.
func TestYOURLSSpecAcrossNodes(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	s := newSpecRun(t)
	key := s.kept["key"]
	api := func(args ...string) string {
		q := url.Values{}
		for i := 0; i+1 < len(args); i += 2 {
			q.Set(args[i], args[i+1])
		}
		return "/yourls-api.php?" + q.Encode()
	}
	c := func(spec string, status int, want map[string]string, args ...string) specCase {
		return specCase{spec: spec, method: "GET", path: api(append([]string{"signature", key}, args...)...), status: status, want: want}
	}
	// functions-auth.php yourls_check_signature_timestamp: md5(timestamp .
	// token), or another hash named by hash=.
	token := s.rr.call(t, "GET", "/api/v1/key", "", bearer(key))
	tok, _ := dig(mustObject(t, token, http.StatusOK), "signature_token")
	now := strconv.FormatInt(time.Now().Unix(), 10)
	md5sum := md5.Sum([]byte(now + fmt.Sprint(tok)))
	sha := sha512.Sum512([]byte(now + fmt.Sprint(tok)))
	s.run([]specCase{
		c("shorturl, json", 200, map[string]string{"status": `"success"`, "shorturl": `"http://sho.rt/yourls-spec"`,
			"url.keyword": `"yourls-spec"`, "url.url": `"https://example.com/yourls-spec"`, "url.title": `"Spec"`, "url.ip": `"0.0.0.0"`,
			"statusCode": "200"},
			"action", "shorturl", "url", "https://example.com/yourls-spec", "keyword", "yourls-spec", "title", "Spec", "format", "json"),
		c("shorturl: the URL exists (error:url, 400 as YOURLS 1.9.2+)", 400, map[string]string{"status": `"fail"`, "code": `"error:url"`,
			"shorturl": `"http://sho.rt/yourls-spec"`},
			"action", "shorturl", "url", "https://example.com/yourls-spec", "format", "json"),
		c("shorturl: the keyword is taken (error:keyword)", 400, map[string]string{"status": `"fail"`, "code": `"error:keyword"`},
			"action", "shorturl", "url", "https://example.com/other", "keyword", "yourls-spec", "format", "json"),
		c("shorturl: no URL (error:nourl)", 400, map[string]string{"code": `"error:nourl"`}, "action", "shorturl", "format", "json"),
		c("shorturl, simple: the short URL", 200, map[string]string{"body": "http://sho.rt/yourls-simple"},
			"action", "shorturl", "url", "https://example.com/yourls-simple", "keyword", "yourls-simple", "format", "simple"),
		visitCase("the link redirects on the next node", "yourls-spec", "https://example.com/yourls-spec"),
		c("expand, a keyword", 200, map[string]string{"longurl": `"https://example.com/yourls-spec"`, "keyword": `"yourls-spec"`},
			"action", "expand", "shorturl", "yourls-spec", "format", "json"),
		c("expand, a whole short URL", 200, map[string]string{"longurl": `"https://example.com/yourls-spec"`},
			"action", "expand", "shorturl", "http://sho.rt/yourls-spec", "format", "json"),
		c("expand, unknown, simple", 404, map[string]string{"body": "not found"}, "action", "expand", "shorturl", "nothing-here", "format", "simple"),
		{spec: "url-stats: the visit counted", method: "GET", status: 200, eventually: true,
			path: api("signature", key, "action", "url-stats", "shorturl", "yourls-spec", "format", "json"),
			want: map[string]string{"link.clicks": `"1"`, "link.url": `"https://example.com/yourls-spec"`, "link.shorturl": `"http://sho.rt/yourls-spec"`}},
		c("url-stats, unknown", 404, map[string]string{"statusCode": "404"}, "action", "url-stats", "shorturl", "nothing-here", "format", "json"),
		c("stats, top", 200, map[string]string{"links.link_1.shorturl": `"http://sho.rt/yourls-spec"`, "links.link_2": "-",
			"stats.total_links": `"2"`, "stats.total_clicks": `"1"`}, "action", "stats", "filter", "top", "limit", "1", "format", "json"),
		c("stats, no limit: the totals alone", 200, map[string]string{"links": "-", "stats.total_links": `"2"`},
			"action", "stats", "format", "json"),
		c("stats, simple", 200, map[string]string{"body": "Need either XML or JSON format for stats"}, "action", "stats", "format", "simple"),
		c("db-stats", 200, map[string]string{"db-stats.total_links": `"2"`, "db-stats.total_clicks": `"1"`}, "action", "db-stats", "format", "json"),
		c("version", 200, map[string]string{"version": `"1.9.2"`, "db_version": "-"}, "action", "version", "format", "json"),
		c("version, db=1", 200, map[string]string{"db_version": "prefix:"}, "action", "version", "db", "1", "format", "json"),
		c("version, no format: xml", 200, map[string]string{"body": "prefix:<?xml"}, "action", "version"),
		c("version, jsonp", 200, map[string]string{"body": "prefix:cb({"}, "action", "version", "format", "jsonp", "callback", "cb"),
		c("version, jsonp without a callback (YOURLS 1.10)", 400, map[string]string{"error": `"Invalid callback parameter"`},
			"action", "version", "format", "jsonp"),
		c("version, json with a callback: never wrapped", 200, map[string]string{"version": `"1.9.2"`, "callback": `"cb"`},
			"action", "version", "format", "json", "callback", "cb"),
		c("version, an unknown format: simple", 200, map[string]string{"body": "1.9.2"}, "action", "version", "format", "yaml"),
		c("an unknown action", 400, map[string]string{"message": `"Unknown or missing \"action\" parameter"`}, "action", "nothing", "format", "json"),
		{spec: "no credential (auth.php: Please log in)", method: "GET", path: api("action", "version", "format", "json"), status: 403,
			want: map[string]string{"message": `"Please log in"`}},
		{spec: "a wrong signature", method: "GET", path: api("signature", "nope", "action", "version", "format", "json"), status: 403,
			want: map[string]string{"message": `"Invalid username or password"`}},
		{spec: "username and password", method: "GET", path: api("username", "anyone", "password", key, "action", "version", "format", "json"),
			status: 200, want: map[string]string{"version": `"1.9.2"`}},
		{spec: "a time-limited signature, md5", method: "GET", status: 200, want: map[string]string{"version": `"1.9.2"`},
			path: api("timestamp", now, "signature", hex.EncodeToString(md5sum[:]), "action", "version", "format", "json")},
		{spec: "a time-limited signature, hash=sha512", method: "GET", status: 200, want: map[string]string{"db-stats.total_links": `"2"`},
			path: api("timestamp", now, "signature", hex.EncodeToString(sha[:]), "hash", "sha512", "action", "db-stats", "format", "json")},
		{spec: "a time-limited signature too old", method: "GET", status: 403,
			path: api("timestamp", "1000000000", "signature", hex.EncodeToString(md5sum[:]), "action", "version", "format", "json")},
	})
}

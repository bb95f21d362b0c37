package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The cases of Shlink's own API test suite (module/Rest/test-api in
// shlinkio/shlink), one table per test class or area, each case naming
// the Class::method (and data set) it follows. Each test function loads
// a fixture like the suite's (shlinkFixture) into its own cluster of
// three linkraft processes and sends each request through the next node,
// so a write through one node is read through another at once. Where
// linkraft answers otherwise on purpose, the case asserts linkraft's
// answer and names the part of docs/COMPATIBILITY.md that says so.
// httpd/compat_shlink_testapi_test.go keeps the few cases that need a
// node's internals.

// shlinkCase is one request of a Shlink test-api case and what its
// answer must hold.
type shlinkCase struct {
	test               string // Shlink's Class::method (data set)
	key                string // the fixture's key name; "" valid_api_key, "-" none, "operator" the admin token
	method, path, body string
	header             string // extra "Name: value" lines
	status             int
	// want maps a dotted path into the JSON answer ("visits.pagination.totalItems",
	// "shortUrls.data.0.shortCode") to its value as JSON, or a header name
	// (capitalised) to its value; "-" is absent, "len:N" a string or list of
	// N, "prefix:s" a string that starts with s; "body" is the raw body,
	// "json" the whole JSON answer and "codes" a list's short codes.
	want map[string]string
	// eventually retries the case until it holds, for a count a visit
	// changes a moment after the redirect.
	eventually bool
}

// shlinkSuite is a cluster loaded with the fixture and the keys of
// Shlink's test-api, by the names the suite gives them.
type shlinkSuite struct {
	t    *testing.T
	rr   *roundRobin
	keys map[string]string
	// boundary is a dateCreated after the links of 2018 and before those
	// of 2019, when the fixture asked for one.
	boundary string
	// expiresAt is when expired_api_key expires.
	expiresAt time.Time
}

// shlinkDefaultDomain is the default domain of Shlink's test environment,
// made linkraft's default domain with --base-url.
const shlinkDefaultDomain = "s.test"

// shlinkFixture says what newShlinkSuite loads besides the links.
type shlinkFixture struct {
	visits   bool // VisitsFixture's visits
	boundary bool // a second between the links of 2018 and of 2019
}

// newShlinkSuite starts three nodes and loads the domains, keys and links
// of Shlink's fixtures (module/Rest/test-api/Fixtures) and what f asks.
func newShlinkSuite(t *testing.T, f shlinkFixture) *shlinkSuite {
	t.Helper()
	nodes := startCluster(t, 3, map[string]string{"base-url": "http://" + shlinkDefaultDomain})
	for _, n := range nodes {
		waitRaised(t, n, 12) // keys of one's own links (Shlink's author role) and app links
	}
	s := &shlinkSuite{t: t, rr: &roundRobin{nodes: nodes}, keys: map[string]string{}}
	if f.boundary {
		s.boundary = "?"
	}
	s.loadFixture()
	if f.visits {
		s.loadVisits()
	}
	return s
}

// admin sends a request with the operator's token.
func (s *shlinkSuite) admin(method, path, body string) response {
	s.t.Helper()
	return s.rr.call(s.t, method, path, body, bearer(e2eToken))
}

// mustAdmin is admin that fails the test on an answer other than want.
func (s *shlinkSuite) mustAdmin(method, path, body string, want int) map[string]any {
	s.t.Helper()
	r := s.admin(method, path, body)
	if r.status != want {
		s.t.Fatalf("%s %s %s: %v, want %d", method, path, body, r, want)
	}
	m, _ := jsonObject(r)
	return m
}

// call sends one request with the named key ("" valid_api_key, "-" none,
// "operator" the operator's token) and the extra header lines.
func (s *shlinkSuite) call(key, method, path, body, header string) response {
	s.t.Helper()
	h := http.Header{}
	if key == "" {
		key = "valid_api_key"
	}
	switch key {
	case "-":
	case "operator": // linkraft's own API, with the operator's token
		h = bearer(e2eToken)
	default:
		secret, ok := s.keys[key]
		if !ok {
			secret = key // a made-up key
		}
		h.Set("X-Api-Key", secret)
	}
	for _, line := range strings.Split(header, "\n") {
		if name, value, ok := strings.Cut(line, ": "); ok {
			h[http.CanonicalHeaderKey(name)] = []string{value}
		}
	}
	return s.rr.call(s.t, method, path, body, h)
}

// loadFixture registers DomainFixture's domains, makes ApiKeyFixture's
// keys and ShortUrlsFixture's links. Differences: redirects name their
// scheme (linkraft takes no redirect without one, docs/COMPATIBILITY.md
// "A longUrl, a redirect rule's target and a domain redirect"); ghi789
// has no past validUntil, abc123 no maxVisits (the fixture visits it three
// times, past its limit of two, which no API can do).
func (s *shlinkSuite) loadFixture() {
	s.t.Helper()
	for _, d := range []string{
		`{"domain":"example.com"}`,
		`{"domain":"this-domain-is-detached.com"}`,
		`{"domain":"detached-with-redirects.com","root_redirect":"https://foo.com","not_found_redirect":"https://bar.com"}`,
		`{"domain":"some-domain.com"}`,
	} {
		s.mustAdmin("POST", "/admin/domains", d, http.StatusOK)
	}
	scopes := `"scopes":["links:read","links:write","stats:read"],"workspaces":["*"]`
	s.expiresAt = time.Now().Add(2 * time.Second).UTC()
	for name, body := range map[string]string{
		"valid_api_key":      `"scopes":["admin"],"workspaces":["*"]`,
		"author_api_key":     scopes + `,"own_links_only":true`,
		"domain_api_key":     scopes + `,"domains":["example.com"]`,
		"no_orphans_api_key": scopes, // orphan visits are an admin key's alone
		"disabled_api_key":   scopes,
		"expired_api_key":    scopes + `,"expires_at":"` + s.expiresAt.Format(time.RFC3339) + `"`,
	} {
		m := s.mustAdmin("POST", "/admin/keys", `{"name":"`+name+`",`+body+`}`, http.StatusCreated)
		s.keys[name], _ = m["key"].(string)
		if name == "disabled_api_key" {
			s.mustAdmin("DELETE", "/admin/keys/"+fmt.Sprint(m["id"]), "", http.StatusNoContent)
		}
	}
	// In the order of the fixture's dateCreated, with a second between the
	// links of 2018 and those of 2019: boundary stands for 2018-12-01.
	links := []struct{ key, body string }{
		{"", `{"longUrl":"https://shlink.io/documentation/","customSlug":"ghi789"}`},
		{"author_api_key", `{"longUrl":"https://shlink.io","customSlug":"abc123","tags":["foo"],"title":"My cool title","crawlable":true}`},
		{"", `{"longUrl":"https://google.com","customSlug":"custom-with-domain","domain":"some-domain.com"}`},
		{"author_api_key", `{"longUrl":"https://blog.alejandrocelaya.com/2017/12/09/acmailer-7-0-the-most-important-release-in-a-long-time/",` +
			`"validSince":"2020-05-01T00:00:00+00:00","customSlug":"def456","tags":["foo","bar"]}`},
		{"author_api_key", `{"longUrl":"https://shlink.io","customSlug":"custom","maxVisits":2,"crawlable":true,"forwardQuery":false}`},
		{"", `{"longUrl":"https://blog.alejandrocelaya.com/2019/04/27/considerations-to-properly-use-open-source-software-projects/",` +
			`"customSlug":"ghi789","domain":"example.com","tags":["foo"]}`},
	}
	for i, l := range links {
		if i == 3 && s.boundary != "" {
			time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
			s.boundary = time.Now().UTC().Format("2006-01-02T15:04:05+00:00")
			time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
		}
		if r := s.call(l.key, "POST", "/rest/v3/short-urls", l.body, ""); r.status != http.StatusOK {
			s.t.Fatalf("fixture link %s: %v", l.body, r)
		}
	}
}

// loadVisits makes VisitsFixture's seven visits of links (one by a bot)
// and three orphan visits (one by a bot), each through the next node,
// and waits until every node counts them all.
func (s *shlinkSuite) loadVisits() {
	s.t.Helper()
	const agent, bot = "shlink-tests-agent", "facebookexternalhit/1.1" // a previewer: linkraft's bot
	for _, v := range []struct {
		host, path, ua, referer string
		status                  int
	}{
		{"", "/abc123", agent, "", http.StatusFound},
		{"", "/abc123", agent, "https://google.com", http.StatusFound},
		{"", "/abc123", agent, "", http.StatusFound},
		{"", "/def456", bot, "", http.StatusFound},
		{"", "/def456", agent, "https://app.shlink.io", http.StatusFound},
		{"", "/ghi789", agent, "", http.StatusFound},
		{"", "/ghi789", agent, "https://app.shlink.io", http.StatusFound},
		{"", "/", agent, "https://s.test", http.StatusOK},                         // base_url
		{"", "/foo/bar", agent, "https://s.test/foo/bar", http.StatusNotFound},    // regular_404
		{"example.com", "/short", bot, "https://s.test/foo", http.StatusNotFound}, // invalid_short_url
	} {
		h := http.Header{"User-Agent": {v.ua}, "Host": {shlinkDefaultDomain}, "Authorization": nil}
		if v.host != "" {
			h.Set("Host", v.host)
		}
		if v.referer != "" {
			h.Set("Referer", v.referer)
		}
		if r := s.rr.next().request(s.t, "GET", v.path, h, nil); r.status != v.status {
			s.t.Fatalf("visit %s%s: %v, want %d", v.host, v.path, r, v.status)
		}
	}
	for _, n := range s.rr.nodes {
		var got string
		if !eventually(clickWaitTimeout, func() bool {
			r := n.request(s.t, "GET", "/rest/v3/visits", http.Header{"X-Api-Key": {s.keys["valid_api_key"]}}, nil)
			got = string(r.body)
			var doc any
			_ = json.Unmarshal(r.body, &doc)
			nonOrphan, _ := dig(doc, "visits.nonOrphanVisits")
			orphan, _ := dig(doc, "visits.orphanVisits")
			return shlinkMatches(nonOrphan, true, `{"total":7,"nonBots":6,"bots":1}`) &&
				shlinkMatches(orphan, true, `{"total":3,"nonBots":2,"bots":1}`)
		}) {
			s.t.Fatalf("%s counts %s, want 7 visits and 3 orphan visits", n.id, got)
		}
	}
}

// run sends each case in order, as a subtest named after it.
func (s *shlinkSuite) run(cases []shlinkCase) {
	s.t.Helper()
	for _, c := range cases {
		s.t.Run(c.test, func(t *testing.T) {
			r := s.call(c.key, c.method, c.path, c.body, c.header)
			for deadline := time.Now().Add(clickWaitTimeout); c.eventually && time.Now().Before(deadline) &&
				(r.status != c.status || len(answerProblems(r, c.want)) > 0); {
				time.Sleep(50 * time.Millisecond)
				r = s.call(c.key, c.method, c.path, c.body, c.header)
			}
			if r.status != c.status {
				t.Fatalf("%s %s: %v, want %d", c.method, c.path, r, c.status)
			}
			checkShlinkAnswer(t, r, c.want)
			// RequestIdTest::generatesRequestId: every Shlink answer carries one.
			if id := r.header.Get("X-Request-Id"); id == "" && strings.HasPrefix(c.path, "/rest/") {
				t.Errorf("no X-Request-Id")
			}
		})
	}
}

// checkShlinkAnswer checks r against a shlinkCase's want.
func checkShlinkAnswer(t *testing.T, r response, want map[string]string) {
	t.Helper()
	for _, p := range answerProblems(r, want) {
		t.Error(p)
	}
}

// answerProblems says how r differs from want (a shlinkCase's want).
func answerProblems(r response, want map[string]string) []string {
	var doc any
	_ = json.Unmarshal(r.body, &doc)
	var problems []string
	for k, w := range want {
		var got any
		var has bool
		switch {
		case k == "body":
			got, has = string(r.body), true
		case k == "json":
			got, has = doc, doc != nil
		case k == "codes":
			got, has = shortCodes(doc), true
		case k[0] >= 'A' && k[0] <= 'Z':
			_, has = r.header[http.CanonicalHeaderKey(k)]
			got = r.header.Get(k)
		default:
			got, has = dig(doc, k)
		}
		if !shlinkMatches(got, has, w) {
			g, _ := json.Marshal(got)
			problems = append(problems, fmt.Sprintf("%s = %s (present: %v), want %s; answer %v", k, g, has, w, r))
		}
	}
	return problems
}

// shlinkMatches says whether got (present or not) is what want says.
func shlinkMatches(got any, has bool, want string) bool {
	if want == "-" {
		return !has
	}
	if !has {
		return false
	}
	if n, ok := strings.CutPrefix(want, "len:"); ok {
		switch g := got.(type) {
		case string:
			return strconv.Itoa(len(g)) == n
		case []any:
			return strconv.Itoa(len(g)) == n
		}
		return false
	}
	if p, ok := strings.CutPrefix(want, "prefix:"); ok {
		g, _ := got.(string)
		return strings.HasPrefix(g, p) && len(g) > len(p)
	}
	if g, ok := got.(string); ok && !strings.HasPrefix(want, `"`) {
		return g == want // a header, or the raw body
	}
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		return false
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(w)
	return string(gj) == string(wj)
}

// shortCodes lists the codes of a list of short URLs, each with
// "@domain" when it has one, joined by commas.
func shortCodes(doc any) string {
	data, _ := dig(doc, "shortUrls.data")
	list, _ := data.([]any)
	var codes []string
	for _, u := range list {
		m, _ := u.(map[string]any)
		c := fmt.Sprint(m["shortCode"])
		if d, ok := m["domain"].(string); ok {
			c += "@" + d
		}
		codes = append(codes, c)
	}
	return strings.Join(codes, ",")
}

// dig follows a dotted path of object keys and list indexes into v.
func dig(v any, path string) (any, bool) {
	for _, p := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[p]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// jsonObject decodes an answer that is a JSON object.
func jsonObject(r response) (map[string]any, bool) {
	var m map[string]any
	return m, json.Unmarshal(r.body, &m) == nil && m != nil
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

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The APIs of Shlink, YOURLS and Kutt (and Bitly's, compat_bitly_test.go),
// driven by those projects' own client libraries (e2e/clients, pinned in
// its package-lock.json) against a three-node cluster: writes through one
// node, reads through another, and what the clients made checked through
// linkraft's own API on the third.

// clientsDir is e2e/clients, where `npm ci` installs the client libraries
// (make clients, .ci/run).
const clientsDir = "clients"

// nodeJS finds Node.js and the installed client libraries pkgs (npm
// names). Without them the test fails, or skips where asked.
func nodeJS(t *testing.T, pkgs ...string) string {
	t.Helper()
	const fix = "install Debian's nodejs and npm, then run `make clients` (npm ci in e2e/clients)"
	node, err := exec.LookPath("node")
	if err != nil {
		realPartMissing(t, "no node on PATH", fix)
	}
	for _, pkg := range pkgs {
		if _, err := os.Stat(filepath.Join(clientsDir, "node_modules", pkg, "package.json")); err != nil {
			realPartMissing(t, "client library "+pkg+" is not installed", fix)
		}
	}
	return node
}

// runClient runs one of e2e/clients' scripts against the cluster and
// returns the JSON object it prints last.
func runClient(t *testing.T, node, script string, env map[string]string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = clientsDir
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var result map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &result); err != nil {
		t.Fatalf("%s printed no result: %v\n%s", script, err, out)
	}
	return result
}

// compatCluster starts three nodes and makes a key for workspace team.
func compatCluster(t *testing.T) ([]*node, string) {
	t.Helper()
	nodes := startCluster(t, 3, nil)
	k := createKey(t, nodes[0], `{"name":"compat","scopes":["links:read","links:write","stats:read"],"workspaces":["team"]}`)
	return nodes, k.Key
}

// requireNativeLink checks, through linkraft's own API on n, that the
// client made a link code in workspace team that redirects to target.
func requireNativeLink(t *testing.T, n *node, key, code, target string) {
	t.Helper()
	r := n.request(t, http.MethodGet, "/api/v1/urls/"+code, bearer(key), nil)
	var l struct {
		Workspace   string `json:"workspace"`
		OriginalURL string `json:"original_url"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &l) != nil || l.Workspace != "team" || l.OriginalURL != target {
		t.Fatalf("%s through linkraft's API on %s: %v", code, n.id, r)
	}
	if r := n.request(t, http.MethodGet, "/"+code, noCredential(), nil); r.status != http.StatusFound || r.header.Get("Location") != target {
		t.Fatalf("redirect of %s on %s: %v", code, n.id, r)
	}
}

func TestCompatClients(t *testing.T) {
	skipIfShort(t)
	node := nodeJS(t, "@shlinkio/shlink-js-sdk", "kutt")
	nodes, key := compatCluster(t)
	env := map[string]string{
		"WRITE_URL": "http://" + nodes[0].httpAddr, "READ_URL": "http://" + nodes[1].httpAddr, "API_KEY": key,
	}

	t.Run("shlink-js-sdk", func(t *testing.T) {
		env["SLUG"] = "shlink-sdk"
		res := runClient(t, node, "shlink.mjs", env)
		requireNativeLink(t, nodes[2], key, res["kept"].(string), "https://example.com/shlink-kept")
	})
	t.Run("kutt", func(t *testing.T) {
		env["SLUG"] = "kutt-client"
		res := runClient(t, node, "kutt.mjs", env)
		requireNativeLink(t, nodes[2], key, res["kept"].(string), "https://example.com/kutt-kept")
	})
}

// yourlsGet sends a request as the yourls Python client (1.2.3) does: a
// GET of the API URL with its arguments and format=json, None arguments
// left out; it raises for an HTTP error status, and reads the JSON.
func yourlsGet(t *testing.T, n *node, args url.Values) (int, map[string]any) {
	t.Helper()
	args.Set("format", "json")
	r := n.request(t, http.MethodGet, "/yourls-api.php?"+args.Encode(), noCredential(), nil)
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("yourls %s: the answer is not JSON: %v", args.Get("action"), r)
	}
	return r.status, body
}

// yourlsLink reads a link as the client's _json_to_shortened_url does:
// url, title and ip must be there, the date (or timestamp) parses as
// "%Y-%m-%d %H:%M:%S" and clicks as an integer.
func yourlsLink(t *testing.T, v any) map[string]any {
	t.Helper()
	link, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("link is not an object: %v", v)
	}
	for _, f := range []string{"url", "title", "ip"} {
		if _, ok := link[f]; !ok {
			t.Fatalf("link has no %s: %v", f, link)
		}
	}
	date, _ := link["date"].(string)
	if date == "" {
		date, _ = link["timestamp"].(string)
	}
	if _, err := time.Parse("2006-01-02 15:04:05", date); err != nil {
		t.Fatalf("link date %q does not parse strictly: %v", date, err)
	}
	if c, ok := link["clicks"]; ok {
		if _, err := strconv.Atoi(c.(string)); err != nil {
			t.Fatalf("clicks %v: %v", c, err)
		}
	}
	return link
}

// TestCompatYOURLS: the requests of the yourls Python client, which
// cannot be installed here (no PyPI), sent as its source sends them and
// read as it reads them, across three nodes.
func TestCompatYOURLS(t *testing.T) {
	skipIfShort(t)
	nodes, key := compatCluster(t)
	w, r := nodes[0], nodes[1]
	sig := url.Values{"signature": {key}}
	with := func(kv ...string) url.Values {
		q := url.Values{}
		for k, v := range sig {
			q[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		return q
	}
	target := "https://example.com/yourls-client"
	status, body := yourlsGet(t, w, with("action", "shorturl", "url", target, "keyword", "yourls-kw", "title", "Y"))
	if status != 200 || body["status"] != "success" || body["shorturl"] == nil {
		t.Fatalf("shorten: %d %v", status, body)
	}
	yourlsLink(t, body["url"])
	// Read after write on another node, by keyword and by short URL.
	for _, short := range []string{"yourls-kw", body["shorturl"].(string)} {
		if status, body := yourlsGet(t, r, with("action", "expand", "shorturl", short)); status != 200 || body["longurl"] != target {
			t.Fatalf("expand %s on %s: %d %v", short, r.id, status, body)
		}
	}
	if status, body := yourlsGet(t, r, with("action", "url-stats", "shorturl", "yourls-kw")); status != 200 {
		t.Fatalf("url-stats: %d %v", status, body)
	} else {
		yourlsLink(t, body["link"])
	}
	// stats: the client reads links.link_1 to link_<limit>.
	if status, body := yourlsGet(t, r, with("action", "stats", "filter", "last", "limit", "1")); status != 200 {
		t.Fatalf("stats: %d %v", status, body)
	} else {
		yourlsLink(t, body["links"].(map[string]any)["link_1"])
		if s := body["stats"].(map[string]any); s["total_links"] != "1" {
			t.Fatalf("stats totals: %v", s)
		}
	}
	// username and password, as the client's other way to log in.
	if status, body := yourlsGet(t, r, url.Values{"username": {"me"}, "password": {key}, "action": {"db-stats"}}); status != 200 ||
		body["db-stats"].(map[string]any)["total_links"] != "1" {
		t.Fatalf("db-stats: %d %v", status, body)
	}
	// A time-limited signature, sha256 of the timestamp and the key's
	// signature token, as YOURLS' clients send it: a shorturl signed
	// through every node, each checked again by the leader it is
	// forwarded to, and read through the next node.
	own := r.request(t, http.MethodGet, "/api/v1/key", bearer(key), nil)
	var self struct {
		SignatureToken string `json:"signature_token"`
	}
	if own.status != http.StatusOK || json.Unmarshal(own.body, &self) != nil || self.SignatureToken == "" {
		t.Fatalf("the key's own view: %v", own)
	}
	for i, n := range nodes {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		sum := sha256.Sum256([]byte(ts + self.SignatureToken))
		signed := url.Values{"timestamp": {ts}, "signature": {hex.EncodeToString(sum[:])},
			"action": {"shorturl"}, "url": {"https://example.com/signed"}, "keyword": {"signed-" + strconv.Itoa(i)}}
		if status, body := yourlsGet(t, n, signed); status != 200 || body["status"] != "success" {
			t.Fatalf("a signed shorturl through %s: %d %v", n.id, status, body)
		}
		requireNativeLink(t, nodes[(i+1)%len(nodes)], key, "signed-"+strconv.Itoa(i), "https://example.com/signed")
	}
	// The failures the client turns into its exceptions: status fail with
	// a code and a message. YOURLS 1.9.2+ (and linkraft) send error:keyword
	// and error:url with 400, which this client (written for older
	// YOURLS) reads as an HTTP error with that message.
	for _, c := range []struct {
		name   string
		args   url.Values
		status int
		code   string
	}{
		{"taken keyword", with("action", "shorturl", "url", "https://example.com/other", "keyword", "yourls-kw"), 400, "error:keyword"},
		{"url exists", with("action", "shorturl", "url", target), 400, "error:url"},
		{"no url", with("action", "shorturl"), 400, "error:nourl"},
		{"unknown keyword", with("action", "expand", "shorturl", "no-such-kw"), 404, ""},
		{"wrong key", url.Values{"signature": {"lk_not_a_key"}, "action": {"db-stats"}}, 403, ""},
	} {
		status, body := yourlsGet(t, r, c.args)
		if status != c.status || c.code != "" && (body["status"] != "fail" || body["code"] != c.code) || body["message"] == nil {
			t.Errorf("%s: %d %v", c.name, status, body)
		}
		if c.code == "error:url" {
			yourlsLink(t, body["url"])
		}
	}
	requireNativeLink(t, nodes[2], key, "yourls-kw", target)
}

// TestShlinkRulesTagsDomains drives the Shlink features built on linkraft's
// rules, tags and domains with Shlink's SDK (shlink_rules.mjs), then
// checks through a third node that they act: the rules pick targets,
// robots.txt allows the crawlable link, a link out of visits goes to the
// default domain's invalid-link redirect.
func TestShlinkRulesTagsDomains(t *testing.T) {
	skipIfShort(t)
	node := nodeJS(t, "@shlinkio/shlink-js-sdk")
	nodes, key := compatCluster(t)
	waitRaised(t, nodes[0], 9) // fsm.LevelVisitRows
	admin := createKey(t, nodes[0], `{"name":"compat-admin","scopes":["admin"],"workspaces":["*"]}`)
	res := runClient(t, node, "shlink_rules.mjs", map[string]string{
		"WRITE_URL": "http://" + nodes[0].httpAddr, "READ_URL": "http://" + nodes[1].httpAddr,
		"API_KEY": key, "ADMIN_KEY": admin.Key, "DEFAULT_DOMAIN": nodes[0].httpAddr, "SLUG": "sdk-rules",
	})
	n := nodes[2]
	code := res["rules"].(string)
	for _, c := range []struct{ name, header, value, query, want string }{
		{"android", "User-Agent", "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 Chrome/126.0 Mobile Safari/537.36", "", "https://example.com/android"},
		// The loopback client is not in the office's 192.168.1.*.
		{"firefox, not from the office", "User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", "", "https://example.com/rules"},
		{"spanish without the campaign", "Accept-Language", "es-ES,es;q=0.9", "", "https://example.com/rules"},
		// Shlink's creates forward the query.
		{"spanish with the campaign", "Accept-Language", "es-ES,es;q=0.9", "?utm=mail", "https://example.com/campaign?utm=mail"},
		// GB's rule: no proxy is trusted here, so a client's own header
		// naming a British address is not believed.
		{"a client's word that it is in GB", "X-Forwarded-For", "81.2.69.142", "", "https://example.com/rules"},
	} {
		h := noCredential()
		h.Set(c.header, c.value)
		if r := n.request(t, http.MethodGet, "/"+code+c.query, h, nil); r.status != http.StatusFound || r.header.Get("Location") != c.want {
			t.Errorf("%s: %d to %q, want a redirect to %s", c.name, r.status, r.header.Get("Location"), c.want)
		}
	}
	if r := n.request(t, http.MethodGet, "/robots.txt", noCredential(), nil); !strings.Contains(string(r.body), "Allow: /"+res["crawlable"].(string)+"\n") ||
		strings.Contains(string(r.body), "Allow: /"+code+"\n") {
		t.Errorf("robots.txt: %v", r)
	}
	once := nodes[0].request(t, http.MethodPost, "/api/v1/urls", http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}},
		[]byte(`{"url":"https://example.com/once","workspace":"team","custom_code":"sdk-once","max_visits":1}`))
	if once.status != http.StatusCreated {
		t.Fatalf("create: %v", once)
	}
	for i, want := range []string{"https://example.com/once", "https://example.com/default-invalid"} {
		if r := n.request(t, http.MethodGet, "/sdk-once", noCredential(), nil); r.status != http.StatusFound || r.header.Get("Location") != want {
			t.Errorf("visit %d: %v, want a redirect to %s", i+1, r, want)
		}
	}
}

// TestShlinkVisitRows: people and bots with known browsers, systems,
// referrers and countries visit a link through all three nodes; Shlink's
// SDK then reads the link's visit rows through one node, and grouped by
// day, browser, OS, referrer and country as the web client draws its
// charts they equal linkraft's own breakdowns read on another. Deleting
// the visits through the SDK on a third node leaves none on any node.
func TestShlinkVisitRows(t *testing.T) {
	skipIfShort(t)
	node := nodeJS(t, "@shlinkio/shlink-js-sdk")
	nodes := startCluster(t, 3, map[string]string{"trusted-proxy": "127.0.0.0/8"})
	k := createKey(t, nodes[0], `{"name":"charts","scopes":["links:read","links:write","stats:read"],"workspaces":["team"]}`)
	const code = "charted"
	h := bearer(k.Key)
	h.Set("Content-Type", "application/json")
	if r := nodes[0].request(t, http.MethodPost, "/api/v1/urls", h,
		[]byte(`{"url":"https://example.com/charted","custom_code":"`+code+`","workspace":"team"}`)); r.status != http.StatusCreated {
		t.Fatalf("create: %v", r)
	}
	const (
		chrome  = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
		safari  = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1"
		firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"
		edge    = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0"
		slack   = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
	)
	visitors := []struct {
		ua, referer, forwardedFor string
		times                     int
	}{
		{chrome, "https://news.example.com/story", "8.8.8.8", 3},   // US
		{safari, "", "81.2.69.142", 2},                             // GB
		{firefox, "https://mail.example.org/inbox", "8.8.8.8", 1},  // US
		{edge, "https://news.example.com/other", "193.0.6.139", 2}, // NL
		{chrome, "", "10.1.2.3", 1},                                // private: no country
		{slack, "", "8.8.8.8", 1},                                  // a preview: a bot's row
	}
	people, bots := 0, 0
	for _, n := range nodes {
		for _, v := range visitors {
			h := http.Header{"User-Agent": {v.ua}, "X-Forwarded-For": {v.forwardedFor}, "Authorization": nil}
			if v.referer != "" {
				h.Set("Referer", v.referer)
			}
			for range v.times {
				if r := n.request(t, http.MethodGet, "/"+code, h, nil); r.status != http.StatusFound {
					t.Fatalf("GET /%s on %s: %v", code, n.id, r)
				}
				if v.ua == slack {
					bots++
				} else {
					people++
				}
			}
		}
	}
	stats := "/api/v1/urls/" + code + "/stats"
	// Clicks reach every node's state within a flush and a replication, not
	// at once: the SDK reads nodes[0] and the breakdowns come from nodes[2],
	// so both must have them all.
	for _, i := range []int{2, 0} {
		n := nodes[i]
		if !eventually(clickWaitTimeout, func() bool {
			v := n.visits(t, stats+"?group_by=country")
			return v.Clicks == int64(people) && v.Visits.Crawlers+v.Visits.Previews == int64(bots)
		}) {
			t.Fatalf("the clicks never all arrived on %s: %+v", n.id, n.visits(t, stats))
		}
	}
	// linkraft's own breakdowns, on the node the SDK does not read.
	expected := map[string]map[string]uint64{}
	for _, dim := range []string{"browser", "os", "referrer", "country"} {
		expected[dim] = map[string]uint64{}
		for _, g := range nodes[2].visits(t, stats+"?group_by="+dim).Visits.Groups {
			expected[dim][g.Value] = uint64(g.Clicks)
		}
	}
	var days struct {
		Visits struct {
			Days []struct {
				Start  string `json:"start"`
				Clicks uint64 `json:"clicks"`
			} `json:"days"`
		} `json:"visits"`
	}
	if r := nodes[2].get(t, stats+"?group_by=browser"); json.Unmarshal(r.body, &days) != nil || len(days.Visits.Days) == 0 {
		t.Fatalf("days of %s: %v", code, r)
	}
	expected["day"] = map[string]uint64{}
	for _, d := range days.Visits.Days {
		if d.Clicks > 0 {
			expected["day"][d.Start[:10]] += d.Clicks
		}
	}
	want, err := json.Marshal(expected)
	if err != nil {
		t.Fatal(err)
	}
	res := runClient(t, node, "shlink_visits.mjs", map[string]string{
		"READ_URL": "http://" + nodes[0].httpAddr, "WRITE_URL": "http://" + nodes[1].httpAddr,
		"API_KEY": k.Key, "SLUG": code, "EXPECTED": string(want), "BOTS": strconv.Itoa(bots),
	})
	if res["rows"] != float64(people) || res["deleted"] != float64(people+bots) {
		t.Fatalf("the SDK read %v rows and deleted %v visits; want %d and %d", res["rows"], res["deleted"], people, people+bots)
	}
	for _, n := range nodes {
		if !eventually(5*time.Second, func() bool {
			v := n.visits(t, stats+"?group_by=browser")
			return v.Clicks == 0 && v.Visits.Clicks == 0 && v.Visits.Crawlers+v.Visits.Previews == 0
		}) {
			t.Errorf("visits left on %s after the delete: %+v", n.id, n.visits(t, stats))
		}
	}
}

// TestShlinkOrphanVisits: visits that find no link (the root of the
// default domain and of a registered one, codes no link has, other pages
// not found, a bot's) go to all three nodes; Shlink's SDK reads them
// through one node as orphan visits, whose counts by type equal what was
// sent, and deletes them through another, which leaves none on any node.
func TestShlinkOrphanVisits(t *testing.T) {
	skipIfShort(t)
	node := nodeJS(t, "@shlinkio/shlink-js-sdk")
	nodes := startCluster(t, 3, map[string]string{"trusted-proxy": "127.0.0.0/8"})
	if r := nodes[0].postJSON(t, "/admin/domains", map[string]any{"domain": "brand.example"}); r.status != http.StatusOK {
		t.Fatalf("register domain: %v", r)
	}
	for _, n := range nodes {
		waitRaised(t, n, 9) // fsm.LevelVisitRows: orphan visits are counted from it on
	}
	const (
		chrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
		slack  = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
	)
	visits := []struct {
		path, host, ua, kind string
		status               int
	}{
		{"/", "", chrome, "base_url", http.StatusOK},
		{"/", "", slack, "base_url", http.StatusOK},
		{"/", "brand.example", chrome, "base_url", http.StatusOK},
		{"/nosuchcode", "", chrome, "invalid_short_url", http.StatusNotFound},
		{"/nosuch-other", "brand.example", chrome, "invalid_short_url", http.StatusNotFound},
		{"/no/such/page", "", chrome, "regular_404", http.StatusNotFound},
	}
	expected := map[string]int{}
	bots, defaults, total := 0, 0, 0
	for _, n := range nodes {
		for _, v := range visits {
			h := http.Header{"User-Agent": {v.ua}, "X-Forwarded-For": {"8.8.8.8"}, "Authorization": nil}
			if v.host != "" {
				h.Set("Host", v.host)
			}
			if r := n.request(t, http.MethodGet, v.path, h, nil); r.status != v.status {
				t.Fatalf("GET %s on %s: %v", v.path, n.id, r)
			}
			expected[v.kind]++
			total++
			if v.ua == slack {
				bots++
			}
			if v.host == "" {
				defaults++
			}
		}
	}
	for _, n := range nodes {
		if !eventually(clickWaitTimeout, func() bool { return orphanTotal(t, n) == total }) {
			t.Fatalf("%s counts %d orphan visits, want %d", n.id, orphanTotal(t, n), total)
		}
	}
	admin := createKey(t, nodes[0], `{"name":"orphans","scopes":["admin"],"workspaces":["*"]}`)
	want, err := json.Marshal(expected)
	if err != nil {
		t.Fatal(err)
	}
	res := runClient(t, node, "shlink_orphans.mjs", map[string]string{
		"READ_URL": "http://" + nodes[1].httpAddr, "WRITE_URL": "http://" + nodes[2].httpAddr,
		"API_KEY": admin.Key, "EXPECTED": string(want), "BOTS": strconv.Itoa(bots), "DEFAULT_DOMAIN_VISITS": strconv.Itoa(defaults),
	})
	if res["rows"] != float64(total) || res["deleted"] != float64(total) {
		t.Fatalf("the SDK read %v orphan visits and deleted %v; want %d", res["rows"], res["deleted"], total)
	}
	for _, n := range nodes {
		if !eventually(5*time.Second, func() bool { return orphanTotal(t, n) == 0 }) {
			t.Errorf("orphan visits left on %s after the delete: %d", n.id, orphanTotal(t, n))
		}
	}
}

// orphanTotal is how many orphan visits n lists.
func orphanTotal(t *testing.T, n *node) int {
	t.Helper()
	var page struct {
		Total int `json:"total"`
	}
	if r := n.get(t, "/api/v1/visits/orphan?limit=1"); r.status != http.StatusOK || json.Unmarshal(r.body, &page) != nil {
		t.Fatalf("orphan visits on %s: %v", n.id, r)
	}
	return page.Total
}

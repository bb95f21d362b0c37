package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Attacks on the rule that work done for others is bounded and checked
// first (docs/SECURITY.md, "Work done for others is bounded"), on real
// processes: the costly work they aimed at runs on the leader, behind a
// forward, or in bulk.

// cpuTime is n's CPU time so far, user and system, from /proc; a node
// that died fails the test (procOf).
func cpuTime(t *testing.T, n *node) time.Duration {
	t.Helper()
	pid := n.pid()
	// The command name, field 2, is in parentheses and may hold spaces:
	// count the fields after it. utime and stime are fields 14 and 15.
	stat := string(procOf(t, n, "stat"))
	fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
	if len(fields) < 13 {
		t.Fatalf("short /proc/%d/stat: %q", pid, stat)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("/proc/%d/stat field %q: %v", pid, f, err)
		}
		ticks += n
	}
	// /proc counts in USER_HZ, which is 100 on every Linux architecture.
	return time.Duration(ticks) * (time.Second / 100)
}

// bulkOf is a bulk create body of n items, item's %d verbs filled with
// the item's index.
func bulkOf(n int, item string) []byte {
	items := make([]string, n)
	for i := range items {
		items[i] = strings.ReplaceAll(item, "%d", strconv.Itoa(i))
	}
	return []byte(`{"links":[` + strings.Join(items, ",") + `]}`)
}

// jsonWith is header with a JSON content type added.
func jsonWith(header http.Header) http.Header {
	h := header.Clone()
	h.Set("Content-Type", "application/json")
	return h
}

// TestSecurityRefusedBulkCostsNoCPU: a key limited to workspace a sends,
// through a follower, a bulk of 300 items aimed at workspace b, each with
// a password. Every item is refused, and neither the follower nor the
// leader spends a second of CPU on it: no password is hashed for an item
// that is refused (it cost the leader 22 s of CPU).
func TestSecurityRefusedBulkCostsNoCPU(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, followers := waitOneLeader(t, formationBound, nodes...)
	key := createKey(t, leader, `{"name":"a only","scopes":["links:write"],"workspaces":["a"]}`)
	links := leader.linkCount(t)
	follower := followers[0]

	leaderBefore, followerBefore := cpuTime(t, leader), cpuTime(t, follower)
	r := follower.request(t, http.MethodPost, "/api/v1/urls/bulk", jsonWith(bearer(key.Key)),
		bulkOf(300, `{"url":"https://example.com/f2/%d","workspace":"b","password":"correct horse %d"}`))
	leaderSpent, followerSpent := cpuTime(t, leader)-leaderBefore, cpuTime(t, follower)-followerBefore
	t.Logf("a refused bulk of 300 password items through a follower: the leader spent %v of CPU, the follower %v", leaderSpent, followerSpent)

	var answer struct {
		Results []struct {
			Status int `json:"status"`
		} `json:"results"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &answer) != nil || len(answer.Results) != 300 {
		t.Fatalf("bulk: %v", r)
	}
	for i, res := range answer.Results {
		if res.Status != http.StatusForbidden {
			t.Fatalf("item %d: %d, want 403", i, res.Status)
		}
	}
	if leaderSpent > time.Second || followerSpent > time.Second {
		t.Fatalf("the refused bulk cost the leader %v and the follower %v of CPU, want under 1 s each", leaderSpent, followerSpent)
	}
	if n := leader.linkCount(t); n != links {
		t.Fatalf("the refused bulk made %d links", n-links)
	}
}

// TestSecurityBulkCountsItemsAgainstCreateRate: with --create-rate 2
// --create-burst 5, eight bulks of 1000 create no more than the limit
// allows over the time they take (they made 7000 links in a second).
func TestSecurityBulkCountsItemsAgainstCreateRate(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{Settings: map[string]string{"create-rate": "2", "create-burst": "5"}})
	links := n.linkCount(t)
	start := time.Now()
	for b := range 8 {
		r := n.postJSON(t, "/api/v1/urls/bulk", bulkOf(1000, `{"url":"https://example.com/f6/`+itoa(b)+`/%d"}`))
		if r.status != http.StatusOK && r.status != http.StatusTooManyRequests {
			t.Fatalf("bulk %d: want 200 or 429, got %v", b, r)
		}
	}
	allowed := 5 + int(2*time.Since(start).Seconds()) + 1
	if created := int(n.linkCount(t) - links); created > allowed {
		t.Fatalf("8 bulks of 1000 created %d links; the limit allows %d in the time they took", created, allowed)
	}
}

// TestSecurityEditsAreRateLimited: edits spend the client's create budget
// (3000 edits went through in 9 s, unlimited).
func TestSecurityEditsAreRateLimited(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{Settings: map[string]string{"create-rate": "2", "create-burst": "5"}})
	l := n.createURL(t, "https://example.com/f4")
	start := time.Now()
	edited, limited := 0, 0
	for i := range 60 {
		r := n.patch(t, l.ShortCode, `{"title":"edit `+itoa(i)+`"}`)
		switch r.status {
		case http.StatusOK:
			edited++
		case http.StatusTooManyRequests:
			limited++
			if r.header.Get("Retry-After") == "" {
				t.Fatalf("429 without Retry-After: %v", r)
			}
		default:
			t.Fatalf("edit %d: want 200 or 429, got %v", i, r)
		}
	}
	if allowed := 4 + int(2*time.Since(start).Seconds()) + 1; edited > allowed || limited == 0 {
		t.Fatalf("60 quick edits: %d went through, %d limited; the limit allows %d", edited, limited, allowed)
	}
}

// TestSecurityPasswordHashingBudget: edits that set a password, sent
// through a follower by one client with one key, are refused with 429 and
// Retry-After once past the client's hashing budget (the leader hashed
// each one, 70 to 140 ms of CPU, without end); plain creates go on
// meanwhile.
func TestSecurityPasswordHashingBudget(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, followers := waitOneLeader(t, formationBound, nodes...)
	key := createKey(t, leader, `{"name":"writer","scopes":["links:read","links:write"],"workspaces":["*"]}`)
	l := leader.createURL(t, "https://example.com/f2-edit")
	follower := followers[0]
	var limited *response
	for i := 0; i < 60 && limited == nil; i++ {
		r := follower.request(t, http.MethodPatch, "/api/v1/urls/"+l.ShortCode, jsonWith(bearer(key.Key)),
			[]byte(`{"password":"correct horse `+itoa(i)+`"}`))
		switch r.status {
		case http.StatusOK:
		case http.StatusTooManyRequests:
			limited = &r
		default:
			t.Fatalf("password edit %d: want 200 or 429, got %v", i, r)
		}
	}
	if limited == nil {
		t.Fatal("60 password edits from one client and key were never limited")
	}
	// The client's own budget runs out first: the follower named the
	// client to the leader, which hashes.
	if p := requireProblem(t, *limited, http.StatusTooManyRequests); !strings.Contains(p.Detail, "address") {
		t.Errorf("the refusal names another budget than the client's: %q", p.Detail)
	}
	if s, err := strconv.Atoi(limited.header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("429 with Retry-After %q, want a positive number of seconds", limited.header.Get("Retry-After"))
	}
	plain := follower.createURL(t, "https://example.com/f2-plain")
	follower.requireRedirect(t, plain.ShortCode, "https://example.com/f2-plain")
}

// clientGuessBurst is how many password guesses one client may make at
// once, and clientGuessesPerMinute how fast they come back
// (httpd/password.go, docs/API.md "Passwords").
const (
	clientGuessBurst       = 5
	clientGuessesPerMinute = 10
)

// clientAt is an HTTP client whose connections come from the loopback
// address ip, so a test can be several clients of one node.
func clientAt(t *testing.T, ip string) *http.Client {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	transport := &http.Transport{DialContext: dialer.DialContext}
	t.Cleanup(transport.CloseIdleConnections)
	return &http.Client{
		Transport:     transport,
		Timeout:       20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// visitProtected sends one visit to a protected link through n, with password in
// X-Link-Password (or, with form, as the password page posts it).
func visitProtected(t *testing.T, c *http.Client, n *node, method, code, password string, form bool) *http.Response {
	t.Helper()
	var body io.Reader
	if form {
		body = strings.NewReader(url.Values{"password": {password}}.Encode())
	}
	req, err := http.NewRequest(method, "http://"+n.httpAddr+"/"+code, body)
	if err != nil {
		t.Fatal(err)
	}
	if form {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req.Header.Set("X-Link-Password", password)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s /%s on %s: %v", method, code, n.id, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestSecurityPasswordGuessesAcrossTheCluster: one client spreading wrong
// password guesses over the three nodes gets the guesses of one client in
// all before 429, not one client's on each node (each node kept its own
// budgets: three times the guesses); followers hand the guesses to the
// leader, naming the client. Another client, through the followers, still
// opens the link with its password, by header, form and HEAD.
func TestSecurityPasswordGuessesAcrossTheCluster(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, followers := waitOneLeader(t, formationBound, nodes...)
	const target = "https://example.com/f10-protected"
	l := leader.createLink(t, map[string]any{"original_url": target, "password": "correct horse battery"})
	// The followers come first: on a node that judged guesses itself,
	// they would be its own budget's.
	order := []*node{followers[0], followers[1], leader}

	attacker := clientAt(t, "127.0.0.2")
	const guesses = 3 * (clientGuessBurst + 1)
	start := time.Now()
	wrong, limited := 0, map[string]int{}
	for i := range guesses {
		n := order[i%len(order)]
		resp := visitProtected(t, attacker, n, http.MethodGet, l.ShortCode, "wrong guess "+itoa(i), false)
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			wrong++
		case http.StatusTooManyRequests:
			limited[n.id]++
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
				t.Errorf("429 from %s with Retry-After %q, want a positive number of seconds", n.id, resp.Header.Get("Retry-After"))
			}
		default:
			t.Fatalf("guess %d on %s: %d, want 401 or 429", i+1, n.id, resp.StatusCode)
		}
	}
	// The budget refills while the guesses are sent: one more allowed for
	// each refill, and one for a refill under way.
	allowed := clientGuessBurst + int(time.Since(start).Minutes()*clientGuessesPerMinute) + 1
	if wrong > allowed {
		t.Fatalf("%d wrong guesses spread over 3 nodes were judged before 429 (%d guesses, 429s by node %v); one client's budget allows %d",
			wrong, guesses, limited, allowed)
	}
	for _, n := range nodes {
		if limited[n.id] == 0 {
			t.Errorf("%s never answered 429 to the spent client (429s by node %v)", n.id, limited)
		}
	}

	// Another client's visits through the followers: the leader judged
	// them on that client's budget, so they open the link.
	visitor := clientAt(t, "127.0.0.3")
	for _, tc := range []struct {
		n      *node
		method string
		form   bool
	}{
		{followers[0], http.MethodGet, false},
		{followers[1], http.MethodPost, true},
		{followers[0], http.MethodHead, false},
	} {
		resp := visitProtected(t, visitor, tc.n, tc.method, l.ShortCode, "correct horse battery", tc.form)
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != target {
			t.Errorf("another client's %s with the password (form %v) through %s: %d Location %q, want 302 to %s",
				tc.method, tc.form, tc.n.id, resp.StatusCode, resp.Header.Get("Location"), target)
		}
	}
}

// TestBulkThroughAFollowerIsScreenedThere: the follower a bulk reaches
// admits it up to the client's create budget, answers the items their own
// create would refuse, and forwards only the rest; the answer holds every
// item in order, and the created links redirect there at once.
func TestBulkThroughAFollowerIsScreenedThere(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, map[string]string{"create-rate": "0.01", "create-burst": "6"})
	leader, followers := waitOneLeader(t, formationBound, nodes...)
	key := createKey(t, leader, `{"name":"a only","scopes":["links:read","links:write"],"workspaces":["a"]}`)
	follower := followers[0]
	items := []map[string]string{
		{"url": "https://example.com/screened/0"},
		{"url": "https://example.com/screened/1", "workspace": "b", "password": "correct horse"},
		{"url": "https://example.com/screened/2", "password": "correct horse"},
		{"url": "https://example.com/screened/3", "custom_code": "screened-3"},
		{"url": "ftp://example.com/screened/4"},
		{"url": "https://example.com/screened/5"},
		{"url": "https://example.com/screened/6"},
		{"url": "https://example.com/screened/7"},
	}
	bulk, err := json.Marshal(map[string]any{"links": items})
	if err != nil {
		t.Fatal(err)
	}
	r := follower.request(t, http.MethodPost, "/api/v1/urls/bulk", jsonWith(bearer(key.Key)), bulk)
	var answer struct {
		Results []struct {
			Status int   `json:"status"`
			Link   *link `json:"link"`
		} `json:"results"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &answer) != nil || len(answer.Results) != 8 {
		t.Fatalf("bulk through %s: %v", follower.id, r)
	}
	want := []int{201, 403, 201, 201, 400, 201, 429, 429}
	for i, res := range answer.Results {
		if res.Status != want[i] {
			t.Errorf("item %d: %d, want %d; answer %v", i, res.Status, want[i], r)
		}
		if res.Status == http.StatusCreated {
			follower.requireRedirectOrPassword(t, res.Link.ShortCode, items[i]["url"], items[i]["password"])
		}
	}
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("a bulk trimmed by the rate limit has Retry-After %q, want a positive number of seconds", r.header.Get("Retry-After"))
	}
}

// requireRedirectOrPassword checks that code redirects to target. A link
// made with a password (not "") asks for it first (401), and redirects
// once given it; a link made without one must never ask: a 401 there
// would lock its visitors out.
func (n *node) requireRedirectOrPassword(t *testing.T, code, target, password string) {
	t.Helper()
	if password == "" {
		n.requireRedirect(t, code, target)
		return
	}
	if r := n.get(t, "/"+code); r.status != http.StatusUnauthorized {
		t.Errorf("GET /%s, made with a password, without it: want 401, got %v Location %q", code, r, r.header.Get("Location"))
	}
	r := n.request(t, http.MethodGet, "/"+code, http.Header{"X-Link-Password": {password}}, nil)
	if r.status != http.StatusFound || r.header.Get("Location") != target {
		t.Errorf("GET /%s with its password: want 302 to %q, got %v Location %q", code, target, r, r.header.Get("Location"))
	}
}

// waitRaised waits until n's cluster is raised to level (a new cluster's
// leader does so as it starts): the rules that came with it hold from
// then on.
func waitRaised(t *testing.T, n *node, level int) {
	t.Helper()
	if !eventually(10*time.Second, func() bool {
		var st struct {
			Level int `json:"level"`
		}
		return json.Unmarshal(n.get(t, "/admin/cluster").body, &st) == nil && st.Level >= level
	}) {
		t.Fatalf("%s's cluster not raised to level %d within 10 s", n.id, level)
	}
}

// auditActions is GET /admin/audit's answer for query: each entry's
// action and key.
func auditActions(t *testing.T, n *node, query string) []string {
	t.Helper()
	r := n.get(t, "/admin/audit?"+query)
	var audit struct {
		Entries []struct {
			KeyID  string `json:"key_id"`
			Action string `json:"action"`
		} `json:"entries"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &audit) != nil {
		t.Fatalf("audit %s: %v", query, r)
	}
	out := make([]string, len(audit.Entries))
	for i, e := range audit.Entries {
		out[i] = e.Action + " by " + e.KeyID
	}
	return out
}

// TestSecurityAuditSurvivesALinkFlood: ten bulks of 1000 from a workspace
// key evicted every key creation from the audit log. Now key, webhook and
// domain changes are kept apart (?kind=security) and survive the flood,
// and anonymous public creates are not recorded at all.
func TestSecurityAuditSurvivesALinkFlood(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{Settings: map[string]string{"public-create": "true"}})
	waitRaised(t, n, 7)
	writer := createKey(t, n, `{"name":"writer","scopes":["links:write"],"workspaces":["flood"]}`)
	hook := n.postJSON(t, "/admin/webhooks", map[string]any{"url": "https://hooks.example/f5", "events": []string{"link.created"}, "secret": "0123456789abcdef0123"})
	if hook.status != http.StatusCreated {
		t.Fatalf("webhook: %v", hook)
	}
	var h struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(hook.body, &h); err != nil {
		t.Fatal(err)
	}
	if r := n.request(t, http.MethodDelete, "/admin/webhooks/"+h.ID, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("webhook delete: %v", r)
	}
	for b := range 11 {
		r := n.request(t, http.MethodPost, "/api/v1/urls/bulk", jsonWith(bearer(writer.Key)), bulkOf(1000, `{"url":"https://example.com/f5/`+itoa(b)+`/%d","workspace":"flood"}`))
		if r.status != http.StatusOK {
			t.Fatalf("bulk %d: %v", b, r)
		}
	}
	anonymous := n.request(t, http.MethodPost, "/api/v1/urls", http.Header{"Content-Type": {"application/json"}, "Authorization": nil}, []byte(`{"url":"https://example.com/f5/anonymous"}`))
	if anonymous.status != http.StatusCreated {
		t.Fatalf("anonymous create: %v", anonymous)
	}
	security := auditActions(t, n, "kind=security")
	want := []string{"webhook.delete by admin-token", "webhook.set by admin-token", "key.create by admin-token"}
	if strings.Join(security, ", ") != strings.Join(want, ", ") {
		t.Fatalf("security audit after 11,000 keyed creates: %q, want %q", security, want)
	}
	for _, e := range auditActions(t, n, "kind=links&limit=20000") {
		if e != "link.create by "+writer.ID {
			t.Fatalf("link audit holds %q: want only the writer's creates (no anonymous ones)", e)
		}
	}
}

// TestSecurityEditHistoryIsBounded: 3000 edits gave a link 3013 versions
// (6.3 MB, each edit copying them all); a history keeps its newest 50.
func TestSecurityEditHistoryIsBounded(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})
	waitRaised(t, n, 7)
	l := n.createURL(t, "https://example.com/f4/0")
	for i := 1; i <= 60; i++ {
		if r := n.patch(t, l.ShortCode, `{"original_url":"https://example.com/f4/`+itoa(i)+`"}`); r.status != http.StatusOK {
			t.Fatalf("edit %d: %v", i, r)
		}
	}
	r := n.get(t, "/api/v1/urls/"+l.ShortCode+"/history")
	var history struct {
		Versions []struct {
			URL string `json:"original_url"`
		} `json:"versions"`
	}
	if err := json.Unmarshal(r.body, &history); err != nil {
		t.Fatalf("history: %v %v", r, err)
	}
	v := history.Versions
	if len(v) != 50 || v[0].URL != "https://example.com/f4/11" || v[49].URL != "https://example.com/f4/60" {
		t.Fatalf("history of a link edited 60 times: %d versions, %v; want the newest 50, oldest first", len(v), v)
	}
	n.requireRedirect(t, l.ShortCode, "https://example.com/f4/60")
}

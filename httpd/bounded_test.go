package httpd

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
)

// Tests of the rule that work done for others is bounded and checked first
// (docs/SECURITY.md, "Work done for others is bounded"): every check that
// can refuse a request runs before any costly work for it, rate limits
// count items, hashing link passwords has a budget, and nothing shows
// what a request may not see.

// bulkBody is a bulk create of n items, item's %d verbs filled with the
// item's index.
func bulkBody(n int, item string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = strings.ReplaceAll(item, "%d", strconv.Itoa(i))
	}
	return `{"links":[` + strings.Join(items, ",") + `]}`
}

// bulkStatuses are the statuses of a bulk answer's items, in order.
func bulkStatuses(tb testing.TB, ctx *fasthttp.RequestCtx) []int {
	tb.Helper()
	var answer struct {
		Results []struct {
			Status int    `json:"status"`
			Error  string `json:"error"`
		} `json:"results"`
	}
	if status(ctx) != 200 || json.Unmarshal(ctx.Response.Body(), &answer) != nil {
		tb.Fatalf("bulk: %d %.300s", status(ctx), ctx.Response.Body())
	}
	out := make([]int, len(answer.Results))
	for i, r := range answer.Results {
		out[i] = r.Status
	}
	return out
}

// countStatuses is how many times each status occurs.
func countStatuses(statuses []int) map[int]int {
	n := map[int]int{}
	for _, s := range statuses {
		n[s]++
	}
	return n
}

// retryAfter is an answer's Retry-After in seconds; it fails the test
// when there is none or it is not a positive whole number.
func retryAfter(tb testing.TB, ctx *fasthttp.RequestCtx) int {
	tb.Helper()
	raw := string(ctx.Response.Header.Peek(fasthttp.HeaderRetryAfter))
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		tb.Fatalf("%d answer with Retry-After %q, want a positive number of seconds: %s", status(ctx), raw, ctx.Response.Body())
	}
	return n
}

// TestBulkCountsItemsAgainstCreateRate: a bulk of n costs n creates. One
// larger than what the client has left is admitted up to that, its other
// items answered 429; creates after it are limited, and a bulk with
// nothing left is refused whole.
func TestBulkCountsItemsAgainstCreateRate(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.CreateRate, c.CreateBurst = 0.001, 5 })
	ctx := do(s, "POST", bulkPath, "application/json", bulkBody(8, `{"url":"https://example.com/rate/%d"}`))
	got := bulkStatuses(t, ctx)
	want := []int{201, 201, 201, 201, 201, 429, 429, 429}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("a bulk of 8 with 5 creates left: %v, want %v", got, want)
	}
	retryAfter(t, ctx)
	if n := s.fsm.Len(); n != 5 {
		t.Fatalf("%d links after a bulk of 8 with 5 creates left, want 5", n)
	}
	if ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/rate/after"}`); status(ctx) != 429 {
		t.Fatalf("a create after the bulk spent the budget: %d %s", status(ctx), ctx.Response.Body())
	}
	ctx = do(s, "POST", bulkPath, "application/json", bulkBody(1, `{"url":"https://example.com/rate/again/%d"}`))
	if status(ctx) != 429 {
		t.Fatalf("a bulk with nothing left: %d %s, want 429", status(ctx), ctx.Response.Body())
	}
	retryAfter(t, ctx)
	if n := s.fsm.Len(); n != 5 {
		t.Fatalf("%d links after the refused requests, want 5", n)
	}
}

// TestEditsCountAgainstCreateRate: an edit spends the client's create
// budget, so edits cannot be sent without end either.
func TestEditsCountAgainstCreateRate(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.CreateRate, c.CreateBurst = 0.001, 3 })
	code := mustCreate(t, s, `{"url":"https://example.com/edited","title":"first"}`)
	for _, title := range []string{"second", "third"} {
		if ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"title":"`+title+`"}`); status(ctx) != 200 {
			t.Fatalf("edit within the budget: %d %s", status(ctx), ctx.Response.Body())
		}
	}
	ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"title":"fourth"}`)
	if status(ctx) != 429 {
		t.Fatalf("an edit past the budget: %d %s, want 429", status(ctx), ctx.Response.Body())
	}
	retryAfter(t, ctx)
	if l, _ := s.fsm.Get(code); l.Options == nil || l.Options.Title != "third" {
		t.Fatalf("the refused edit changed the link: %+v", l.Options)
	}
	if ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/after-edits"}`); status(ctx) != 429 {
		t.Fatalf("a create after edits spent the budget: %d, want 429", status(ctx))
	}
}

// TestPasswordHashingBudget: password creates from one client and key are
// refused with 429 and Retry-After once past its budget, while another
// client's creates go on. Naming another client in X-Linkraft-Client, which
// only a peer is believed, changes nothing.
func TestPasswordHashingBudget(t *testing.T) {
	s := newTestServer(t, nil)
	freezeBudgets(s)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite, 0, fsm.AllWorkspaces)
	attacker := net.IPv4(192, 0, 2, 10)
	var limited *fasthttp.RequestCtx
	for i := 0; i < 40 && limited == nil; i++ {
		ctx := doFrom(s, attacker, "POST", "/api/v1/urls", "application/json",
			`{"url":"https://example.com/hashed/`+strconv.Itoa(i)+`","password":"correct horse `+strconv.Itoa(i)+`"}`,
			"Authorization", "Bearer "+key, wire.ClientHeader, "203.0.113."+strconv.Itoa(i))
		switch status(ctx) {
		case 201:
		case 429:
			limited = ctx
		default:
			t.Fatalf("password create %d: %d %s", i, status(ctx), ctx.Response.Body())
		}
	}
	if limited == nil {
		t.Fatal("40 password creates from one client and key were never limited")
	}
	retryAfter(t, limited)
	links := s.fsm.Len()
	other := net.IPv4(198, 51, 100, 20)
	if ctx := doFrom(s, other, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/plain"}`); status(ctx) != 201 {
		t.Fatalf("another client's plain create: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := doFrom(s, other, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/other","password":"another horse"}`); status(ctx) != 201 {
		t.Fatalf("another client's password create: %d %s", status(ctx), ctx.Response.Body())
	}
	if n := s.fsm.Len(); n != links+2 {
		t.Fatalf("%d links, want %d", n, links+2)
	}
}

// TestPublicCreateRefusesDomainsAndRules: an anonymous create (with
// --public-create) may not claim a code on a registered domain, set rules
// or make its stats public; nothing is created.
func TestPublicCreateRefusesDomainsAndRules(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.PublicCreate = true })
	if ctx := do(s, "POST", "/admin/domains", "application/json", `{"domain":"brand.example"}`); status(ctx) != 200 {
		t.Fatalf("add domain: %d %s", status(ctx), ctx.Response.Body())
	}
	links := s.fsm.Len()
	for _, tc := range []struct{ name, contentType, body string }{
		{"a registered domain", "application/json", `{"url":"https://phish.example/login","domain":"brand.example","custom_code":"login"}`},
		{"a registered domain, form", "application/x-www-form-urlencoded", `url=https%3A%2F%2Fphish.example%2F&domain=brand.example&custom_code=login`},
		{"rules", "application/json", `{"url":"https://example.com/","rules":[{"when":{"device":"ios"},"url":"https://phish.example/"}]}`},
		{"public stats", "application/json", `{"url":"https://example.com/","public_stats":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := do(s, "POST", "/api/v1/urls", tc.contentType, tc.body, "Authorization", "")
			if status(ctx) != 403 {
				t.Fatalf("anonymous create with %s: %d %s, want 403", tc.name, status(ctx), ctx.Response.Body())
			}
		})
	}
	if n := s.fsm.Len(); n != links {
		t.Fatalf("refused anonymous creates made %d links", n-links)
	}
	if _, ok := s.fsm.Get(fsm.QualifiedCode("brand.example", "login")); ok {
		t.Fatal("brand.example/login was claimed anonymously")
	}
	if ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/plain"}`, "Authorization", ""); status(ctx) != 201 {
		t.Fatalf("a plain anonymous create: %d %s", status(ctx), ctx.Response.Body())
	}
}

// TestPublicStatsNeedsStatsRead: making a link's stats public needs
// stats:read as well as links:write, by create, bulk and edit.
func TestPublicStatsNeedsStatsRead(t *testing.T) {
	s := newTestServer(t, nil)
	const target = "https://example.com/private-stats"
	code := mustCreate(t, s, `{"url":"`+target+`","workspace":"team"}`)
	_, writer := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite, 0, "team")
	_, full := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, "team")
	asWriter := []string{"Authorization", "Bearer " + writer}
	links := s.fsm.Len()

	if ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"public_stats":true}`, asWriter...); status(ctx) != 403 {
		t.Fatalf("edit to public_stats without stats:read: %d %s, want 403", status(ctx), ctx.Response.Body())
	}
	if l, _ := s.fsm.Get(code); l.Options != nil && l.Options.PublicStats {
		t.Fatal("the refused edit made the stats public")
	}
	if ctx := do(s, "GET", "/api/v1/urls/"+code+"/stats", "", "", "Authorization", ""); status(ctx) != 401 {
		t.Fatalf("anonymous stats: %d, want 401", status(ctx))
	}
	if ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/p","public_stats":true}`, asWriter...); status(ctx) != 403 {
		t.Fatalf("create with public_stats without stats:read: %d %s, want 403", status(ctx), ctx.Response.Body())
	}
	ctx := do(s, "POST", bulkPath, "application/json", `{"links":[{"url":"https://example.com/b","public_stats":true}]}`, asWriter...)
	if got := bulkStatuses(t, ctx); len(got) != 1 || got[0] != 403 {
		t.Fatalf("bulk item with public_stats without stats:read: %v, want [403]", got)
	}
	if n := s.fsm.Len(); n != links {
		t.Fatalf("refused creates made %d links", n-links)
	}
	if ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"public_stats":false}`, asWriter...); status(ctx) != 200 {
		t.Fatalf("keeping the stats private needs no stats:read: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"public_stats":true}`, "Authorization", "Bearer "+full); status(ctx) != 200 {
		t.Fatalf("edit to public_stats with stats:read: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "GET", "/api/v1/urls/"+code+"/stats", "", "", "Authorization", ""); status(ctx) != 200 {
		t.Fatalf("anonymous stats once public: %d %s", status(ctx), ctx.Response.Body())
	}
}

// TestEmbargoedLinkShowsNoTarget: before its valid_since a link shows
// nothing of its target to anyone without links:read, not in public stats
// nor in a QR code; once it is valid, public stats and QR codes are back.
func TestEmbargoedLinkShowsNoTarget(t *testing.T) {
	s := newTestServer(t, nil)
	const target = "https://example.com/unannounced-launch"
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	code := mustCreate(t, s, `{"url":"`+target+`","workspace":"team","valid_since":"`+future+`","public_stats":true}`)
	_, statsOnly := addKey(t, s, fsm.ScopeStatsRead, 0, "team")
	_, reader := addKey(t, s, fsm.ScopeLinksRead, 0, "team")
	anonymous := []string{"Authorization", ""}

	for _, path := range []string{"/api/v1/urls/" + code + "/stats", "/stats/" + code, "/api/v1/urls/" + code + "/stats?group_by=browser"} {
		if ctx := do(s, "GET", path, "", "", anonymous...); status(ctx) == 200 || strings.Contains(string(ctx.Response.Body()), target) {
			t.Errorf("anonymous GET %s before valid_since: %d %s", path, status(ctx), ctx.Response.Body())
		}
		ctx := do(s, "GET", path, "", "", "Authorization", "Bearer "+statsOnly)
		if status(ctx) != 200 || strings.Contains(string(ctx.Response.Body()), target) {
			t.Errorf("GET %s with stats:read only, before valid_since: %d %s, want 200 without the target", path, status(ctx), ctx.Response.Body())
		}
	}
	if ctx := do(s, "GET", "/api/v1/urls/"+code+"/qr", "", "", anonymous...); status(ctx) != 404 {
		t.Errorf("anonymous QR before valid_since: %d, want 404", status(ctx))
	}
	if ctx := do(s, "GET", "/api/v1/urls/"+code+"/qr", "", "", "Authorization", "Bearer "+statsOnly); status(ctx) != 404 {
		t.Errorf("QR with stats:read only, before valid_since: %d, want 404", status(ctx))
	}
	if ctx := do(s, "GET", "/api/v1/urls/"+code+"/qr", "", "", "Authorization", "Bearer "+reader); status(ctx) != 200 {
		t.Errorf("QR with links:read before valid_since: %d %s, want 200", status(ctx), ctx.Response.Body())
	}

	if ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"valid_since":null}`); status(ctx) != 200 {
		t.Fatalf("clear valid_since: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "GET", "/api/v1/urls/"+code+"/stats", "", "", anonymous...); status(ctx) != 200 || !strings.Contains(string(ctx.Response.Body()), target) {
		t.Errorf("anonymous stats once valid: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "GET", "/api/v1/urls/"+code+"/qr", "", "", anonymous...); status(ctx) != 200 {
		t.Errorf("anonymous QR once valid: %d", status(ctx))
	}
}

// useHashLimits gives s a hashing budget of l instead of its CPUs'.
func useHashLimits(s *Server, l hashLimits) {
	s.passwords.budget.stop()
	s.passwords.budget = newHashBudget(l)
}

// TestHashBudgetTakesFromEveryBucket: a request takes hashes from its
// client's, its key's and the node's budget, as many as all three have
// left, and says which ran out and when the next hash is allowed.
func TestHashBudgetTakesFromEveryBucket(t *testing.T) {
	h := newHashBudget(hashLimits{
		perClient: budget{perMinute: 60, burst: 3},
		perKey:    budget{perMinute: 60, burst: 5},
		node:      0.5, nodeBurst: 9, slots: 1,
	})
	t.Cleanup(h.stop)
	frozen := time.Now()
	h.now = func() time.Time { return frozen }
	alice, bob, carol := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("2001:db8::1")
	// A request without a client (forwarded by a peer that named none)
	// takes from the key's and the node's budgets only.
	steps := []struct {
		client  netip.Addr
		key     string
		asked   int
		granted int
		whose   string
		wait    int
	}{
		{alice, "k1", 2, 2, "", 0},
		{alice, "k1", 2, 1, "for this address", 1},
		{bob, "k1", 5, 2, "for this API key", 1},
		{carol, "", 10, 3, "for this address", 1},
		{netip.Addr{}, "", 10, 1, "on this node", 2},
		{netip.Addr{}, "k2", 1, 0, "on this node", 2},
	}
	for i, st := range steps {
		granted, short := h.admit(st.client, st.key, st.asked)
		if granted != st.granted {
			t.Fatalf("step %d: granted %d of %d, want %d", i, granted, st.asked, st.granted)
		}
		switch {
		case st.whose == "" && short != nil:
			t.Fatalf("step %d: short %+v, want none", i, short)
		case st.whose != "" && (short == nil || short.whose != st.whose || short.retryAfter != st.wait):
			t.Fatalf("step %d: short %+v, want %s, retry after %d s", i, short, st.whose, st.wait)
		}
	}
	frozen = frozen.Add(2 * time.Second)
	if granted, _ := h.admit(netip.Addr{}, "", 1); granted != 1 {
		t.Fatalf("after the node's budget refilled: granted %d, want 1", granted)
	}
}

// TestHashingBudgetPerKeyAndNode: one key cannot spread its hashes over
// many addresses, many keys together cannot exceed the node's budget, and
// an edit's password and a bulk's passwords spend it too. A client-sent
// X-Linkraft-Client changes nothing on the public port.
func TestHashingBudgetPerKeyAndNode(t *testing.T) {
	s := newTestServer(t, nil)
	useHashLimits(s, hashLimits{
		perClient: budget{perMinute: 0.001, burst: 100},
		perKey:    budget{perMinute: 6, burst: 3},
		node:      0.001, nodeBurst: 6, slots: 1,
	})
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite, 0, fsm.AllWorkspaces)
	asKey := []string{"Authorization", "Bearer " + key}
	create := func(from net.IP, i int, headers ...string) *fasthttp.RequestCtx {
		return doFrom(s, from, "POST", "/api/v1/urls", "application/json",
			`{"url":"https://example.com/k/`+strconv.Itoa(i)+`","password":"correct horse"}`, headers...)
	}
	for i := range 4 {
		ctx := create(net.IPv4(192, 0, 2, byte(1+i)), i, append(asKey, wire.ClientHeader, "203.0.113."+strconv.Itoa(i))...)
		want := 201
		if i == 3 {
			want = 429
		}
		if status(ctx) != want {
			t.Fatalf("password create %d with one key from its own address: %d %s, want %d", i, status(ctx), ctx.Response.Body(), want)
		}
		if want == 429 && !strings.Contains(string(ctx.Response.Body()), "API key") {
			t.Fatalf("the refusal does not say the key's budget is spent: %s", ctx.Response.Body())
		}
	}
	// The operator's token is a key of its own: the node has 3 hashes left.
	code := mustCreate(t, s, `{"url":"https://example.com/edited"}`)
	if ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"password":"correct horse"}`); status(ctx) != 200 {
		t.Fatalf("password edit within the budget: %d %s", status(ctx), ctx.Response.Body())
	}
	ctx := do(s, "POST", bulkPath, "application/json", bulkBody(4, `{"url":"https://example.com/b/%d","password":"correct horse"}`))
	if got, want := bulkStatuses(t, ctx), []int{201, 201, 429, 429}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("a bulk of 4 passwords with 2 hashes left on the node: %v, want %v", got, want)
	}
	retryAfter(t, ctx)
	ctx = do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"password":"another horse","title":"t"}`)
	if status(ctx) != 429 || !strings.Contains(string(ctx.Response.Body()), "node") {
		t.Fatalf("password edit past the node's budget: %d %s, want 429", status(ctx), ctx.Response.Body())
	}
	retryAfter(t, ctx)
	if l, _ := s.fsm.Get(code); l.Options.Title != "" {
		t.Fatalf("the refused edit changed the link: %+v", l.Options)
	}
	if ctx := do(s, "PATCH", "/api/v1/urls/"+code, "application/json", `{"password":null}`); status(ctx) != 200 {
		t.Fatalf("removing a password hashes nothing: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := create(net.IPv4(198, 51, 100, 1), 99); status(ctx) != 429 {
		t.Fatalf("password create past the node's budget: %d", status(ctx))
	}
	if ctx := doFrom(s, net.IPv4(198, 51, 100, 2), "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/plain"}`); status(ctx) != 201 {
		t.Fatalf("a plain create while the budget is spent: %d %s", status(ctx), ctx.Response.Body())
	}
}

// TestTakeUpTo: a bulk is admitted up to what its client has left.
func TestTakeUpTo(t *testing.T) {
	l := newIPLimiter(0.5, 5)
	t.Cleanup(l.stop)
	frozen := time.Now()
	l.now = func() time.Time { return frozen }
	ip := netip.MustParseAddr("192.0.2.1")
	for i, st := range []struct{ asked, taken, wait int }{
		{3, 3, 0}, {3, 2, 2}, {1, 0, 2},
	} {
		if taken, wait := l.takeUpTo(ip, st.asked); taken != st.taken || wait != st.wait {
			t.Fatalf("step %d: took %d of %d, retry after %d; want %d, %d", i, taken, st.asked, wait, st.taken, st.wait)
		}
	}
	frozen = frozen.Add(4 * time.Second)
	if taken, _ := l.takeUpTo(ip, 5); taken != 2 {
		t.Fatalf("4 s later at 0.5 a second: took %d, want 2", taken)
	}
	unlimited := newIPLimiter(0, 1)
	if taken, wait := unlimited.takeUpTo(ip, 1000); taken != 1000 || wait != 0 {
		t.Fatalf("without a limit: took %d, retry after %d", taken, wait)
	}
}

// TestHashingBucketsAreBounded: the map of per-client hashing buckets
// holds at most its bound; past it a new address is refused a hash (not
// given an older one's bucket back full), while a known one goes on.
func TestHashingBucketsAreBounded(t *testing.T) {
	h := newHashBudget(hashLimits{
		perClient: budget{perMinute: 60, burst: 5},
		perKey:    budget{perMinute: 60, burst: 5},
		node:      100, nodeBurst: 100, slots: 1,
	})
	defer h.stop()
	h.clients.max = 2
	for i := range 2 {
		if n, short := h.admit(netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), "", 1); n != 1 {
			t.Fatalf("address %d within the bound: %d admitted, %+v", i, n, short)
		}
	}
	if n, short := h.admit(netip.AddrFrom4([4]byte{192, 0, 2, 9}), "", 1); n != 0 || short == nil || !strings.Contains(short.message(), "new addresses") {
		t.Fatalf("a third address past the bound of 2: %d admitted, %+v", n, short)
	}
	if n, _ := h.admit(netip.AddrFrom4([4]byte{192, 0, 2, 0}), "", 1); n != 1 {
		t.Fatal("a known address was refused once the map was full")
	}
}

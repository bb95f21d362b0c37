package httpd

import (
	"encoding/json"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/crypto/bcrypt"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/cluster/wire"
)

func TestLinkPasswordRoundTrip(t *testing.T) {
	long := strings.Repeat("0123456789", 10) // 100 characters: bcrypt alone reads 72
	tests := []struct {
		name, pw string
		wrong    []string
	}{
		{"short", "hunter22", []string{"hunter2", "Hunter22", "hunter22 ", ""}},
		// Passwords differing only after byte 72 differ: the pre-hash sees them whole.
		{"100 characters", long, []string{long[:99] + "x", long[:72]}},
		{"128 characters of two bytes", strings.Repeat("é", 128), []string{strings.Repeat("é", 127) + "e"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hash, err := hashLinkPassword(tt.pw)
			if err != nil {
				t.Fatalf("hashLinkPassword: %v", err)
			}
			if cost, err := bcrypt.Cost([]byte(hash)); err != nil || cost != linkPasswordCost {
				t.Errorf("cost %d (%v), want %d", cost, err, linkPasswordCost)
			}
			if strings.Contains(hash, tt.pw) {
				t.Error("the hash holds the password")
			}
			if !linkPasswordMatches(hash, tt.pw) {
				t.Error("the password does not match its own hash")
			}
			for _, w := range tt.wrong {
				if linkPasswordMatches(hash, w) {
					t.Errorf("%q matches the hash of %q", w, tt.pw)
				}
			}
		})
	}
}

func TestLinkPasswordMatchesNoHash(t *testing.T) {
	for _, hash := range []string{"", "not a bcrypt hash", "$2a$10$"} {
		if linkPasswordMatches(hash, "hunter22") {
			t.Errorf("matched against hash %q", hash)
		}
	}
}

func TestPasswordRule(t *testing.T) {
	tests := []struct {
		pw string
		ok bool
	}{
		{"", false},
		{"1234567", false},
		{"12345678", true},
		{"ééééééé", false}, // 14 bytes, 7 characters
		{"éééééééé", true},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
		{strings.Repeat("日", 128), true}, // 384 bytes
		{strings.Repeat("日", 129), false},
	}
	for _, tt := range tests {
		err := checkPasswordRule(tt.pw)
		if (err == nil) != tt.ok {
			t.Errorf("checkPasswordRule(%d runes, %d bytes) = %v, want ok %v", len([]rune(tt.pw)), len(tt.pw), err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "8 to 128 characters") {
			t.Errorf("error %q does not name the rule", err)
		}
	}
	if _, err := hashLinkPassword("short"); err == nil {
		t.Error("hashLinkPassword hashed a password that breaks the rule")
	}
}

// freezeBudgets stops the clocks of s's password budgets (hashing and
// guessing): nothing refills while the test runs, however slowly a loaded
// machine runs it, so a burst is spent at the same request every time.
func freezeBudgets(s *Server) {
	frozen := time.Now()
	s.passwords.budget.now = func() time.Time { return frozen }
	s.redirects.guesses.now = func() time.Time { return frozen }
}

// frozenGuessLimiter is a limiter with the default budgets whose clock
// stands still until the test moves it.
func frozenGuessLimiter(t *testing.T) (*guessLimiter, *time.Time) {
	l := newDefaultGuessLimiter()
	t.Cleanup(l.stop)
	now := time.Unix(1_750_000_000, 0)
	l.now = func() time.Time { return now }
	return l, &now
}

var (
	guessAlice    = netip.MustParseAddr("192.0.2.1")
	guessBob      = netip.MustParseAddr("192.0.2.2")
	guessCarol6   = netip.MustParseAddr("2001:db8:1:2::1")
	guessCarol6b  = netip.MustParseAddr("2001:db8:1:2:ffff::9") // carol's /64
	guessDave6    = netip.MustParseAddr("2001:db8:1:3::1")      // the next /64
	guessAliceMap = netip.MustParseAddr("::ffff:192.0.2.1")
)

// TestGuessLimiterPerClient: a client has clientGuessBurst guesses, then
// one every six seconds, over all links; an IPv6 /64 is one client.
func TestGuessLimiterPerClient(t *testing.T) {
	l, now := frozenGuessLimiter(t)
	wait := 60 / clientGuessesPerMinute
	steps := []struct {
		client netip.Addr
		code   string
		ok     bool
	}{
		{guessAlice, "a", true}, {guessAlice, "a", true}, {guessAlice, "b", true}, {guessAlice, "a", true}, {guessAlice, "c", true},
		{guessAlice, "a", false}, // the sixth guess, on any link
		{guessAlice, "d", false},
		{guessAliceMap, "a", false}, // the same address
		{guessBob, "a", true},       // another client
		{guessCarol6, "a", true}, {guessCarol6b, "a", true}, {guessCarol6, "b", true}, {guessCarol6b, "c", true}, {guessCarol6, "a", true},
		{guessCarol6b, "a", false}, // the same /64
		{guessDave6, "a", true},
	}
	for i, st := range steps {
		retry, ok := l.allow(st.client, st.code)
		if ok != st.ok {
			t.Fatalf("step %d: %s on %q: ok %v, want %v", i, st.client, st.code, ok, st.ok)
		}
		if !ok && retry != wait {
			t.Fatalf("step %d: retry after %d, want %d", i, retry, wait)
		}
	}
	*now = now.Add(time.Duration(wait) * time.Second)
	if _, ok := l.allow(guessAlice, "a"); !ok {
		t.Fatal("no guess after waiting for one")
	}
	if _, ok := l.allow(guessAlice, "a"); ok {
		t.Fatal("two guesses after waiting for one")
	}
}

// TestGuessLimiterPerLink: many clients together have linkGuessBurst
// guesses on one link, then one a second; other links are not affected,
// and a client refused for the link keeps its own budget.
func TestGuessLimiterPerLink(t *testing.T) {
	l, now := frozenGuessLimiter(t)
	client := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}) }
	for i := range linkGuessBurst {
		if _, ok := l.allow(client(i), "ws/target"); !ok {
			t.Fatalf("guess %d on the link refused", i+1)
		}
	}
	late := client(linkGuessBurst)
	retry, ok := l.allow(late, "ws/target")
	if ok || retry != 60/linkGuessesPerMinute {
		t.Fatalf("guess past the link's burst: ok %v, retry after %d", ok, retry)
	}
	for i := range clientGuessBurst {
		if _, ok := l.allow(late, "ws/other"); !ok {
			t.Fatalf("the refused client's guess %d on another link refused: its budget was spent", i+1)
		}
	}
	if _, ok := l.allow(late, "ws/other"); ok {
		t.Fatal("the client guessed past its own burst")
	}
	*now = now.Add(time.Second)
	if _, ok := l.allow(client(0), "ws/target"); !ok {
		t.Fatal("no guess on the link a second later")
	}
}

// TestGuessLimiterBounded: full buckets are swept, and past the cap a new
// key is refused while known ones go on.
func TestGuessLimiterBounded(t *testing.T) {
	l, now := frozenGuessLimiter(t)
	l.clients.max = 2
	l.allow(guessAlice, "a")
	l.allow(guessBob, "b")
	if retry, ok := l.allow(guessCarol6, "a"); ok || retry != int(limiterSweepInterval/time.Second) {
		t.Fatalf("a new client past the cap: ok %v, retry after %d", ok, retry)
	}
	if _, ok := l.allow(guessAlice, "a"); !ok {
		t.Fatal("a known client refused at the cap")
	}
	if n := len(l.links.m); n != 2 {
		t.Fatalf("%d link buckets; the refused guess made one", n)
	}

	l.sweepAt(*now) // nothing has refilled
	if len(l.clients.m) != 2 || len(l.links.m) != 2 {
		t.Fatalf("swept buckets still in use: %d clients, %d links", len(l.clients.m), len(l.links.m))
	}
	*now = now.Add(time.Minute)
	l.sweepAt(*now)
	if len(l.clients.m) != 0 || len(l.links.m) != 0 {
		t.Fatalf("full buckets kept: %d clients, %d links", len(l.clients.m), len(l.links.m))
	}
	if _, ok := l.allow(guessCarol6, "a"); !ok {
		t.Fatal("a new client refused after the sweep")
	}
	l.stop()
	l.stop() // twice is harmless
}

func TestGuessLimiterUnlimited(t *testing.T) {
	l := newGuessLimiter(budget{}, budget{})
	defer l.stop()
	for i := range 1000 {
		if _, ok := l.allow(guessAlice, "a"); !ok {
			t.Fatalf("guess %d refused without budgets", i)
		}
	}
	if len(l.clients.m)+len(l.links.m) != 0 {
		t.Fatal("buckets kept without budgets")
	}
}

// passwordRequest is a request to /code with the given method, headers
// (name, value pairs) and body.
func passwordRequest(method, body string, header ...string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI("/code?utm=1")
	ctx.Request.Header.SetHost("sho.rt")
	for i := 0; i+1 < len(header); i += 2 {
		ctx.Request.Header.Set(header[i], header[i+1])
	}
	if body != "" {
		ctx.Request.SetBodyString(body)
	}
	return &ctx
}

const formType = "application/x-www-form-urlencoded"

func TestSubmittedPassword(t *testing.T) {
	big := "password=hunter22&pad=" + strings.Repeat("x", maxPasswordForm)
	tests := []struct {
		name, method, body string
		header             []string
		want               string
		ok                 bool
	}{
		{"header", "GET", "", []string{"X-Link-Password", "hunter22"}, "hunter22", true},
		{"header, lower case", "GET", "", []string{"x-link-password", "p@ss word"}, "p@ss word", true},
		{"header before form", "POST", "password=other", []string{"X-Link-Password", "hunter22", "Content-Type", formType}, "hunter22", true},
		{"empty header", "GET", "", []string{"X-Link-Password", ""}, "", false},
		{"form", "POST", "password=hunter%2022%26", []string{"Content-Type", formType}, "hunter 22&", true},
		{"form with charset", "POST", "password=hunter22", []string{"Content-Type", "Application/X-WWW-Form-URLEncoded; charset=UTF-8"}, "hunter22", true},
		{"form, empty field", "POST", "password=", []string{"Content-Type", formType}, "", false},
		{"form, no field", "POST", "pw=hunter22", []string{"Content-Type", formType}, "", false},
		{"form too large", "POST", big, []string{"Content-Type", formType}, "", false},
		{"form at the limit", "POST", "password=hunter22&pad=" + strings.Repeat("x", maxPasswordForm-22), []string{"Content-Type", formType}, "hunter22", true},
		{"JSON body", "POST", `{"password":"hunter22"}`, []string{"Content-Type", "application/json"}, "", false},
		{"multipart", "POST", "password=hunter22", []string{"Content-Type", "multipart/form-data; boundary=x"}, "", false},
		{"form on GET", "GET", "password=hunter22", []string{"Content-Type", formType}, "", false},
		{"query is not a form", "GET", "", nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := submittedPassword(passwordRequest(tt.method, tt.body, tt.header...))
			if got != tt.want || ok != tt.ok {
				t.Errorf("submittedPassword = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestPasswordFormPage(t *testing.T) {
	const code = `ws/<b>"x'&`
	tests := []struct {
		name, message string
		status        int
		retryAfter    int
		notice        string
	}{
		{"ask", "", 401, 0, ""},
		{"wrong", passwordWrongMessage, 401, 0, "Wrong password"},
		{"limited", "", 429, 17, "Try again in 17 seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := passwordRequest("GET", "", "Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
			if tt.status == 429 {
				writePasswordLimited(ctx, code, tt.retryAfter)
			} else {
				writePasswordForm(ctx, code, tt.status, tt.message)
			}
			r := &ctx.Response
			if r.StatusCode() != tt.status {
				t.Fatalf("status %d, want %d", r.StatusCode(), tt.status)
			}
			body := string(r.Body())
			for _, want := range []string{
				`<form method="post">`,
				`<input type="password" name="password" required minlength="8" maxlength="128" autocomplete="current-password"`,
				`<button type="submit">`,
				`ws/&lt;b&gt;&#34;x&#39;&amp;`,
				tt.notice,
			} {
				if !strings.Contains(body, want) {
					t.Errorf("page lacks %q:\n%s", want, body)
				}
			}
			for _, bad := range []string{"<b>", "//", "src=", "href=", "url(", "@import", "<script", "<link", "action="} {
				if strings.Contains(body, bad) {
					t.Errorf("page has %q:\n%s", bad, body)
				}
			}
			if tt.notice == "" && strings.Contains(body, `role="alert"`) {
				t.Error("a notice on the first ask")
			}
			headers := map[string]string{
				fasthttp.HeaderContentType:           "text/html; charset=utf-8",
				fasthttp.HeaderCacheControl:          cacheControlNoStore,
				fasthttp.HeaderXContentTypeOptions:   "nosniff",
				fasthttp.HeaderContentSecurityPolicy: "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
				fasthttp.HeaderReferrerPolicy:        "no-referrer",
			}
			if tt.status == 429 {
				headers[fasthttp.HeaderRetryAfter] = strconv.Itoa(tt.retryAfter)
			}
			for k, v := range headers {
				if got := string(r.Header.Peek(k)); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestPasswordProblemForAPIClients(t *testing.T) {
	tests := []struct {
		name, message string
		status        int
		detail        string
	}{
		{"ask", "", 401, "this link is protected by a password: send it in X-Link-Password"},
		{"wrong", passwordWrongMessage, 401, "wrong password"},
		{"limited", "", 429, "too many wrong passwords"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := passwordRequest("GET", "", "Accept", "application/json")
			if tt.status == 429 {
				writePasswordLimited(ctx, "code", 6)
			} else {
				writePasswordForm(ctx, "code", tt.status, tt.message)
			}
			r := &ctx.Response
			if r.StatusCode() != tt.status || string(r.Header.ContentType()) != "application/problem+json" {
				t.Fatalf("%d %s, want %d problem+json", r.StatusCode(), r.Header.ContentType(), tt.status)
			}
			var p struct {
				Status int    `json:"status"`
				Detail string `json:"detail"`
			}
			if err := json.Unmarshal(r.Body(), &p); err != nil {
				t.Fatalf("body %q: %v", r.Body(), err)
			}
			if p.Status != tt.status || p.Detail != tt.detail {
				t.Errorf("problem %+v, want status %d, detail %q", p, tt.status, tt.detail)
			}
			if got := string(r.Header.Peek(fasthttp.HeaderCacheControl)); got != cacheControlNoStore {
				t.Errorf("Cache-Control %q", got)
			}
			if got := string(r.Header.Peek(fasthttp.HeaderRetryAfter)); tt.status == 429 && got != "6" {
				t.Errorf("Retry-After %q, want 6", got)
			}
		})
	}
}

// leaderElsewhere makes a test server a follower: every request it
// forwards goes to answer, as the leader would receive it, and the server
// relays what answer wrote. With err set, Forward fails with it instead,
// forwarded as the cluster's Forward reports that error.
type leaderElsewhere struct {
	Leader
	answer    func(req *fasthttp.Request, resp *fasthttp.Response)
	err       error
	forwarded bool

	mu   sync.Mutex
	sent []forwardedRequest
}

// forwardedRequest is what the leader was sent, and as what.
type forwardedRequest struct {
	kind string
	req  *fasthttp.Request
}

func (l *leaderElsewhere) Forward(req *fasthttp.Request, resp *fasthttp.Response, opts cluster.ForwardOptions) (bool, error) {
	if l.err != nil {
		return l.forwarded, l.err
	}
	var got fasthttp.Request
	req.CopyTo(&got)
	l.mu.Lock()
	l.sent = append(l.sent, forwardedRequest{opts.Kind, &got})
	l.mu.Unlock()
	l.answer(&got, resp)
	return true, nil
}

func (l *leaderElsewhere) requests() []forwardedRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sent)
}

// followerOf is a test server whose leader is l.
func followerOf(t *testing.T, l *leaderElsewhere) *Server {
	return newTestServerOn(t, nil, func(n *Node) {
		l.Leader = n.Leader
		n.Leader = l
	})
}

// TestFollowerForwardsPasswordGuesses: a follower judges no password
// itself. Each visit that brings one goes to the leader, which alone
// keeps the guess budgets, named by the client's address as this node
// saw it (whatever the client put in the peer header), with the visitor;
// the follower answers with the leader's answer. Judged on each node, a
// client had every node's budget: three times the guesses on three
// nodes.
func TestFollowerForwardsPasswordGuesses(t *testing.T) {
	leader := &leaderElsewhere{answer: func(_ *fasthttp.Request, resp *fasthttp.Response) {
		resp.SetStatusCode(fasthttp.StatusUnauthorized)
		resp.SetBodyString("the leader's answer")
	}}
	s := followerOf(t, leader)
	code := mustCreate(t, s, `{"url":"https://example.com/secret","password":"correct horse"}`)
	attacker := net.IPv4(192, 0, 2, 7)

	// Asking for the form is no guess: the follower answers it.
	if ctx := doFrom(s, attacker, "GET", "/"+code, "", "", "Accept", "text/html"); status(ctx) != 401 || !strings.Contains(string(ctx.Response.Body()), `type="password"`) {
		t.Fatalf("a visit without a password: %d %s", status(ctx), ctx.Response.Body())
	}
	if n := len(leader.requests()); n != 0 {
		t.Fatalf("a visit without a password was forwarded (%d requests)", n)
	}

	const guesses = 3 * clientGuessBurst
	for i := range guesses {
		guess := "guess number " + strconv.Itoa(i)
		var ctx *fasthttp.RequestCtx
		if i%2 == 0 {
			ctx = doFrom(s, attacker, "GET", "/"+code, "", "", "X-Link-Password", guess, wire.ClientHeader, "198.51.100.1")
		} else {
			ctx = doFrom(s, attacker, "POST", "/"+code, "application/x-www-form-urlencoded", url.Values{"password": {guess}}.Encode(),
				wire.ClientHeader, "198.51.100.1")
		}
		if status(ctx) != 401 || string(ctx.Response.Body()) != "the leader's answer" {
			t.Fatalf("guess %d: %d %q, want the leader's answer", i+1, status(ctx), ctx.Response.Body())
		}
	}
	sent := leader.requests()
	if len(sent) != guesses {
		t.Fatalf("%d guesses, %d forwarded to the leader", guesses, len(sent))
	}
	for i, f := range sent {
		h := &f.req.Header
		if f.kind != "unlock" || string(h.Peek(wire.ClientHeader)) != "192.0.2.7" || len(h.Peek(wire.VisitorHeader)) == 0 {
			t.Errorf("guess %d went as %q, client %q, visitor %q: want unlock, the client's address 192.0.2.7 and a visitor",
				i+1, f.kind, h.Peek(wire.ClientHeader), h.Peek(wire.VisitorHeader))
		}
		if pw, _ := submittedPasswordOf(f.req); pw != "guess number "+strconv.Itoa(i) {
			t.Errorf("guess %d reached the leader with password %q", i+1, pw)
		}
	}
}

// submittedPasswordOf is the password a forwarded request carries, read
// as the leader reads it.
func submittedPasswordOf(req *fasthttp.Request) (string, bool) {
	var ctx fasthttp.RequestCtx
	ctx.Init(req, nil, nil)
	return submittedPassword(&ctx)
}

// TestPasswordWithoutALeader: with no leader to check a password against
// the cluster's guess budgets, a follower answers 503 and shows nothing of
// the link; it does not judge the guess on its own budget.
func TestPasswordWithoutALeader(t *testing.T) {
	s := followerOf(t, &leaderElsewhere{err: cluster.ErrNoLeader, forwarded: true})
	code := mustCreate(t, s, `{"url":"https://example.com/secret","password":"correct horse"}`)
	ctx := do(s, "GET", "/"+code, "", "", "X-Link-Password", "correct horse")
	if status(ctx) != 503 || location(ctx) != "" || strings.Contains(string(ctx.Response.Body()), "example.com") {
		t.Fatalf("the right password without a leader: %d %q %s", status(ctx), location(ctx), ctx.Response.Body())
	}
}

// TestPasswordMidUpgrade: while a server of the cluster runs an older
// build, which would serve a forwarded visit without checking its
// password, the node the client reached judges the guess on its own
// budgets, as before.
func TestPasswordMidUpgrade(t *testing.T) {
	s := followerOf(t, &leaderElsewhere{err: cluster.ErrUpgrading})
	code := mustCreate(t, s, `{"url":"https://example.com/secret","password":"correct horse"}`)
	if ctx := do(s, "GET", "/"+code, "", "", "X-Link-Password", "correct horse"); status(ctx) != 302 || location(ctx) != "https://example.com/secret" {
		t.Fatalf("the right password: %d %q", status(ctx), location(ctx))
	}
	attacker := net.IPv4(192, 0, 2, 7)
	limited := false
	for i := 0; i < 2*clientGuessBurst && !limited; i++ {
		limited = status(doFrom(s, attacker, "GET", "/"+code, "", "", "X-Link-Password", "guess "+strconv.Itoa(i))) == 429
	}
	if !limited {
		t.Fatalf("%d wrong guesses from one client were never limited", 2*clientGuessBurst)
	}
}

// TestClientHeaderIsAPeersWord: on the leader, a client that names
// another address in the peer header with each guess still spends its
// own budget: only a request that came from a peer is attributed to the
// address it names.
func TestClientHeaderIsAPeersWord(t *testing.T) {
	s := newTestServer(t, nil)
	freezeBudgets(s)
	code := mustCreate(t, s, `{"url":"https://example.com/secret","password":"correct horse"}`)
	attacker := net.IPv4(192, 0, 2, 7)
	for i := range 2 * clientGuessBurst {
		spoofed := "198.51.100." + strconv.Itoa(i+1)
		ctx := doFrom(s, attacker, "GET", "/"+code, "", "", "X-Link-Password", "guess "+strconv.Itoa(i), wire.ClientHeader, spoofed)
		if status(ctx) == 429 {
			if i != clientGuessBurst {
				t.Fatalf("limited at guess %d, want at %d (the client's burst)", i+1, clientGuessBurst+1)
			}
			return
		}
	}
	t.Fatalf("%d guesses each naming another client in %s were never limited", 2*clientGuessBurst, wire.ClientHeader)
}

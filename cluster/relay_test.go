package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
)

// member is an in-process node; its port serves Raft and the
// node-to-node protocol, as every node's does.
type member struct {
	*Node
}

// relayedRequests is how many POST creates m sent that a leader answered.
func (m *member) relayedRequests(t *testing.T) int {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.metrics.forwards)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == kindCreateBatch && labels["outcome"] == outcomeOK {
				return int(metric.GetCounter().GetValue())
			}
		}
	}
	return 0
}

// openMember starts a node. A node opened with bootstrap false waits to be
// joined.
func openMember(t *testing.T, id string, bootstrap bool, writeTimeout time.Duration, tweaks ...func(*Config)) *member {
	t.Helper()
	expect := 1
	if !bootstrap {
		expect = 2 // without gossip or seeds: wait to be added
	}
	cfg := Config{
		ID:        id,
		DataDir:   t.TempDir(),
		RaftAddr:  freeAddr(t),
		Key:       testKey(t),
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Discovery: DiscoveryConfig{BootstrapExpect: expect},
		Raft:      RaftConfig{LogLevel: "off"},
		Writes:    WriteConfig{Timeout: writeTimeout, ClickFlushInterval: time.Hour},
	}
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	n, err := Open(cfg, fsm.New())
	if err != nil {
		t.Fatalf("open %s: %v", id, err)
	}
	t.Cleanup(func() { n.Close() })
	return &member{Node: n}
}

// openPair starts a leader and a follower that knows where the leader is.
func openPair(t *testing.T, writeTimeout time.Duration, tweaks ...func(*Config)) (leader, follower *member) {
	t.Helper()
	leader = openMember(t, "n1", true, writeTimeout, tweaks...)
	waitFor(t, leader.leadership.ready)
	follower = openMember(t, "n2", false, writeTimeout, tweaks...)
	if err := leader.members.AddServer("n2", follower.cfg.RaftAddr, "", false, ""); err != nil {
		t.Fatalf("join: %v", err)
	}
	waitFor(t, func() bool {
		to, err := follower.leadership.leader()
		return err == nil && to.addr == leader.cfg.RaftAddr
	})
	return leader, follower
}

func TestCreatesThroughAFollowerShareRequests(t *testing.T) {
	t.Parallel()
	_, follower := openPair(t, 5*time.Second)
	const creates = 300
	links := make([]fsm.Link, creates)
	errs := make(chan error, creates)
	var wg sync.WaitGroup
	for i := range creates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := follower.Create(context.Background(), fsm.CreateRequest{
				RequestID: fmt.Sprintf("key-%d", i), URL: fmt.Sprintf("https://example.com/%d", i), Workspace: "default", CodeLength: 7,
			})
			if err == nil {
				err = res.Err
			}
			if err != nil {
				errs <- err
				return
			}
			// Read-your-writes where the create was answered.
			if got, ok := follower.FSM().Get(res.Link.Code); !ok || got.URL != res.Link.URL {
				errs <- fmt.Errorf("%s is not on the follower right after its create: %+v", res.Link.Code, got)
				return
			}
			links[i] = res.Link
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create through the follower: %v", err)
	}
	seen := map[string]bool{}
	for i, l := range links {
		if seen[l.Code] || l.URL != fmt.Sprintf("https://example.com/%d", i) {
			t.Fatalf("create %d: %+v (code seen before: %v)", i, l, seen[l.Code])
		}
		seen[l.Code] = true
	}
	if got := follower.relayedRequests(t); got == 0 || got >= creates {
		t.Fatalf("%d creates took %d relayed requests; concurrent creates should share requests", creates, got)
	}
	t.Logf("%d creates in %d relayed requests", creates, follower.relayedRequests(t))
}

// TestRelayedCreatesAnswerLikeTheLeader: the same create gives the same
// outcome — the link, or the same error with the same message — whether
// the leader proposes it or a follower relays it.
func TestRelayedCreatesAnswerLikeTheLeader(t *testing.T) {
	t.Parallel()
	leader, follower := openPair(t, 5*time.Second)
	ctx := context.Background()
	for _, code := range []string{"taken-l", "taken-f"} {
		if res, err := leader.Create(ctx, fsm.CreateRequest{URL: "https://example.com/" + code, Workspace: "default", CustomCode: code, CodeLength: 7}); err != nil || res.Err != nil {
			t.Fatalf("setup: %v %v", err, res.Err)
		}
	}
	tests := []struct {
		name string
		req  func(via string) fsm.CreateRequest // via: "l" or "f", for codes and keys of its own
		err  error
	}{
		{"a new link", func(via string) fsm.CreateRequest {
			return fsm.CreateRequest{URL: "https://example.com/new-" + via, Workspace: "default", CodeLength: 7}
		}, nil},
		{"a custom code", func(via string) fsm.CreateRequest {
			return fsm.CreateRequest{URL: "https://example.com/c", Workspace: "w1", CustomCode: "custom-" + via, CodeLength: 7}
		}, nil},
		{"an expiry", func(via string) fsm.CreateRequest {
			return fsm.CreateRequest{URL: "https://example.com/e", Workspace: "default", ExpiresAt: 4102444800000, CodeLength: 7}
		}, nil},
		{"a taken code", func(via string) fsm.CreateRequest {
			return fsm.CreateRequest{URL: "https://example.com/other", Workspace: "default", CustomCode: "taken-" + via, CodeLength: 7}
		}, fsm.ErrCodeTaken},
		{"a reserved word", func(string) fsm.CreateRequest {
			return fsm.CreateRequest{URL: "https://example.com/r", Workspace: "default", CustomCode: "admin", CodeLength: 7}
		}, fsm.ErrReserved},
		{"an invalid code length", func(string) fsm.CreateRequest {
			return fsm.CreateRequest{URL: "https://example.com/i", Workspace: "default", CodeLength: 99}
		}, fsm.ErrInvalidRequest},
		// A rule with a country condition: the leader's checks of relayed
		// creates took it for a build without the country table.
		{"a country rule", func(via string) fsm.CreateRequest {
			return fsm.CreateRequest{URL: "https://example.com/cc", Workspace: "default", CustomCode: "country-" + via, CodeLength: 7,
				Options: &fsm.Options{Rules: []fsm.Rule{{Country: "DE", URL: "https://example.com/de"}}}}
		}, nil},
		// Creates no node prepares (a dedupe without its canonical form)
		// are refused by the leader's checks of relayed creates before the
		// state machine sees them: TestRelayedCreatesAreValidated.
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := leader.Create(ctx, tt.req("l"))
			if err != nil {
				t.Fatalf("on the leader: %v", err)
			}
			got, err := follower.Create(ctx, tt.req("f"))
			if err != nil {
				t.Fatalf("through the follower: %v", err)
			}
			if !errors.Is(want.Err, tt.err) || !errors.Is(got.Err, tt.err) {
				t.Fatalf("errors: leader %v, follower %v, want %v", want.Err, got.Err, tt.err)
			}
			if tt.err != nil {
				if got.Err.Error() != want.Err.Error() {
					t.Fatalf("messages differ: leader %q, follower %q", want.Err, got.Err)
				}
				return
			}
			l, f := want.Link, got.Link
			if want, got := tt.req("f").Options, f.Options; want != nil && (got == nil || len(got.Rules) != len(want.Rules) || got.Rules[0].Country != want.Rules[0].Country) {
				t.Fatalf("follower's link options %+v, want %+v", got, want)
			}
			if f.Code == "" || f.URL != tt.req("f").URL || f.Workspace != l.Workspace || f.ExpiresAt != l.ExpiresAt || f.CreatedAt == 0 || f.ID == 0 || got.Existing {
				t.Fatalf("follower's link %+v, leader's %+v", f, l)
			}
		})
	}
}

func TestRelayedCreatesKeepTheirRequestIDs(t *testing.T) {
	t.Parallel()
	leader, follower := openPair(t, 5*time.Second)
	ctx := context.Background()
	req := fsm.CreateRequest{RequestID: "k1", URL: "https://example.com/once", Canonical: "https://example.com/once", Workspace: "default", Dedupe: true, CodeLength: 7}
	first, err := follower.Create(ctx, req)
	if err != nil || first.Err != nil {
		t.Fatalf("first: %v %v", err, first.Err)
	}
	steps := []struct {
		name     string
		on       *member
		req      fsm.CreateRequest
		code     string // the code the answer must have; "" for a new one
		existing bool
		err      error
	}{
		{"replay through the follower", follower, req, first.Link.Code, false, nil},
		{"replay on the leader", leader, req, first.Link.Code, false, nil},
		{"same URL, new key: dedupe", follower, withKey(req, "k2"), first.Link.Code, true, nil},
		{"key reused for another URL", follower, withURL(req, "https://example.com/twice"), "", false, fsm.ErrRequestIDReused},
	}
	for _, s := range steps {
		res, err := s.on.Create(ctx, s.req)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !errors.Is(res.Err, s.err) || s.err == nil && (res.Link.Code != s.code || res.Existing != s.existing) {
			t.Fatalf("%s: %+v existing=%v err=%v, want code %s existing=%v err=%v", s.name, res.Link, res.Existing, res.Err, s.code, s.existing, s.err)
		}
	}
}

func withKey(r fsm.CreateRequest, key string) fsm.CreateRequest { r.RequestID = key; return r }
func withURL(r fsm.CreateRequest, url string) fsm.CreateRequest {
	r.URL, r.Canonical = url, url
	return r
}

// TestRelayedCreateWithoutALeaderEnds: a follower whose leader is gone
// answers within the write timeout, and a caller that gives up is not
// waited for.
func TestRelayedCreateWithoutALeaderEnds(t *testing.T) {
	t.Parallel()
	leader, follower := openPair(t, time.Second)
	leader.Close() // two voters, one left: no quorum, no leader
	start := time.Now()
	_, err := follower.Create(context.Background(), fsm.CreateRequest{RequestID: "k", URL: "https://example.com/x", Workspace: "default", CodeLength: 7})
	if !errors.Is(err, ErrNoLeader) && !errors.Is(err, ErrTimeout) {
		t.Fatalf("create without a leader: %v, want no leader or timeout", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("create without a leader took %v with a 1 s write timeout", took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := follower.Create(ctx, fsm.CreateRequest{RequestID: "k2", URL: "https://example.com/y", Workspace: "default", CodeLength: 7}); err == nil {
		t.Fatal("create without a leader succeeded")
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Fatalf("a caller that gave up after 50 ms waited %v", took)
	}
}

func TestServeCreates(t *testing.T) {
	t.Parallel()
	leader, follower := openPair(t, 5*time.Second)
	taken := createURL(t, leader.Node, "https://example.com/taken")
	peer := net.IPv4(127, 0, 0, 1)
	batch := func(items ...wire.Create) []byte {
		b, _ := json.Marshal(wire.CreateBatch{V: wire.Version, Items: items})
		return b
	}
	item := wire.Create{URL: "https://example.com/a", Workspace: "default", CodeLength: 7}
	takenItem := wire.Create{URL: "https://example.com/b", Workspace: "default", CustomCode: taken.Code, CodeLength: 7}
	oddItem := wire.Create{URL: "https://example.com/c", Workspace: "default", Strategy: "fancy", CodeLength: 7}
	// The log cannot carry this one; it must not fail the items around it.
	longItem := wire.Create{URL: "https://example.com/d", Workspace: "default", CodeLength: 99}
	lastItem := wire.Create{URL: "https://example.com/e", Workspace: "default", CodeLength: 7}
	tests := []struct {
		name        string
		n           *member
		forwardedBy string
		body        []byte
		status      int
		answer      []string // fragments of the body, in order
	}{
		{"one result per item, in order", leader, "n2", batch(item, takenItem, oddItem, longItem, lastItem), 200,
			[]string{`"url":"https://example.com/a"`, `"error":"code_taken","detail":"code is already taken"`,
				`"error":"invalid","detail":"invalid create request: unknown strategy \"fancy\""`,
				`"error":"invalid","detail":"invalid create request: code length 99"`, `"url":"https://example.com/e"`}},
		{"an empty batch", leader, "n2", batch(), 200, []string{`"results":[]`}},
		{"another protocol version", leader, "n2", []byte(`{"v":2,"items":[]}`), 400, []string{"protocol version 2"}},
		{"not JSON", leader, "n2", []byte(`items`), 400, nil},
		{"a follower applies nothing", follower, "n1", batch(item), 503, []string{"no leader"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := serveInternal(tt.n.Node, peer, "POST", wire.PathCreates, tt.body, tt.forwardedBy)
			body := string(ctx.Response.Body())
			if got := ctx.Response.StatusCode(); got != tt.status {
				t.Fatalf("got %d %s, want %d", got, body, tt.status)
			}
			for _, frag := range tt.answer {
				i := strings.Index(body, frag)
				if i < 0 {
					t.Fatalf("answer %s lacks %q (or not in order)", ctx.Response.Body(), frag)
				}
				body = body[i+len(frag):]
			}
		})
	}
}

// TestRelayedErrorsKeepTheirIdentity: every FSM refusal crosses the wire
// as the same sentinel error with the same message.
func TestRelayedErrorsKeepTheirIdentity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err      error
		kind     string
		sentinel error // what errors.Is must find on the relaying node
	}{
		{fsm.ErrCodeTaken, wire.KindCodeTaken, fsm.ErrCodeTaken},
		{fsm.ErrReserved, wire.KindReserved, fsm.ErrReserved},
		{fsm.ErrHashCollision, wire.KindHashCollision, fsm.ErrHashCollision},
		{fsm.ErrRequestIDReused, wire.KindRequestIDReused, fsm.ErrRequestIDReused},
		{fsm.ErrCodeSpaceExhausted, wire.KindCodeSpaceExhausted, fsm.ErrCodeSpaceExhausted},
		{fsm.ErrStateFull, wire.KindStateFull, fsm.ErrStateFull},
		{fsm.ErrInvalidRequest, wire.KindInvalid, fsm.ErrInvalidRequest},
		{fmt.Errorf("%w: code length 12", fsm.ErrInvalidRequest), wire.KindInvalid, fsm.ErrInvalidRequest},
		{fsm.ErrNotInitialized, wire.KindNotInitialized, fsm.ErrNotInitialized},
		{errors.New("disk on fire"), wire.KindFailed, nil},
	}
	for _, tt := range tests {
		w := toWireResult(createReply{res: fsm.CreateResult{Err: tt.err}, index: 9}, false)
		if w.Error != tt.kind {
			t.Errorf("%v: kind %q, want %q", tt.err, w.Error, tt.kind)
		}
		r := relayedReply(w, true)
		if r.err != nil || r.retry || r.index != 9 {
			t.Errorf("%v: reply %+v, want the FSM's answer at index 9", tt.err, r)
			continue
		}
		if r.res.Err == nil || r.res.Err.Error() != tt.err.Error() || tt.sentinel != nil && !errors.Is(r.res.Err, tt.sentinel) {
			t.Errorf("%v came back as %v", tt.err, r.res.Err)
		}
	}
}

// TestRelayFailuresSayWhatMayBeRetried: a create whose attempt failed is
// made again only when that cannot apply it twice.
func TestRelayFailuresSayWhatMayBeRetried(t *testing.T) {
	t.Parallel()
	lost := errors.New("connection reset")
	tests := []struct {
		name   string
		reply  createReply
		retry  bool
		is     error
		result bool // the FSM's answer, final
	}{
		{"leader did not propose it", relayedReply(wire.CreateResult{Error: wire.KindNotApplied}, false), true, ErrNoLeader, false},
		{"outcome unknown, keyed", relayedReply(wire.CreateResult{Error: wire.KindUnknown}, true), true, ErrTimeout, false},
		{"outcome unknown, no key", relayedReply(wire.CreateResult{Error: wire.KindUnknown}, false), false, ErrTimeout, false},
		{"a link", relayedReply(wire.CreateResult{Link: wire.FromLink(fsm.Link{Code: "abc"}), Index: 3}, false), false, nil, true},
		{"a leader that does not lead", relayFailure(errNotApplied, false), true, ErrNoLeader, false},
		{"the leader changed, keyed", relayFailure(errLeaderChanged, true), true, ErrNoLeader, false},
		{"no answer, keyed", relayFailure(fmt.Errorf("%w: %w", ErrNoLeader, lost), true), true, ErrTimeout, false},
		{"no answer, no key", relayFailure(fmt.Errorf("%w: %w", ErrNoLeader, lost), false), false, ErrTimeout, false},
		{"never connected, no key", relayFailure(fmt.Errorf("%w: %w", ErrNoLeader, fasthttp.ErrDialTimeout), false), true, nil, false},
		{"refused", relayFailure(fmt.Errorf("404: %w", ErrRefused), true), false, ErrNoLeader, false},
		{"answered 503", relayFailure(createsError(&wire.StatusError{Status: 503}), false), true, ErrNoLeader, false},
		{"answered 404", relayFailure(createsError(&wire.StatusError{Status: 404}), true), false, ErrRefused, false},
		{"answered 500, keyed", relayFailure(createsError(&wire.StatusError{Status: 500}), true), true, ErrTimeout, false},
		{"answered 429, no key", relayFailure(createsError(&wire.StatusError{Status: 429}), false), false, ErrTimeout, false},
		{"not connected", relayFailure(createsError(fmt.Errorf("dial: %w", fasthttp.ErrDialTimeout)), false), true, ErrNoLeader, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.reply
			if r.retry != tt.retry || (tt.is != nil && !errors.Is(r.err, tt.is)) || (tt.result != (r.err == nil)) {
				t.Fatalf("reply %+v: want retry=%v, error %v, final result %v", r, tt.retry, tt.is, tt.result)
			}
		})
	}
}

// TestRelayBatchesFitOneRequest: each batch the relay forms, encoded as
// either form of the request, fits the body the receiver takes, however
// long its links and however many rules their options hold.
func TestRelayBatchesFitOneRequest(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 2048)
	manyRules := &fsm.Options{Title: long[:fsm.MaxTitleBytes]}
	for range fsm.MaxRules {
		manyRules.Rules = append(manyRules.Rules, fsm.Rule{Language: "de", URL: "https://example.com/" + long})
	}
	tests := []struct {
		name    string
		urls    []int // URL lengths
		options *fsm.Options
		batches int
	}{
		{"none", nil, nil, 0},
		{"ordinary links", repeat(40, maxCreateBatch), nil, 1},
		{"longest links", repeat(2048, maxCreateBatch), nil, 3},
		{"every rule a link may hold", repeat(2048, maxCreateBatch), manyRules, 14},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []*createCall
			for _, n := range tt.urls {
				calls = append(calls, &createCall{req: fsm.CreateRequest{URL: long[:n], Canonical: long[:n], Workspace: "default", Options: tt.options}})
			}
			got := relayBatches(calls)
			total := 0
			for _, b := range got {
				reqs := make([]fsm.CreateRequest, len(b))
				for i, c := range b {
					reqs[i] = c.req
				}
				for _, asEntry := range []bool{true, false} {
					body, err := json.Marshal(relayBatchOf(reqs, asEntry))
					if err != nil {
						t.Fatal(err)
					}
					if len(body) > maxRelayBodyBytes || maxRelayBodyBytes > wire.MaxBodyBytes {
						t.Fatalf("a body of %d bytes; the relay keeps them to %d, the receiver takes %d", len(body), maxRelayBodyBytes, wire.MaxBodyBytes)
					}
				}
				total += len(b)
			}
			if len(got) != tt.batches || total != len(calls) {
				t.Fatalf("%d batches holding %d creates, want %d batches holding %d", len(got), total, tt.batches, len(calls))
			}
		})
	}
}

func repeat(v, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// TestRelayedCreatesDoNotWaitForTheCommitTimeout: a relayed create is
// answered once the leader has applied it, not once the follower learns
// that its entry committed, which, with nothing else to send, is after
// Raft's commit timeout. The timeout is made 5 s here, so that a create
// waiting for it stands out from one answered in a commit round even on
// a loaded machine.
func TestRelayedCreatesDoNotWaitForTheCommitTimeout(t *testing.T) {
	t.Parallel()
	const commitTimeout = 5 * time.Second
	_, follower := openPair(t, 2*commitTimeout, func(c *Config) { c.Raft.CommitTimeout = commitTimeout })
	var took []time.Duration
	for i := range 11 {
		start := time.Now()
		res, err := follower.Create(context.Background(), fsm.CreateRequest{
			RequestID: fmt.Sprintf("k%d", i), URL: fmt.Sprintf("https://example.com/%d", i), Workspace: "default", CodeLength: 7,
		})
		if err != nil || res.Err != nil {
			t.Fatalf("create %d: %v %v", i, err, res.Err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	if median := took[len(took)/2]; median >= commitTimeout/2 {
		t.Fatalf("relayed creates one at a time took %v (median %v): they waited for Raft's commit timeout (%v)", took, median, commitTimeout)
	}
}

// TestRelayedCreatesAreValidated: a peer's creates meet the rules a
// client's create meets; the leader refuses each bad item, not the batch.
// Without a cluster key any request marked as forwarded from a server's
// host counts as a peer's, which is how the attack was made.
func TestRelayedCreatesAreValidated(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir())
	createURL(t, n, "https://example.com/first")
	twin := fsm.CreateRequest{URL: "https://example.com/twin", Workspace: "default", Dedupe: true, Canonical: "https://example.com/twin", CodeLength: 7}
	if res, err := n.Create(context.Background(), twin); err != nil || res.Err != nil {
		t.Fatalf("create twin: %v %v", err, res.Err)
	}
	item := func(url string) wire.Create { return wire.Create{URL: url, Workspace: "default", CodeLength: 7} }
	custom := item("javascript:alert(document.domain)")
	custom.CustomCode = "jsx"
	badWorkspace, badCode := item("https://example.com/ws"), item("https://example.com/code")
	badWorkspace.Workspace, badCode.CustomCode = "a/b", "x"
	forged := item("https://evil.example/")
	forged.Dedupe, forged.Canonical = true, "https://example.com/twin" // would hand the twin's clients this link
	tests := []struct {
		name string
		item wire.Create
		kind string
	}{
		{"javascript target", custom, wire.KindInvalid},
		{"metadata address", item("http://169.254.169.254/latest/meta-data/"), wire.KindInvalid},
		{"CR LF in the target", item("https://example.com/\r\nSet-Cookie: a=b"), wire.KindInvalid},
		{"too long", item("https://example.com/" + strings.Repeat("a", 2100)), wire.KindInvalid},
		{"workspace syntax", badWorkspace, wire.KindInvalid},
		{"custom code syntax", badCode, wire.KindInvalid},
		{"canonical that is not the url's", forged, wire.KindInvalid},
		{"a valid create", item("https://example.com/fine"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := n.FSM().Len()
			body, _ := json.Marshal(wire.CreateBatch{V: wire.Version, Items: []wire.Create{tt.item}})
			ctx := serveInternal(n, net.IPv4(127, 0, 0, 1), "POST", wire.PathCreates, body, "n2")
			var answer wire.CreateBatchAnswer
			if err := wire.Decode(ctx.Response.Body(), &answer); err != nil || len(answer.Results) != 1 {
				t.Fatalf("answer %d %s: %v", ctx.Response.StatusCode(), ctx.Response.Body(), err)
			}
			if got := answer.Results[0].Error; got != tt.kind {
				t.Fatalf("result %+v, want error kind %q", answer.Results[0], tt.kind)
			}
			if grew := n.FSM().Len() - before; grew != map[bool]int{true: 1, false: 0}[tt.kind == ""] {
				t.Fatalf("links grew by %d", grew)
			}
		})
	}
	if _, ok := n.FSM().Get("jsx"); ok {
		t.Fatal("the javascript: target was stored as jsx")
	}
}

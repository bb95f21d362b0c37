package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// testConfig is a short run; the tests load only 127.0.0.1.
func testConfig(s Scenario) Config {
	return Config{
		Scenario: s, Connections: 4, Duration: 500 * time.Millisecond, Warmup: 100 * time.Millisecond,
		SeedLinks: 50, Timeout: 2 * time.Second, Workspace: "bench",
	}
}

// checkCounts checks that a report's counts add up: per route, per second,
// per status and per target.
func checkCounts(t *testing.T, r *Report) {
	t.Helper()
	if r.Requests == 0 {
		t.Fatalf("no requests measured: %+v", r)
	}
	if r.Success+r.Errors != r.Requests {
		t.Errorf("success %d + errors %d != requests %d", r.Success, r.Errors, r.Requests)
	}
	var ops, statuses, transport int64
	for _, o := range r.Ops {
		ops += o.Requests
		for _, n := range o.Statuses {
			statuses += n
		}
		for _, n := range o.TransportErrors {
			transport += n
		}
	}
	if ops != r.Requests || statuses+transport != r.Requests {
		t.Errorf("routes sum to %d, statuses+transport errors to %d+%d; want %d", ops, statuses, transport, r.Requests)
	}
	var perSecond, perSecondErrors int64
	for _, s := range r.Seconds {
		perSecond += s.Requests
		perSecondErrors += s.Errors
	}
	if perSecond != r.Requests || perSecondErrors != r.Errors {
		t.Errorf("seconds sum to %d requests, %d errors; want %d, %d", perSecond, perSecondErrors, r.Requests, r.Errors)
	}
	var sent int64
	for _, ts := range r.Sent {
		for _, n := range ts.Run {
			sent += n
		}
	}
	if sent != r.Requests {
		t.Errorf("sent in the measured phase: %d, want %d", sent, r.Requests)
	}
}

func TestClosedLoopAgainstCeiling(t *testing.T) {
	r, err := Run(context.Background(), testConfig(ScenarioCeiling))
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, r)
	if r.Mode != "closed" || r.Server != serverCeiling || r.Errors != 0 || r.Ops[0].Statuses["302"] != r.Requests {
		t.Errorf("want only 302s from the ceiling in a closed loop, got %+v", r)
	}
	if r.Sent[0].Warmup["redirect"] == 0 {
		t.Errorf("warm-up requests were not counted: %+v", r.Sent)
	}
	if r.Latency.P50 <= 0 || r.Latency.Max < r.Latency.P99 || r.Latency.P99 < r.Latency.P50 {
		t.Errorf("latency percentiles out of order: %+v", r.Latency)
	}
}

// TestOpenLoopIssuesTheRate checks the scheduler: 2000/s for 1 s issues
// 2000 intended requests, and every one is either sent or reported unsent.
func TestOpenLoopIssuesTheRate(t *testing.T) {
	cfg := testConfig(ScenarioCeiling)
	cfg.Rate, cfg.Duration, cfg.Warmup, cfg.Connections = 2000, time.Second, 0, 16
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, r)
	if r.Mode != "open" || r.Requests < 1500 || r.Requests > 2100 {
		t.Errorf("open loop at 2000/s for 1s sent %d requests, want about 2000", r.Requests)
	}
	if r.Requests+r.Unsent != 2000 {
		t.Errorf("sent %d + unsent %d != 2000 scheduled", r.Requests, r.Unsent)
	}
}

// TestMixedSplitsAndRoundRobins loads two ceiling servers with the mixed
// scenario in an open loop: about one request in five is a create, and
// request i goes to target i mod 2.
func TestMixedSplitsAndRoundRobins(t *testing.T) {
	seeds := localSeeds(20, "test")
	links := map[string]string{}
	for i, c := range seeds.codes {
		links[c] = seeds.urls[i]
	}
	var addrs []string
	for range 2 {
		srv, err := StartCeiling("127.0.0.1:0", links)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		addrs = append(addrs, srv.Addr())
	}
	cfg := testConfig(ScenarioMixed)
	cfg.Rate, cfg.Warmup, cfg.Targets = 1000, 0, addrs
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	targets := newTargets(cfg.Targets, cfg.Connections)
	defer closeTargets(targets)
	r := load(context.Background(), &cfg, serverLinkraft, targets, seeds.codes, "test")
	checkCounts(t, r)
	if r.Errors != 0 || len(r.Ops) != 2 {
		t.Fatalf("want redirects and creates without errors, got %+v", r)
	}
	creates := r.Ops[1].Requests
	if share := float64(creates) / float64(r.Requests); share < 0.1 || share > 0.3 {
		t.Errorf("creates are %.0f%% of the mix, want about 20%%", 100*share)
	}
	a, b := total(r.Sent[0].Run), total(r.Sent[1].Run)
	if d := a - b; d < -1 || d > 1 {
		t.Errorf("round-robin sent %d and %d requests to the two targets", a, b)
	}
}

func total(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func TestConnectionRefusedIsCounted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := testConfig(ScenarioCreate)
	// A second, not less: on a busy machine a worker may wait that long for
	// its first turn, and a run that sent nothing proves nothing.
	cfg.Targets, cfg.Connections, cfg.Duration, cfg.Warmup = []string{addr}, 1, time.Second, 0
	// Run stops at its probe create; the load itself counts what it sends.
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "seeding") {
		t.Errorf("Run against a closed port: want a seeding error, got %v", err)
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	targets := newTargets(cfg.Targets, cfg.Connections)
	defer closeTargets(targets)
	r := load(context.Background(), &cfg, serverLinkraft, targets, nil, "test")
	checkCounts(t, r)
	if r.Success != 0 || r.TransportErrors["connection refused"] != r.Requests {
		t.Errorf("want every request refused, got %d requests, transport errors %v", r.Requests, r.TransportErrors)
	}
}

// TestSeedingRetries429 checks that seeding retries a rate-limited create
// and counts every attempt it sent.
func TestSeedingRetries429(t *testing.T) {
	var posts atomic.Int64
	srv := startServer(t, func(ctx *fasthttp.RequestCtx) {
		if ctx.IsDelete() {
			ctx.SetStatusCode(fasthttp.StatusNoContent)
			return
		}
		if !ctx.IsPost() {
			ctx.SetStatusCode(fasthttp.StatusFound)
			return
		}
		n := posts.Add(1)
		if n <= 3 {
			ctx.SetStatusCode(fasthttp.StatusTooManyRequests)
			return
		}
		ctx.SetStatusCode(fasthttp.StatusCreated)
		ctx.SetBodyString(`{"short_code":"c` + strconv.FormatInt(n, 10) + `"}`)
	})
	cfg := testConfig(ScenarioRedirect)
	cfg.Targets, cfg.SeedLinks, cfg.Duration, cfg.Warmup = []string{srv}, 10, 200*time.Millisecond, 0
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, r)
	if got := r.Sent[0].Seed["create"]; got != 13 || posts.Load() != 13 {
		t.Errorf("seeding sent %d creates (server saw %d), want 10 + 3 retries", got, posts.Load())
	}
}

// TestSeedingWithoutAKeySaysWhichFlag: a create refused for want of a
// credential names the flag and the variable that give one, rather than
// the node's raw answer.
func TestSeedingWithoutAKeySaysWhichFlag(t *testing.T) {
	srv := startServer(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(fasthttp.StatusUnauthorized)
		ctx.SetBodyString(`{"title":"Unauthorized","status":401,"detail":"this call needs an API key"}`)
	})
	for _, key := range []string{"", "revoked"} {
		cfg := testConfig(ScenarioRedirect)
		cfg.Targets, cfg.SeedLinks, cfg.Duration, cfg.Warmup, cfg.Key = []string{srv}, 1, 200*time.Millisecond, 0, key
		_, err := Run(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), "--key") || !strings.Contains(err.Error(), "LINKRAFT_KEY") || strings.Contains(err.Error(), "this call needs") {
			t.Errorf("key %q: %v; want the flag and the variable named, not the raw answer", key, err)
		}
	}
}

// fakeLinkraft answers creates, redirects and deletes from a map, as
// linkraft would for a key that may write only in workspace allowed.
type fakeLinkraft struct {
	allowed string
	// failAfter > 0: creates after that many answer 500.
	failAfter int
	mu        sync.Mutex
	links     map[string]string // code → workspace
	created   int
	deletes   int
	// workspaces counts the creates by the workspace they named.
	workspaces map[string]int
}

func startFake(t *testing.T, allowed string) (*fakeLinkraft, string) {
	f := &fakeLinkraft{allowed: allowed, links: map[string]string{}, workspaces: map[string]int{}}
	return f, startServer(t, f.handle)
}

func (f *fakeLinkraft) handle(ctx *fasthttp.RequestCtx) {
	f.mu.Lock()
	defer f.mu.Unlock()
	path := string(ctx.Path())
	switch {
	case ctx.IsPost() && path == "/api/v1/urls":
		var body struct{ URL, Workspace string }
		if err := json.Unmarshal(ctx.PostBody(), &body); err != nil || body.URL == "" {
			ctx.SetStatusCode(fasthttp.StatusBadRequest)
			return
		}
		f.workspaces[body.Workspace]++
		if body.Workspace != f.allowed {
			ctx.SetStatusCode(fasthttp.StatusForbidden)
			return
		}
		if f.failAfter > 0 && f.created >= f.failAfter {
			ctx.SetStatusCode(fasthttp.StatusInternalServerError)
			return
		}
		f.created++
		code := "c" + strconv.Itoa(f.created)
		f.links[code] = body.Workspace
		ctx.SetStatusCode(fasthttp.StatusCreated)
		ctx.SetBodyString(`{"short_code":"` + code + `"}`)
	case ctx.IsDelete() && strings.HasPrefix(path, "/api/v1/urls/"):
		f.deletes++
		code := strings.TrimPrefix(path, "/api/v1/urls/")
		if _, ok := f.links[code]; !ok {
			ctx.SetStatusCode(fasthttp.StatusNotFound)
			return
		}
		delete(f.links, code)
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	case ctx.IsGet() && f.links[strings.TrimPrefix(path, "/")] != "":
		ctx.SetStatusCode(fasthttp.StatusFound)
	default:
		ctx.SetStatusCode(fasthttp.StatusNotFound)
	}
}

// TestSeedsAreRemoved checks that seeds go to the bench's workspace and
// are deleted after the run, each delete counted under "delete".
func TestSeedsAreRemoved(t *testing.T) {
	f, srv := startFake(t, "bench-t")
	cfg := testConfig(ScenarioRedirect)
	cfg.Targets, cfg.SeedLinks, cfg.Duration, cfg.Warmup, cfg.Workspace = []string{srv}, 40, 200*time.Millisecond, 0, "bench-t"
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, r)
	if r.Errors != 0 {
		t.Errorf("want only redirects, got errors %v", r.ErrorsByStatus)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.workspaces["bench-t"] != 40 || len(f.workspaces) != 1 {
		t.Errorf("creates by workspace: %v, want 40 in bench-t", f.workspaces)
	}
	if len(f.links) != 0 || f.deletes != 40 {
		t.Errorf("after the run: %d links left, %d deletes; want 0 and 40", len(f.links), f.deletes)
	}
	want := SeedCleanup{Workspace: "bench-t", Created: 40, Removed: 40}
	if r.Seeds == nil || *r.Seeds != want {
		t.Errorf("report seeds = %+v, want %+v", r.Seeds, want)
	}
	if got := r.Sent[0].Cleanup["delete"]; got != 40 {
		t.Errorf("sent cleanup deletes = %d, want 40", got)
	}
	var text bytes.Buffer
	if err := WriteText(&text, r); err != nil || !strings.Contains(text.String(), "40 created in workspace bench-t, 40 removed") {
		t.Errorf("text report lacks the seeds line (%v):\n%s", err, text.String())
	}
}

// TestKeepSeeds checks that --keep-seeds sends no delete.
func TestKeepSeeds(t *testing.T) {
	f, srv := startFake(t, "bench")
	cfg := testConfig(ScenarioRedirect)
	cfg.Targets, cfg.SeedLinks, cfg.Duration, cfg.Warmup, cfg.KeepSeeds = []string{srv}, 10, 200*time.Millisecond, 0, true
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.links) != 10 || f.deletes != 0 {
		t.Errorf("with KeepSeeds: %d links left, %d deletes; want 10 and 0", len(f.links), f.deletes)
	}
	if r.Seeds == nil || !r.Seeds.Kept || r.Seeds.Removed != 0 || len(r.Sent[0].Cleanup) != 0 {
		t.Errorf("report: seeds %+v, cleanup sent %v", r.Seeds, r.Sent[0].Cleanup)
	}
}

// TestCreateScenarioProbesAndKeepsCreates checks the create scenario: one
// probe create, removed afterwards; the measured creates, in the workspace,
// stay.
func TestCreateScenarioProbesAndKeepsCreates(t *testing.T) {
	f, srv := startFake(t, "bench")
	cfg := testConfig(ScenarioCreate)
	cfg.Targets, cfg.Duration, cfg.Warmup = []string{srv}, 200*time.Millisecond, 0
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Errors != 0 || f.workspaces["bench"] != f.created || int64(f.created) != r.Requests+1 {
		t.Errorf("creates: %v by workspace, %d created, %d measured (+1 probe), errors %v", f.workspaces, f.created, r.Requests, r.ErrorsByStatus)
	}
	if f.deletes != 1 || len(f.links) != int(r.Requests) || r.Seeds.Removed != 1 {
		t.Errorf("want the probe deleted and every measured create kept: %d deletes, %d links, seeds %+v", f.deletes, len(f.links), r.Seeds)
	}
}

// TestForbiddenWorkspaceStops checks that a key that may not use the
// workspace stops the bench before the run, with a message that says so.
func TestForbiddenWorkspaceStops(t *testing.T) {
	for _, s := range []Scenario{ScenarioRedirect, ScenarioCreate} {
		f, srv := startFake(t, "elsewhere")
		cfg := testConfig(s)
		cfg.Targets = []string{srv}
		_, err := Run(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), `links:write on workspace "bench"`) {
			t.Errorf("%s: want a links:write error, got %v", s, err)
		}
		f.mu.Lock()
		if f.workspaces["bench"] > cfg.Connections {
			t.Errorf("%s: %d creates sent after a 403", s, f.workspaces["bench"])
		}
		f.mu.Unlock()
	}
}

// TestFailedSeedingCleansUp checks that the links created before seeding
// failed are removed too.
func TestFailedSeedingCleansUp(t *testing.T) {
	f, srv := startFake(t, "bench")
	f.failAfter = 7
	cfg := testConfig(ScenarioRedirect)
	cfg.Targets, cfg.Connections = []string{srv}, 1
	_, err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "of the 7 created, 7 removed, 0 not") {
		t.Errorf("want a seeding error that says the 7 seeds were removed, got %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.links) != 0 {
		t.Errorf("%d links left after failed seeding", len(f.links))
	}
}

func TestBadWorkspace(t *testing.T) {
	cfg := testConfig(ScenarioRedirect)
	cfg.Targets, cfg.Workspace = []string{"127.0.0.1:1"}, `a"b`
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "workspace") {
		t.Errorf("want a workspace error, got %v", err)
	}
}

func startServer(t *testing.T, h fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	t.Cleanup(func() { _ = srv.Shutdown(); <-done })
	return ln.Addr().String()
}

func TestOutputs(t *testing.T) {
	cfg := testConfig(ScenarioCeiling)
	cfg.Duration = 1200 * time.Millisecond
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ceiling := *r
	r.attachCeiling(&ceiling)
	var text, html, js bytes.Buffer
	if err := WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&html, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"p99.9", "throughput", "linkraft = 100.0% of this machine's ceiling"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	for _, want := range []string{"<svg", "<polyline", "p99", "Throughput per second"} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
	for _, external := range []string{"<script", "<link", "src=", "url("} {
		if strings.Contains(html.String(), external) {
			t.Errorf("HTML report is not self-contained: it has %q", external)
		}
	}
	if !strings.Contains(js.String(), `"latency_ms"`) {
		t.Errorf("JSON report lacks latency_ms: %s", js.String())
	}
}

func TestNormaliseTargets(t *testing.T) {
	got, err := normaliseTargets([]string{"http://127.0.0.1:8001/", " 127.0.0.2:8002 ", ""})
	if err != nil || strings.Join(got, ",") != "127.0.0.1:8001,127.0.0.2:8002" {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"https://127.0.0.1:8001", "127.0.0.1", "http://"} {
		if _, err := normaliseTargets([]string{bad}); err == nil {
			t.Errorf("target %q: want an error", bad)
		}
	}
}

func TestNiceStep(t *testing.T) {
	for top, want := range map[float64]float64{0: 1, 4: 1, 9: 2, 23: 5, 480: 100, 130000: 50000} {
		if got := niceStep(top); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", top, got, want)
		}
	}
}

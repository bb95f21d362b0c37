package httpd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// waitRaisedTo waits until the test server's cluster is raised to level.
func waitRaisedTo(tb testing.TB, s *Server, level int) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.fsm.Raised() < level; {
		if time.Now().After(deadline) {
			tb.Fatalf("the cluster is still at level %d", s.fsm.Raised())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOtherSchemeTargets: a link to mailto:, tel: or an app's scheme
// redirects there, as Shlink's and Kutt's do; a rule and a domain redirect
// may point at one; javascript: and data: are refused, and a webhook
// stays http(s).
func TestOtherSchemeTargets(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaisedTo(t, s, fsm.LevelTargets)
	for _, target := range []string{"mailto:team@example.com?subject=Hello", "tel:+15550100", "myapp://open/item/7"} {
		code := mustCreate(t, s, `{"url":"`+target+`"}`)
		ctx := do(s, "GET", "/"+code, "", "")
		if status(ctx) != 302 || location(ctx) != target {
			t.Errorf("GET /%s: %d Location %q, want 302 to %q", code, status(ctx), location(ctx), target)
		}
	}
	// forward_query appends to an app link, never to a mailto: (its
	// query would be the message's cc and bcc).
	code := mustCreate(t, s, `{"url":"mailto:team@example.com","forward_query":true,
		"rules":[{"when":{"query":{"app":"1"}},"url":"myapp://open"}]}`)
	if got := location(do(s, "GET", "/"+code+"?bcc=eve@example.com", "", "")); got != "mailto:team@example.com" {
		t.Errorf("mailto: with a query: Location %q", got)
	}
	if got := location(do(s, "GET", "/"+code+"?app=1", "", "")); got != "myapp://open?app=1" {
		t.Errorf("rule to an app: Location %q", got)
	}
	// An edit may move a link to one, and back.
	web := mustCreate(t, s, `{"url":"https://example.com/contact","dedupe":true}`)
	if ctx := do(s, "PATCH", "/api/v1/urls/"+web, "application/json", `{"original_url":"sms:+15550100"}`); status(ctx) != 200 {
		t.Fatalf("edit to sms: %d %s", status(ctx), ctx.Response.Body())
	}
	if got := location(do(s, "GET", "/"+web, "", "")); got != "sms:+15550100" {
		t.Errorf("edited to sms: Location %q", got)
	}
	// A domain's redirects too, as stored (fasthttp's own Redirect would
	// read mailto: as a path on this host).
	if ctx := do(s, "POST", "/admin/domains", "application/json",
		`{"default":true,"root_redirect":"mailto:hello@example.com","not_found_redirect":"tel:+15550100"}`); status(ctx) != 200 {
		t.Fatalf("default domain's redirects: %d %s", status(ctx), ctx.Response.Body())
	}
	for uri, want := range map[string]string{"/": "mailto:hello@example.com", "/nope123": "tel:+15550100"} {
		if ctx := do(s, "GET", uri, "", ""); status(ctx) != 302 || location(ctx) != want {
			t.Errorf("GET %s: %d Location %q, want 302 to %q", uri, status(ctx), location(ctx), want)
		}
	}
	for _, refused := range []string{"javascript:alert(1)", "data:text/html,x", "file:///etc/passwd", "vbscript:x"} {
		ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"`+refused+`"}`)
		if status(ctx) != 400 || !strings.Contains(string(ctx.Response.Body()), "scheme is not allowed") {
			t.Errorf("create of %s: %d %s", refused, status(ctx), ctx.Response.Body())
		}
	}
	ctx := do(s, "POST", "/admin/webhooks", "application/json",
		`{"url":"mailto:ops@example.com","events":["link.created"],"secret":"`+webhookSecret+`"}`)
	if status(ctx) != 400 {
		t.Errorf("webhook to mailto: %d %s", status(ctx), ctx.Response.Body())
	}
}

// belowTargets applies creates to a state raised only to LevelRename, as
// a cluster's leader does while a server runs a build before
// LevelTargets.
type belowTargets struct {
	Writes
	state *fsm.FSM
}

func (w belowTargets) Create(_ context.Context, req fsm.CreateRequest) (fsm.CreateResult, error) {
	entry := fsm.CreateBatch{Now: time.Now().UnixMilli(), Items: []fsm.CreateRequest{req}}.Encode()
	last, _ := w.state.Applied()
	res := w.state.Apply(&raft.Log{Index: last + 1, Type: raft.LogCommand, Data: entry})
	if err, ok := res.(error); ok {
		return fsm.CreateResult{}, err
	}
	return res.([]fsm.CreateResult)[0], nil
}

// TestOtherSchemeBelowLevel: until every server applies LevelTargets's
// rule, a mailto: target is answered 503 saying the upgrade must finish,
// not stored; an http target is stored as before.
func TestOtherSchemeBelowLevel(t *testing.T) {
	state := fsm.New()
	for i, cmd := range []fsm.Command{fsm.InitCommand{}, fsm.RaiseCommand{To: fsm.LevelRename}} {
		if err, _ := state.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: cmd.Encode()}).(error); err != nil {
			t.Fatal(err)
		}
	}
	s := newTestServerOn(t, nil, func(n *Node) { n.Writes = belowTargets{Writes: n.Writes, state: state} })
	ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"mailto:team@example.com"}`)
	if status(ctx) != 503 || !strings.Contains(string(ctx.Response.Body()), "needs every server at entry level 12") {
		t.Errorf("mailto: below LevelTargets: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"javascript:alert(1)"}`); status(ctx) != 400 {
		t.Errorf("javascript: below LevelTargets: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/"}`); status(ctx) != 201 {
		t.Errorf("https below LevelTargets: %d %s", status(ctx), ctx.Response.Body())
	}
	if state.Len() != 1 {
		t.Errorf("the state holds %d links, want the https one", state.Len())
	}
}

package httpd

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
)

// failingWrites is the real node's Writes, except that every write
// answers err (or, for a create, the refusal res): the errors a real
// single node cannot be made to return on demand.
type failingWrites struct {
	Writes
	err error
	res fsm.CreateResult
}

func (w failingWrites) Create(context.Context, fsm.CreateRequest) (fsm.CreateResult, error) {
	return w.res, w.err
}
func (w failingWrites) Propose(context.Context, fsm.Command, cluster.ProposeOptions) (cluster.Proposed, error) {
	return cluster.Proposed{}, w.err
}

// failingMembers is a membership whose changes answer err.
type failingMembers struct{ err error }

func (a failingMembers) AddServer(string, string, string, bool, string) error { return a.err }
func (a failingMembers) Promote(string, string) error                         { return a.err }
func (a failingMembers) RemoveServer(string, string) error                    { return a.err }
func (a failingMembers) TransferLeadership() error                            { return a.err }

// TestWriteErrorStatus maps each error the write path can return to the
// status, and the headers, a client gets for it.
func TestWriteErrorStatus(t *testing.T) {
	type call struct{ method, uri, body string }
	var (
		create   = call{"POST", "/api/v1/urls", `{"url":"https://example.com/","custom_code":"mine"}`}
		del      = call{"DELETE", "/api/v1/urls/gone", ""}
		newKey   = call{"POST", "/admin/keys", `{"name":"ci","scopes":["links:read"],"workspaces":["*"]}`}
		revoke   = call{"DELETE", "/admin/keys/" + mustKeyID(t), ""}
		join     = call{"POST", "/admin/join", `{"id":"n2","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`}
		leave    = call{"POST", "/admin/leave", `{"id":"n2"}`}
		transfer = call{"POST", "/admin/leadership-transfer", ""}
		promote  = call{"POST", "/admin/promote", `{"id":"n2"}`}
	)
	unavailable := []error{cluster.ErrNoLeader, cluster.ErrTimeout, cluster.ErrClosed}
	type tc struct {
		name   string
		call   call
		writes failingWrites
		admin  error
		status int
		header string // a header the answer must carry
	}
	var cases []tc
	for _, err := range unavailable {
		wrapped := fmt.Errorf("%w: in a test", err)
		for _, c := range []call{create, del, newKey, revoke} {
			cases = append(cases, tc{c.method + " " + c.uri + " " + err.Error(), c, failingWrites{err: wrapped}, nil, 503, fasthttp.HeaderRetryAfter})
		}
		for _, c := range []call{join, leave, transfer, promote} {
			cases = append(cases, tc{c.uri + " " + err.Error(), c, failingWrites{}, wrapped, 503, fasthttp.HeaderRetryAfter})
		}
	}
	cases = append(cases,
		tc{"create: other failure", create, failingWrites{err: errors.New("disk on fire")}, nil, 500, ""},
		tc{"create: other refusal", create, failingWrites{res: fsm.CreateResult{Err: errors.New("odd")}}, nil, 500, ""},
		tc{"delete: not found", del, failingWrites{err: fsm.ErrNotFound}, nil, 404, ""},
		tc{"delete: key revoked meanwhile", del, failingWrites{err: fsm.ErrUnauthorized}, nil, 401, fasthttp.HeaderWWWAuthenticate},
		tc{"revoke: unknown key", revoke, failingWrites{err: fsm.ErrKeyNotFound}, nil, 404, ""},
	)
	for _, r := range wire.Refusals {
		status := wantStatusOf(t, r.Err)
		c := tc{"create refused: " + r.Kind, create, failingWrites{res: fsm.CreateResult{Err: r.Err}}, nil, status, ""}
		switch {
		case status == 503:
			c.header = fasthttp.HeaderRetryAfter
		case errors.Is(r.Err, fsm.ErrUnauthorized):
			c.header = fasthttp.HeaderWWWAuthenticate
		}
		cases = append(cases, c)
	}
	for _, m := range []struct {
		err    error
		status int
	}{
		{cluster.ErrInvalidServer, 400}, {cluster.ErrUnreachable, 400}, {cluster.ErrUnknownServer, 404},
		{cluster.ErrServerConflict, 409}, {cluster.ErrLastVoter, 409}, {cluster.ErrNoTransferTarget, 409},
		{cluster.ErrOtherCluster, 409}, {cluster.ErrAlreadyVoter, 409},
	} {
		for _, c := range []call{join, leave, transfer, promote} {
			cases = append(cases, tc{c.uri + " " + m.err.Error(), c, failingWrites{}, fmt.Errorf("%w: in a test", m.err), m.status, ""})
		}
	}

	// One real node under every case: only the parts replaced differ.
	base := newTestServer(t, nil)
	node := realNode(base)
	// The leader finds a link before it deletes it.
	if _, err := node.Create(context.Background(), fsm.CreateRequest{URL: "https://example.com/", CustomCode: "gone", Workspace: "default"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parts := Of(node)
			w := c.writes
			w.Writes = parts.Writes
			parts.Writes = w
			parts.Members = failingMembers{err: c.admin}
			s := New(base.cfg, parts)
			defer s.Shutdown(context.Background())
			ctx := do(s, c.call.method, c.call.uri, "application/json", c.call.body)
			if got := ctx.Response.StatusCode(); got != c.status {
				t.Fatalf("status %d, want %d: %s", got, c.status, ctx.Response.Body())
			}
			if c.header != "" && len(ctx.Response.Header.Peek(c.header)) == 0 {
				t.Errorf("no %s header", c.header)
			}
			if ct := string(ctx.Response.Header.ContentType()); ct != "application/problem+json" {
				t.Errorf("Content-Type %q, want application/problem+json", ct)
			}
		})
	}
}

// mustKeyID is a well-formed key id no node knows.
func mustKeyID(t *testing.T) string {
	t.Helper()
	id, _, _, err := fsm.MintKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// wantStatuses is the status a client gets for each error a handler
// meets, written out here rather than read from errorStatuses, so that a
// changed row fails a test.
var wantStatuses = []struct {
	err    error
	status int
}{
	{fsm.ErrCodeDeleted, 409},
	{fsm.ErrCodeTaken, 409},
	{fsm.ErrUnknownDomain, 400},
	{fsm.ErrReserved, 409},
	{fsm.ErrHashCollision, 503},
	{fsm.ErrCodeSpaceExhausted, 503},
	{fsm.ErrStateFull, 507},
	{fsm.ErrNotInitialized, 503},
	{fsm.ErrRequestIDReused, 422},
	{fsm.ErrTooManyWebhooks, 409},
	{fsm.ErrTooManyKeys, 409},
	{fsm.ErrTooManyDomains, 409},
	{fsm.ErrInvalidRequest, 400},
	{fsm.ErrUnauthorized, 401},
	{fsm.ErrNotFound, 404},
	{fsm.ErrKeyNotFound, 404},
	{fsm.ErrWebhookNotFound, 404},
	{fsm.ErrDomainInUse, 409},
	{fsm.ErrTagNotFound, 404},
	{fsm.ErrTagConflict, 409},
	{fsm.ErrTagTooWide, 400},
	{fsm.ErrCorruptSnapshot, 400},
	{cluster.ErrBackupUnauthenticated, 400},
	{fsm.ErrRefusedRecord, 400},
	{cluster.ErrNoLeader, 503},
	{cluster.ErrTimeout, 503},
	{cluster.ErrClosed, 503},
	{cluster.ErrUpgrading, 503},
	{fsm.ErrNotRaised, 503},
	{cluster.ErrRestoreNotReady, 503},
	{cluster.ErrInvalidServer, 400},
	{cluster.ErrUnreachable, 400},
	{cluster.ErrUnknownServer, 404},
	{cluster.ErrServerConflict, 409},
	{cluster.ErrLastVoter, 409},
	{cluster.ErrAlreadyVoter, 409},
	{cluster.ErrNoTransferTarget, 409},
	{cluster.ErrOtherCluster, 409},
}

// wantStatusOf is err's status in wantStatuses.
func wantStatusOf(t *testing.T, err error) int {
	t.Helper()
	for _, w := range wantStatuses {
		if w.err == err {
			return w.status
		}
	}
	t.Fatalf("wantStatuses has no status for %v", err)
	return 0
}

// answerOf is what writeError answers err with: the status, the problem's
// detail and the response's headers.
func answerOf(t *testing.T, err error, details ...errorDetail) (int, string, *fasthttp.ResponseHeader) {
	t.Helper()
	var ctx fasthttp.RequestCtx
	writeError(&ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), err, details...)
	if ct := string(ctx.Response.Header.ContentType()); ct != "application/problem+json" {
		t.Errorf("%v: Content-Type %q, want application/problem+json", err, ct)
	}
	var p problem
	if err := json.Unmarshal(ctx.Response.Body(), &p); err != nil {
		t.Fatalf("the answer is not a problem document: %v: %s", err, ctx.Response.Body())
	}
	if p.Status != ctx.Response.StatusCode() || p.Error != p.Detail {
		t.Errorf("%v: the document disagrees with the answer: %s", err, ctx.Response.Body())
	}
	return ctx.Response.StatusCode(), p.Detail, &ctx.Response.Header
}

// TestWriteErrorAnswersEverySentinel: every error a handler meets, wrapped
// as the cluster wraps it, gets its status, its headers and a message.
func TestWriteErrorAnswersEverySentinel(t *testing.T) {
	for _, w := range wantStatuses {
		wrapped := fmt.Errorf("in a test: %w", w.err)
		status, detail, header := answerOf(t, wrapped)
		if status != w.status {
			t.Errorf("%v: status %d, want %d", w.err, status, w.status)
		}
		wantDetail := wrapped.Error()
		if w.status == 401 {
			wantDetail = "the API key was revoked or expired before the write was applied"
			if len(header.Peek(fasthttp.HeaderWWWAuthenticate)) == 0 {
				t.Errorf("%v: no %s header", w.err, fasthttp.HeaderWWWAuthenticate)
			}
		}
		if detail != wantDetail {
			t.Errorf("%v: detail %q, want %q", w.err, detail, wantDetail)
		}
		if retry := len(header.Peek(fasthttp.HeaderRetryAfter)) > 0; retry != (w.status == 503) {
			t.Errorf("%v: status %d with Retry-After %v", w.err, status, retry)
		}
	}
	// Every row is pinned above, so no row changes unnoticed.
	for _, r := range errorStatuses {
		if got := wantStatusOf(t, r.err); got != r.status {
			t.Errorf("errorStatuses gives %v status %d, the test wants %d", r.err, r.status, got)
		}
	}
}

// TestWriteErrorHidesFailures: an error no row holds is this node's
// failure; the client learns only that the write failed.
func TestWriteErrorHidesFailures(t *testing.T) {
	status, detail, _ := answerOf(t, errors.New("disk on fire at /var/lib/linkraft"))
	if status != 500 || detail != "write failed" {
		t.Errorf("answered %d %q, want 500 \"write failed\"", status, detail)
	}
}

// TestWriteErrorDetails: a handler's message replaces the error's own
// text for the error it names, and only for that one.
func TestWriteErrorDetails(t *testing.T) {
	details := []errorDetail{
		{fsm.ErrNotFound, "short link x does not exist"},
		{fsm.ErrUnauthorized, "the API key was revoked or expired before the delete was applied"},
	}
	tests := []struct {
		err    error
		status int
		detail string
	}{
		{fmt.Errorf("delete: %w", fsm.ErrNotFound), 404, "short link x does not exist"},
		{fsm.ErrUnauthorized, 401, "the API key was revoked or expired before the delete was applied"},
		{fmt.Errorf("%w: leader gone", cluster.ErrNoLeader), 503, "no leader available: leader gone"},
	}
	for _, tt := range tests {
		status, detail, _ := answerOf(t, tt.err, details...)
		if status != tt.status || detail != tt.detail {
			t.Errorf("%v: answered %d %q, want %d %q", tt.err, status, detail, tt.status, tt.detail)
		}
	}
}

// TestEveryRefusalHasAStatus: a refusal the relay can name reaches the
// client with its own status, never as a 500, on whichever node it was
// proposed.
func TestEveryRefusalHasAStatus(t *testing.T) {
	for _, r := range wire.Refusals {
		row, ok := errorStatusOf(r.Err)
		if !ok {
			t.Errorf("refusal %s (%v) has no row in errorStatuses", r.Kind, r.Err)
			continue
		}
		relayed, _ := errorStatusOf(wire.RefusalOf(r.Kind, "as the leader said it"))
		if relayed.status != row.status {
			t.Errorf("refusal %s: status %d here, %d relayed", r.Kind, row.status, relayed.status)
		}
	}
}

// TestProblemDocument pins the problem+json answer byte for byte: clients
// parse it, and it was the node-to-node protocol's format before httpd had
// its own writer.
func TestProblemDocument(t *testing.T) {
	var ctx fasthttp.RequestCtx
	ctx.Response.Header.Set("X-Stale", "from an earlier answer")
	writeProblem(&ctx, 503, `no <leader> & "no" quorum`)
	want := `{"type":"about:blank","title":"Service Unavailable","status":503,` +
		`"detail":"no \u003cleader\u003e \u0026 \"no\" quorum","error":"no \u003cleader\u003e \u0026 \"no\" quorum"}`
	if got := string(ctx.Response.Body()); got != want {
		t.Errorf("body\n%s\nwant\n%s", got, want)
	}
	h := &ctx.Response.Header
	if ct := string(h.ContentType()); ct != "application/problem+json" {
		t.Errorf("Content-Type %q", ct)
	}
	if ra := string(h.Peek(fasthttp.HeaderRetryAfter)); ra != "1" {
		t.Errorf("Retry-After %q, want 1", ra)
	}
	if len(h.Peek("X-Stale")) > 0 {
		t.Error("the answer kept a header set before it")
	}
}

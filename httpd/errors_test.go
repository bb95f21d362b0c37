package httpd

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
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

// failingAdmin is the real node's Admin, except that membership changes
// answer err.
type failingAdmin struct {
	Admin
	err error
}

func (a failingAdmin) AddServer(string, string, string, bool) error { return a.err }
func (a failingAdmin) Promote(string) error                         { return a.err }
func (a failingAdmin) RemoveServer(string) error                    { return a.err }
func (a failingAdmin) TransferLeadership() error                    { return a.err }

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
		c := tc{"create refused: " + r.Kind, create, failingWrites{res: fsm.CreateResult{Err: r.Err}}, nil, r.Status, ""}
		switch {
		case r.Status == 503:
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
			parts.Admin = failingAdmin{Admin: parts.Admin, err: c.admin}
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

package httpd

import (
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
)

// healthAnswer asks uri and decodes the answer.
func healthAnswer(t *testing.T, s *Server, uri string) (int, healthJSON) {
	t.Helper()
	ctx := do(s, "GET", uri, "", "")
	var h healthJSON
	if err := json.Unmarshal(ctx.Response.Body(), &h); err != nil {
		t.Fatalf("%s: %v: %s", uri, err, ctx.Response.Body())
	}
	return ctx.Response.StatusCode(), h
}

// TestHealthReadiness: /health is 200 only on a node that can serve its
// cluster's links, and says why not otherwise; /health/live is 200 while
// Raft runs. Every reason is walked through on a real node in the cluster
// package (TestNotReadyReasons); here, how each kind of answer looks.
func TestHealthReadiness(t *testing.T) {
	t.Run("ready", func(t *testing.T) {
		s := newTestServer(t, nil)
		mustCreate(t, s, `{"url":"https://example.com/ready"}`) // elected and initialised
		if code, h := healthAnswer(t, s, "/health"); code != 200 || h.Status != "healthy" || h.Reason != "" || h.Links != 1 || h.ClusterID == "" {
			t.Errorf("/health = %d %+v, want 200 healthy without a reason", code, h)
		}
		if code, h := healthAnswer(t, s, "/health/live"); code != 200 || h.Status != "alive" || h.Role != "leader" {
			t.Errorf("/health/live = %d %+v, want 200 alive", code, h)
		}

		realNode(s).Close()
		if code, h := healthAnswer(t, s, "/health"); code != 503 || h.Status != "unavailable" || h.Reason != cluster.NotReadyShuttingDown {
			t.Errorf("closed: /health = %d %+v, want 503 unavailable, shutting_down", code, h)
		}
		if code, h := healthAnswer(t, s, "/health/live"); code != 503 || h.Reason != cluster.NotReadyShuttingDown {
			t.Errorf("closed: /health/live = %d %+v, want 503 shutting_down", code, h)
		}
	})

	t.Run("not a member", func(t *testing.T) {
		// Expecting two voters with nobody to find: it never bootstraps,
		// like a node started with --join before the cluster exists.
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		node, err := cluster.Open(cluster.Config{
			ID: "waiting", DataDir: t.TempDir(), RaftAddr: freeAddr(t), Key: newClusterKey(t), BootstrapExpect: 2, Logger: log,
			ClickFlushInterval: time.Hour, RaftLogLevel: "off",
		}, fsm.New())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { node.Close() })
		s := New(Config{RedirectStatus: 302, CodeLength: 7, Version: "test", Logger: log, AdminToken: testToken}, Of(node))
		if code, h := healthAnswer(t, s, "/health"); code != 503 || h.Status != "unavailable" || h.Reason != cluster.NotReadyNotMember || h.NodeID != "waiting" {
			t.Errorf("/health = %d %+v, want 503 unavailable, not_member", code, h)
		}
		if code, h := healthAnswer(t, s, "/health/live"); code != 200 || h.Status != "alive" {
			t.Errorf("/health/live = %d %+v, want 200 alive", code, h)
		}
	})
}

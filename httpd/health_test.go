package httpd

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
)

// healthAnswer asks uri and decodes the answer; headers are do's.
func healthAnswer(t *testing.T, s *Server, uri string, headers ...string) (int, healthJSON) {
	t.Helper()
	ctx := do(s, "GET", uri, "", "", headers...)
	var h healthJSON
	if err := json.Unmarshal(ctx.Response.Body(), &h); err != nil {
		t.Fatalf("%s: %v: %s", uri, err, ctx.Response.Body())
	}
	return ctx.Response.StatusCode(), h
}

// healthFields decodes uri's answer as a plain object, to see which
// fields an anonymous caller is shown.
func healthFields(t *testing.T, s *Server, uri string, headers ...string) map[string]json.RawMessage {
	t.Helper()
	ctx := do(s, "GET", uri, "", "", headers...)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(ctx.Response.Body(), &fields); err != nil {
		t.Fatalf("%s: %v: %s", uri, err, ctx.Response.Body())
	}
	return fields
}

// TestHealthReadiness: /health is 200 while the node serves its cluster's
// links and says whether writes work; /health/writes is 200 only when a
// create would be accepted; /health/live is 200 while Raft runs. Every
// reason is walked through on real nodes in the cluster package
// (TestNotReadyReasons); here, how each kind of answer looks.
func TestHealthReadiness(t *testing.T) {
	t.Run("ready", func(t *testing.T) {
		s := newTestServer(t, nil)
		mustCreate(t, s, `{"url":"https://example.com/ready"}`) // elected and initialised
		if code, h := healthAnswer(t, s, "/health"); code != 200 || h.Status != "healthy" || h.Reason != "" || h.Links != 1 ||
			h.ClusterID == "" || h.Writes != writesOK || h.WritesReason != "" {
			t.Errorf("/health = %d %+v, want 200 healthy, writes ok", code, h)
		}
		if code, h := healthAnswer(t, s, "/health/writes"); code != 200 || h.Status != "writable" || h.Writes != writesOK {
			t.Errorf("/health/writes = %d %+v, want 200 writable", code, h)
		}
		if code, h := healthAnswer(t, s, "/health/live"); code != 200 || h.Status != "alive" || h.Role != "leader" {
			t.Errorf("/health/live = %d %+v, want 200 alive", code, h)
		}

		realNode(s).Close()
		for _, uri := range []string{"/health", "/health/writes"} {
			if code, h := healthAnswer(t, s, uri); code != 503 || h.Status != "unavailable" || h.Reason != cluster.NotReadyShuttingDown ||
				h.Writes != writesUnavailable || h.WritesReason != cluster.NotReadyShuttingDown {
				t.Errorf("closed: %s = %d %+v, want 503 unavailable, shutting_down", uri, code, h)
			}
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
			ID:        "waiting",
			DataDir:   t.TempDir(),
			RaftAddr:  freeAddr(t),
			Key:       newClusterKey(t),
			Logger:    log,
			Discovery: cluster.DiscoveryConfig{BootstrapExpect: 2},
			Raft:      cluster.RaftConfig{LogLevel: "off"},
			Writes:    cluster.WriteConfig{ClickFlushInterval: time.Hour},
		}, fsm.New())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { node.Close() })
		s := New(Config{RedirectStatus: 302, CodeLength: 7, Version: "test", Logger: log, AdminToken: testToken}, Of(node))
		for _, uri := range []string{"/health", "/health/writes"} {
			if code, h := healthAnswer(t, s, uri); code != 503 || h.Status != "unavailable" || h.Reason != cluster.NotReadyNotMember || h.NodeID != "waiting" {
				t.Errorf("%s = %d %+v, want 503 unavailable, not_member", uri, code, h)
			}
		}
		if code, h := healthAnswer(t, s, "/health/live"); code != 200 || h.Status != "alive" {
			t.Errorf("/health/live = %d %+v, want 200 alive", code, h)
		}
	})
}

// cutOff is a node that has the cluster's state but knows no leader: cut
// off from the majority, or the majority is down.
type cutOff struct{ Self }

func (cutOff) NotReady() string          { return "" }
func (cutOff) WritesUnavailable() string { return cluster.NotReadyNoLeader }

// TestHealthWithoutQuorum: losing the majority never takes a node out of
// DNS or the load balancer: /health stays 200 (redirects work from the
// local state) and says writes are unavailable and why; /health/writes is
// 503 with that reason.
func TestHealthWithoutQuorum(t *testing.T) {
	s := newTestServerOn(t, nil, func(n *Node) { n.Self = cutOff{n.Self} })
	code := mustCreate(t, s, `{"url":"https://example.com/cut-off"}`)
	if status, h := healthAnswer(t, s, "/health"); status != 200 || h.Status != "healthy" || h.Reason != "" ||
		h.Writes != writesUnavailable || h.WritesReason != cluster.NotReadyNoLeader {
		t.Errorf("/health = %d %+v, want 200 healthy, writes unavailable: no_leader", status, h)
	}
	if status, h := healthAnswer(t, s, "/health/writes"); status != 503 || h.Status != "unavailable" ||
		h.Reason != cluster.NotReadyNoLeader || h.WritesReason != cluster.NotReadyNoLeader {
		t.Errorf("/health/writes = %d %+v, want 503 unavailable, no_leader", status, h)
	}
	if ctx := do(s, "GET", "/"+code, "", ""); ctx.Response.StatusCode() != 302 {
		t.Errorf("GET /%s = %d, want the redirect /health promises", code, ctx.Response.StatusCode())
	}
}

// TestHealthAnonymous: anyone may ask /health (probes send no credential,
// and a wrong one must not fail a probe), but only a caller with a valid
// API key or the admin token is told the cluster id and the names of the
// certificates about to end; the rest of the answer is the same for all.
func TestHealthAnonymous(t *testing.T) {
	now := time.Now()
	s := newTestServer(t, func(c *Config) {
		c.TLS = &TLS{Certificates: func() []CertificateInfo {
			return []CertificateInfo{{Name: "secret-name.example", NotAfter: now.Add(24 * time.Hour)}}
		}}
	})
	mustCreate(t, s, `{"url":"https://example.com/anonymous"}`)
	_, reader := addKey(t, s, fsm.ScopeLinksRead, 0, "team")
	_, revoked := addKey(t, s, fsm.ScopeAdmin, 0, fsm.AllWorkspaces)
	revokedID, _, _ := fsm.ParseKey(revoked)
	if ctx := do(s, "DELETE", "/admin/keys/"+revokedID, "", ""); ctx.Response.StatusCode() != 204 {
		t.Fatalf("revoke: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	_, unknown, _, _ := fsm.MintKey(rand.Reader)

	cases := []struct {
		name          string
		header, value string
		authenticated bool
	}{
		{"no credential", "Authorization", "", false},
		{"the admin token", "Authorization", "Bearer " + testToken, true},
		{"an API key of any scope", "X-Api-Key", reader, true},
		{"an unknown key", "Authorization", "Bearer " + unknown, false},
		{"a revoked key", "Authorization", "Bearer " + revoked, false},
		{"a malformed credential", "Authorization", "Basic dXNlcjpwYXNz", false},
	}
	for _, tc := range cases {
		for _, uri := range []string{"/health", "/health/live", "/health/writes"} {
			ctx := do(s, "GET", uri, "", "", tc.header, tc.value)
			if ctx.Response.StatusCode() != 200 {
				t.Errorf("%s, %s: %d %s, want 200", tc.name, uri, ctx.Response.StatusCode(), ctx.Response.Body())
				continue
			}
			fields := healthFields(t, s, uri, tc.header, tc.value)
			_, id := fields["cluster_id"]
			_, names := fields["certificates_expiring"]
			if id != tc.authenticated || names != tc.authenticated {
				t.Errorf("%s, %s: cluster_id shown %v, certificate names shown %v; want both %v", tc.name, uri, id, names, tc.authenticated)
			}
			var h healthJSON
			if err := json.Unmarshal(ctx.Response.Body(), &h); err != nil || h.NodeID == "" || h.Role == "" ||
				len(h.Warnings) != 1 || h.Warnings[0] != warningCertificateExpiring {
				t.Errorf("%s, %s: %s; want node, role and the certificate warning for everyone", tc.name, uri, ctx.Response.Body())
			}
		}
	}
}

// TestHealthDraining: a node told to drain (SIGTERM) is taken out at once
// (/health and /health/writes 503 shutting_down) but keeps serving what
// still reaches it, each answer closing its connection so that clients
// reconnect to a node that stays; liveness stays 200, since restarting a
// draining node would only cut its drain short.
func TestHealthDraining(t *testing.T) {
	s := newTestServer(t, nil)
	code := mustCreate(t, s, `{"url":"https://example.com/draining"}`)
	s.Drain()
	for _, uri := range []string{"/health", "/health/writes"} {
		if status, h := healthAnswer(t, s, uri); status != 503 || h.Status != "unavailable" || h.Reason != cluster.NotReadyShuttingDown {
			t.Errorf("draining: %s = %d %+v, want 503 unavailable, shutting_down", uri, status, h)
		}
	}
	if status, h := healthAnswer(t, s, "/health/live"); status != 200 || h.Status != "alive" {
		t.Errorf("draining: /health/live = %d %+v, want 200 alive", status, h)
	}
	redirect := do(s, "GET", "/"+code, "", "")
	if redirect.Response.StatusCode() != 302 || !redirect.Response.ConnectionClose() {
		t.Errorf("draining: GET /%s = %d, Connection: close %v; want 302 closing the connection",
			code, redirect.Response.StatusCode(), redirect.Response.ConnectionClose())
	}
	created := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/while-draining"}`)
	if created.Response.StatusCode() != 201 || !created.Response.ConnectionClose() {
		t.Errorf("draining: create = %d %s, Connection: close %v; want 201 closing the connection",
			created.Response.StatusCode(), created.Response.Body(), created.Response.ConnectionClose())
	}
}

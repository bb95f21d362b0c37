package main

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func TestHealth(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answer   cannedAnswer
		code     int
		inStderr string
	}{
		{"healthy", jsonAnswer(`{"status":"healthy","role":"leader"}`), 0, ""},
		{"shutting down", cannedAnswer{503, "application/json", `{"status":"unhealthy","role":"shutdown"}`}, 1, `503: status "unhealthy", role "shutdown"`},
		{"not linkraft", cannedAnswer{200, "text/html", `<html>`}, 1, "not a linkraft health document"},
		{"200 but not healthy", jsonAnswer(`{"status":"starting"}`), 1, `status "starting"`},
		{"error page", cannedAnswer{502, "text/plain", `bad gateway`}, 1, "answered 502"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startFakeNode(t, map[string]cannedAnswer{"GET /health": tc.answer})
			code, stdout, stderr := runCmd(t, "health", "--addr", n.addr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, stdout, stderr)
			}
			if tc.code == 0 && strings.TrimSpace(stdout) != "healthy" {
				t.Errorf("stdout %q, want healthy", stdout)
			}
			if tc.code != 0 {
				// One line, for the container runtime's health log.
				if !strings.Contains(stderr, tc.inStderr) || strings.Count(stderr, "\n") != 1 {
					t.Errorf("stderr %q, want one line containing %q", stderr, tc.inStderr)
				}
			}
			if r := n.only(t); r.path != "/health" || r.auth != "" {
				t.Errorf("request %s with Authorization %q, want /health without a credential", r.path, r.auth)
			}
		})
	}
}

// TestHealthWrites: --writes asks whether a create would be accepted now,
// which a node without a leader, still healthy for redirects, says not.
func TestHealthWrites(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answer   cannedAnswer
		code     int
		inStderr string
	}{
		{"writable", jsonAnswer(`{"status":"writable","role":"leader","writes":"ok"}`), 0, ""},
		{"no leader", cannedAnswer{503, "application/json", `{"status":"unavailable","role":"follower","writes":"unavailable","writes_reason":"no_leader"}`}, 1, `writes "no_leader"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startFakeNode(t, map[string]cannedAnswer{"GET /health/writes": tc.answer})
			code, stdout, stderr := runCmd(t, "health", "--writes", "--addr", n.addr)
			if code != tc.code || (code == 0) != (strings.TrimSpace(stdout) == "writable") || !strings.Contains(stderr, tc.inStderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, tc.code, tc.inStderr)
			}
			if r := n.only(t); r.path != "/health/writes" {
				t.Errorf("asked %s, want /health/writes", r.path)
			}
		})
	}
	if code, _, stderr := runCmd(t, "health", "--writes", "--live"); code != 2 || !strings.Contains(stderr, "give one") {
		t.Errorf("--writes with --live: exit %d, %q; want a usage error", code, stderr)
	}
}

func TestHealthNoAnswer(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		code, _, stderr := runCmd(t, "health", "--addr", addr)
		if code != 1 || !strings.Contains(stderr, "cannot reach") {
			t.Errorf("exit %d, stderr %q; want 1 and cannot reach", code, stderr)
		}
	})
	t.Run("silent", func(t *testing.T) {
		// Accepts and never answers: the timeout must end the check.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
			}
		}()
		start := time.Now()
		code, _, stderr := runCmd(t, "health", "--addr", ln.Addr().String(), "--timeout", "300ms")
		if code != 1 || !strings.Contains(stderr, "within 300ms") {
			t.Errorf("exit %d, stderr %q; want 1 and no answer within 300ms", code, stderr)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("took %s with --timeout 300ms", d)
		}
	})
}

func TestHealthAddressFromEnvironment(t *testing.T) {
	n := startFakeNode(t, map[string]cannedAnswer{"GET /health": jsonAnswer(`{"status":"healthy"}`)})
	_, port, _ := net.SplitHostPort(n.addr)
	for _, name := range []string{"LINKRAFT_ADDR", "LINKRAFT_TIMEOUT"} {
		t.Setenv(name, "") // restored after the test
		os.Unsetenv(name)
	}

	// The server's own listen setting, as in the image: unspecified host
	// means this machine.
	t.Setenv("LINKRAFT_HTTP_ADDR", ":"+port)
	if code, _, stderr := runCmd(t, "health"); code != 0 {
		t.Errorf("LINKRAFT_HTTP_ADDR=:%s: exit %d, stderr %q", port, code, stderr)
	}
	t.Setenv("LINKRAFT_HTTP_ADDR", "0.0.0.0:"+port)
	if code, _, stderr := runCmd(t, "health"); code != 0 {
		t.Errorf("LINKRAFT_HTTP_ADDR=0.0.0.0:%s: exit %d, stderr %q", port, code, stderr)
	}
	// LINKRAFT_ADDR wins over it, and --addr over both.
	t.Setenv("LINKRAFT_ADDR", "127.0.0.1:1")
	if code, _, _ := runCmd(t, "health", "--timeout", "1s"); code != 1 {
		t.Errorf("LINKRAFT_ADDR pointing nowhere: exit %d, want 1", code)
	}
	if code, _, stderr := runCmd(t, "health", "--addr", "http://"+n.addr); code != 0 {
		t.Errorf("--addr: exit %d, stderr %q", code, stderr)
	}
	if code, _, _ := runCmd(t, "health", "extra"); code != 2 {
		t.Errorf("positional argument: exit %d, want 2", code)
	}
}

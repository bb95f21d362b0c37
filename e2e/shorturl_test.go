package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestShortURLIgnoresHostOnReachableNodes: a client picks the Host header,
// so a node others can reach must not build short_url from it (an attacker
// would get links, QR codes included, that name their own host). Without
// --base-url such a node uses its advertised address and says at start to
// set --base-url: as a warning, except where that address is loopback, as
// here and in the quick start (the links plainly name this machine); a
// node listening on loopback only (development) still follows Host.
func TestShortURLIgnoresHostOnReachableNodes(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	_, port, _ := net.SplitHostPort(newNode(t, "probe").httpAddr)
	tests := []struct {
		name     string
		settings map[string]string
		want     func(n *node) string // the short_url prefix expected
		advises  bool                 // the start-up log names --base-url
	}{
		{"loopback listener follows Host", nil, func(*node) string { return "http://evil.example/" }, false},
		{"reachable listener uses the advertised address", map[string]string{"http-addr": "0.0.0.0:" + port},
			func(n *node) string { return "http://127.0.0.1:" + port + "/" }, true},
		{"--base-url wins", map[string]string{"http-addr": "0.0.0.0:" + port, "base-url": "https://s.example.com"},
			func(*node) string { return "https://s.example.com/" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, "")
			if tt.settings["http-addr"] != "" {
				n.httpAddr = "127.0.0.1:" + port // where the test reaches it
			}
			if err := n.launchUntil(t, nodeOptions{Settings: tt.settings}, nil, n.waitLeader); err != nil {
				t.Fatalf("start: %v", err)
			}
			defer n.kill()
			req, err := http.NewRequest(http.MethodPost, "http://"+n.httpAddr+"/api/v1/urls",
				strings.NewReader(`{"url":"https://example.com/host-header"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Host = "evil.example"
			n.authorize(req, nil)
			resp, err := n.client.Do(req)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			defer resp.Body.Close()
			var l link
			if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || resp.StatusCode != http.StatusCreated {
				t.Fatalf("create: %d, %v", resp.StatusCode, err)
			}
			if want := tt.want(n) + l.ShortCode; l.ShortURL != want {
				t.Errorf("short_url = %q, want %q", l.ShortURL, want)
			}
			// "set --base-url": the data dir's path, which the log names,
			// holds the test's name.
			if advised := strings.Contains(n.out.String(), "set --base-url"); advised != tt.advises {
				t.Errorf("start-up advice to set --base-url: %v, want %v; log:\n%s", advised, tt.advises, n.out.String())
			}
			if warned := regexp.MustCompile(`level=WARN[^\n]*set --base-url`).MatchString(n.out.String()); warned {
				t.Errorf("a warning about --base-url from a node that advertises loopback; log:\n%s", n.out.String())
			}
		})
	}
}

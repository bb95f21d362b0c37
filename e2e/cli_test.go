package e2e

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFlagsFromEnvironment covers that every flag also reads
// LINKRAFT_<NAME>. The node gets all its settings from the environment.
func TestFlagsFromEnvironment(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{
		ID:     "env-node",
		ViaEnv: true,
		Settings: map[string]string{
			"code-length":     "9",
			"redirect-status": "307",
			"base-url":        "https://sho.rt",
		},
	})
	if h := n.health(t); h.NodeID != "env-node" {
		t.Errorf("node_id = %q, want env-node from LINKRAFT_ID", h.NodeID)
	}
	l := n.createURL(t, "https://example.com/from-env")
	if len(l.ShortCode) != 9 {
		t.Errorf("code %q has %d characters, want 9 from LINKRAFT_CODE_LENGTH", l.ShortCode, len(l.ShortCode))
	}
	if want := "https://sho.rt/" + l.ShortCode; l.ShortURL != want {
		t.Errorf("short_url = %q, want %q from LINKRAFT_BASE_URL", l.ShortURL, want)
	}
	r := n.get(t, "/"+l.ShortCode)
	if r.status != http.StatusTemporaryRedirect || r.header.Get("Location") != "https://example.com/from-env" {
		t.Errorf("redirect = %d to %q, want 307 from LINKRAFT_REDIRECT_STATUS", r.status, r.header.Get("Location"))
	}
}

// TestCommandLine covers the subcommands and flag validation: version,
// keygen, --cluster-key, and refusing nonsense settings at start.
func TestCommandLine(t *testing.T) {
	skipIfShort(t)
	t.Parallel()

	t.Run("version", func(t *testing.T) {
		out, err := runCommand(t, 10*time.Second, nil, "version")
		if err != nil || strings.TrimSpace(out) == "" {
			t.Errorf("linkraft version: err %v, output %q; want a version and exit 0", err, out)
		}
	})

	var key string
	t.Run("keygen", func(t *testing.T) {
		var keys []string
		for range 2 {
			out, err := runCommand(t, 10*time.Second, nil, "keygen")
			if err != nil {
				t.Fatalf("linkraft keygen: %v\n%s", err, out)
			}
			k := strings.TrimSpace(out)
			raw, err := base64.StdEncoding.DecodeString(k)
			if err != nil || len(raw) != 32 {
				t.Fatalf("keygen printed %q, want 32 random bytes in base64 (decoded %d bytes, %v)", out, len(raw), err)
			}
			keys = append(keys, k)
		}
		if keys[0] == keys[1] {
			t.Errorf("two keygen runs printed the same key %s", keys[0])
		}
		key = keys[0]
	})

	t.Run("serve with a cluster key", func(t *testing.T) {
		if key == "" {
			t.Skip("keygen failed")
		}
		n := startNode(t, nodeOptions{Settings: map[string]string{"cluster-key": key}})
		l := n.createURL(t, "https://example.com/keyed")
		n.requireRedirect(t, l.ShortCode, "https://example.com/keyed")
	})

	// A typo in a setting must stop the node with a message instead of
	// running with a surprise.
	invalid := []struct {
		name string
		flag string
		says string // in the output, when set
	}{
		{"redirect status 200", "--redirect-status=200", ""},
		{"redirect status text", "--redirect-status=permanent", ""},
		{"code length 0", "--code-length=0", ""},
		{"cluster key not base64", "--cluster-key=not-a-key!", ""},
		{"cluster key too short", "--cluster-key=" + base64.StdEncoding.EncodeToString([]byte("short")), ""},
		// Without a key, only loopback: the error says how to make a key.
		{"raft on every interface without a key", fmt.Sprintf("--raft-addr=0.0.0.0:%d", freePort(t, false)), "linkraft keygen"},
		{"gossip on every interface without a key", fmt.Sprintf("--gossip-addr=0.0.0.0:%d", freePort(t, true)), "linkraft keygen"},
		{"advertised off loopback without a key", "--advertise=192.0.2.1", "linkraft keygen"},
	}
	for _, tc := range invalid {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			args := []string{
				"serve",
				"--id=bad-flags",
				"--data-dir=" + t.TempDir(),
				fmt.Sprintf("--http-addr=127.0.0.1:%d", freePort(t, false)),
				fmt.Sprintf("--raft-addr=127.0.0.1:%d", freePort(t, false)),
				fmt.Sprintf("--gossip-addr=127.0.0.1:%d", freePort(t, true)),
				tc.flag, // after the defaults above, so that it wins
			}
			out, err := runCommand(t, 8*time.Second, nil, args...)
			if err == nil {
				t.Errorf("serve %s exited with status 0, want an error; output:\n%s", tc.flag, out)
			} else if strings.Contains(err.Error(), "still running") {
				t.Errorf("serve %s kept running instead of refusing the setting; output:\n%s", tc.flag, out)
			} else if strings.TrimSpace(out) == "" || !strings.Contains(out, tc.says) {
				t.Errorf("serve %s failed (%v) without saying why (want %q); output:\n%s", tc.flag, err, tc.says, out)
			}
		})
	}
}

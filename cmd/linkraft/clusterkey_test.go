package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linkraft/linkraft/cluster/secure"
)

// serveFlags parses serve's flags on top of a loopback node with its data
// in a temporary directory.
func serveFlags(t *testing.T, args ...string) *serveConfig {
	t.Helper()
	base := []string{"--id", "n1", "--data-dir", t.TempDir(), "--raft-addr", "127.0.0.1:8081", "--gossip-addr", "127.0.0.1:8082"}
	cfg, err := parseServeFlags(append(base, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func sameKey(a, b *secure.Key) bool { return bytes.Equal(a.GossipKey(), b.GossipKey()) }

// TestClusterKeyOrder: --cluster-key wins, then --cluster-key-file, then
// the data dir's cluster.key, made at the first start and kept after.
func TestClusterKeyOrder(t *testing.T) {
	given := secure.GenerateKey()
	givenKey, _ := secure.ParseKey(given)
	file := filepath.Join(t.TempDir(), "shared.key")
	if err := os.WriteFile(file, []byte(secure.GenerateKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fileKey, _ := secure.ReadKeyFile(file)

	t.Run("flag over file", func(t *testing.T) {
		k, err := resolveClusterKey(serveFlags(t, "--cluster-key", given, "--cluster-key-file", file))
		if err != nil || !sameKey(k.key, givenKey) || k.file != "" {
			t.Fatalf("got file %q, %v; want the flag's key", k.file, err)
		}
	})
	t.Run("environment", func(t *testing.T) {
		t.Setenv("LINKRAFT_CLUSTER_KEY", given)
		cfg := serveFlags(t)
		k, err := resolveClusterKey(cfg)
		if err != nil || !sameKey(k.key, givenKey) || cfg.keyOnCommandLine {
			t.Fatalf("got %v (on the command line: %v); want the variable's key", err, cfg.keyOnCommandLine)
		}
	})
	t.Run("file over the data dir", func(t *testing.T) {
		t.Setenv("LINKRAFT_CLUSTER_KEY_FILE", file)
		cfg := serveFlags(t)
		k, err := resolveClusterKey(cfg)
		if err != nil || !sameKey(k.key, fileKey) || k.made || k.file != file {
			t.Fatalf("got file %q made %v, %v; want the file's key", k.file, k.made, err)
		}
		if _, err := os.Stat(filepath.Join(cfg.dataDir, clusterKeyFileName)); err == nil {
			t.Error("a key was made in the data dir although a file was given")
		}
	})
	t.Run("made in the data dir, then kept", func(t *testing.T) {
		cfg := serveFlags(t)
		first, err := resolveClusterKey(cfg)
		if err != nil || !first.made || first.file != filepath.Join(cfg.dataDir, clusterKeyFileName) {
			t.Fatalf("first start: file %q made %v, %v; want a key made in the data dir", first.file, first.made, err)
		}
		again, err := resolveClusterKey(cfg)
		if err != nil || again.made || !sameKey(again.key, first.key) {
			t.Fatalf("second start: made %v, %v; want the same key", again.made, err)
		}
	})
	t.Run("a missing --cluster-key-file is made", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "data", "cluster.key")
		k, err := resolveClusterKey(serveFlags(t, "--cluster-key-file", missing))
		if err != nil || !k.made || k.file != missing {
			t.Fatalf("got file %q made %v, %v; want the key made there", k.file, k.made, err)
		}
	})
	t.Run("a bad file stops the start", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.key")
		os.WriteFile(bad, []byte("hello\n"), 0o600)
		if _, err := resolveClusterKey(serveFlags(t, "--cluster-key-file", bad)); err == nil {
			t.Fatal("a file without a key was accepted")
		}
	})
}

// TestMadeKeysStayOnLoopback: a node whose Raft or gossip address (bound
// or advertised) is not loopback runs only with a key it was given: the
// flag or an existing file. The error says how to make one.
func TestMadeKeysStayOnLoopback(t *testing.T) {
	existing := filepath.Join(t.TempDir(), "cluster.key")
	if err := os.WriteFile(existing, []byte(secure.GenerateKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "cluster.key")
	tests := []struct {
		name string
		args []string
		ok   bool
	}{
		{"loopback", []string{"--raft-addr", "127.0.0.1:8081", "--gossip-addr", "127.0.0.2:8082"}, true},
		{"localhost and ::1", []string{"--raft-addr", "localhost:8081", "--gossip-addr", "[::1]:8082", "--advertise", "127.0.0.5"}, true},
		{"no gossip", []string{"--gossip-addr", ""}, true},
		{"raft on every interface", []string{"--raft-addr", "0.0.0.0:8081"}, false},
		{"raft on an empty host", []string{"--raft-addr", ":8081"}, false},
		{"gossip on a LAN", []string{"--gossip-addr", "10.0.0.1:8082"}, false},
		{"advertised on a LAN", []string{"--advertise", "10.0.0.1"}, false},
		{"advertised by name", []string{"--advertise", "node1.example:8081"}, false},
		{"off loopback, a file that does not exist", []string{"--raft-addr", "0.0.0.0:8081", "--cluster-key-file", missing}, false},
		{"off loopback, an existing file", []string{"--raft-addr", "0.0.0.0:8081", "--cluster-key-file", existing}, true},
		{"off loopback, the flag", []string{"--raft-addr", "0.0.0.0:8081", "--gossip-addr", "0.0.0.0:8082", "--advertise", "10.0.0.1",
			"--cluster-key", secure.GenerateKey()}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := serveFlags(t, tt.args...)
			_, err := resolveClusterKey(cfg)
			if (err == nil) != tt.ok || err != nil && !strings.Contains(err.Error(), "linkraft keygen") {
				t.Errorf("%v, want ok=%v (and an error that names linkraft keygen)", err, tt.ok)
			}
			if _, statErr := os.Stat(filepath.Join(cfg.dataDir, clusterKeyFileName)); !tt.ok && statErr == nil {
				t.Error("a refused node made a key in its data dir")
			}
		})
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("a refused node made the --cluster-key-file")
	}
}

// TestClusterKeyLog: the log names the file, never the key, and warns of
// a key on the command line.
func TestClusterKeyLog(t *testing.T) {
	text := secure.GenerateKey()
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))

	cfg := serveFlags(t)
	made, err := resolveClusterKey(cfg)
	if err != nil {
		t.Fatal(err)
	}
	made.log(log, cfg.keyOnCommandLine)
	kept, err := resolveClusterKey(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kept.log(log, cfg.keyOnCommandLine)
	path := filepath.Join(cfg.dataDir, clusterKeyFileName)
	if n := strings.Count(out.String(), "file="+path); n != 2 {
		t.Errorf("the log names %s %d times, want 2 (made, kept):\n%s", path, n, out.String())
	}
	stored, _ := os.ReadFile(path)
	if strings.Contains(out.String(), strings.TrimSpace(string(stored))) {
		t.Error("the log shows the key")
	}

	out.Reset()
	cfg = serveFlags(t, "--cluster-key", text)
	given, err := resolveClusterKey(cfg)
	if err != nil {
		t.Fatal(err)
	}
	given.log(log, cfg.keyOnCommandLine)
	if !strings.Contains(out.String(), "level=WARN") || !strings.Contains(out.String(), "--cluster-key-file") || strings.Contains(out.String(), text) {
		t.Errorf("a key on the command line: want a warning naming --cluster-key-file and not the key, got:\n%s", out.String())
	}
}

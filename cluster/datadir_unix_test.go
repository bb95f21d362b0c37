//go:build unix

package cluster

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// TestDataDirOfAnotherUserIsRefused: a node does not open a data dir that
// another user owns (who could change its state and keys): the error
// names the dir and the fix. A dir root owns, as platforms mount volumes,
// is the process's to use.
func TestDataDirOfAnotherUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		// Only root can give a directory away; CI runs the tests as root.
		t.Skip("making a directory another user's needs root")
	}
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		ID:       "n1",
		DataDir:  dir,
		RaftAddr: freeAddr(t),
		Key:      testKey(t),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Raft:     RaftConfig{LogLevel: "off"},
		Writes:   WriteConfig{ClickFlushInterval: time.Hour},
	}
	n, err := Open(cfg, fsm.New())
	if err == nil {
		n.Close()
		t.Fatal("opened a data dir another user owns")
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "chown") {
		t.Errorf("refusal %q: want the dir and the fix", msg)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused dir was written to: %d entries", len(entries))
	}
}

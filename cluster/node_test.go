package cluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster/secure"
	"github.com/linkraft/linkraft/fsm"
)

// freeAddr is a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// openNode starts a real single-voter node on dir; tweaks change its
// configuration first.
func openNode(t *testing.T, dir string, tweaks ...func(*Config)) *Node {
	t.Helper()
	cfg := Config{
		ID: "n1", DataDir: dir, RaftAddr: freeAddr(t), ClickFlushInterval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RaftLogLevel: "off",
	}
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	n, err := Open(cfg, fsm.New())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func createURL(t *testing.T, n *Node, url string) fsm.Link {
	t.Helper()
	res, err := n.Create(context.Background(), fsm.CreateRequest{URL: url, Workspace: "default", CodeLength: 7})
	if err != nil || res.Err != nil {
		t.Fatalf("create %s: %v / %v", url, err, res.Err)
	}
	return res.Link
}

func TestConcurrentCreatesShareLogEntries(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir())
	createURL(t, n, "https://example.com/warm-up")
	before := n.raft.LastIndex()

	const creates = 300
	codes := make([]string, creates)
	var wg sync.WaitGroup
	errs := make(chan error, creates)
	for i := range creates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := n.Create(context.Background(), fsm.CreateRequest{
				URL: fmt.Sprintf("https://example.com/%d", i), Workspace: "default", CodeLength: 7,
			})
			if err == nil {
				err = res.Err
			}
			if err != nil {
				errs <- err
				return
			}
			codes[i] = res.Link.Code
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent create: %v", err)
	}
	seen := map[string]bool{}
	for _, c := range codes {
		if seen[c] {
			t.Fatalf("code %s handed out twice", c)
		}
		seen[c] = true
	}
	if entries := n.raft.LastIndex() - before; entries >= creates {
		t.Fatalf("%d creates took %d log entries; concurrent creates should share entries", creates, entries)
	}
}

func TestClicksFlushOnceAndSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := openNode(t, dir)
	l := createURL(t, n, "https://example.com/clicked")
	for range 5 {
		n.Clicks().Record(l.Code, fsm.Visitor{})
	}
	if got := n.Clicks().Pending(); got != 5 {
		t.Fatalf("pending = %d, want 5", got)
	}
	ctx := context.Background()
	if err := n.Clicks().Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	// A second flush with nothing new must not count anything again.
	if err := n.Clicks().Flush(ctx); err != nil {
		t.Fatalf("empty flush: %v", err)
	}
	if got, _ := n.FSM().Get(l.Code); got.Clicks != 5 || n.Clicks().Pending() != 0 {
		t.Fatalf("after flush: clicks %d pending %d, want 5 and 0", got.Clicks, n.Clicks().Pending())
	}
	n.Clicks().Record(l.Code, fsm.Visitor{})
	if err := n.Close(); err != nil { // Close flushes the last click
		t.Fatalf("close: %v", err)
	}

	again := openNode(t, dir)
	waitFor(t, func() bool { got, _ := again.FSM().Get(l.Code); return got.Clicks == 6 })
	again.Clicks().Record(l.Code, fsm.Visitor{})
	if err := again.Clicks().Flush(ctx); err != nil {
		t.Fatalf("flush after restart: %v", err)
	}
	if got, _ := again.FSM().Get(l.Code); got.Clicks != 7 {
		t.Fatalf("after restart and a new click: %d clicks, want 7", got.Clicks)
	}
}

func TestRestoreUnderConcurrentReaders(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir())
	kept := createURL(t, n, "https://example.com/kept")
	var backup bytes.Buffer
	if err := n.Backup(&backup); err != nil {
		t.Fatalf("backup: %v", err)
	}
	later := createURL(t, n, "https://example.com/later")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Every reader sees the kept link, before and after.
				if _, ok := n.FSM().Lookup([]byte(kept.Code)); !ok {
					t.Error("a reader saw a state without the kept link")
					return
				}
			}
		}()
	}
	err := n.Restore(backup.Bytes(), RestoreOptions{})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if _, ok := n.FSM().Get(later.Code); ok {
		t.Fatal("a link created after the backup survived the restore")
	}
	if err := n.Restore([]byte("garbage"), RestoreOptions{}); err == nil {
		t.Fatal("restore accepted garbage")
	}
	if _, ok := n.FSM().Get(kept.Code); !ok {
		t.Fatal("a refused restore changed the state")
	}
}

// waitFor polls cond for up to ten seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestKeylessNodesStayOnLoopback(t *testing.T) {
	t.Parallel()
	key, err := secure.ParseKey(base64.StdEncoding.EncodeToString(make([]byte, secure.KeySize)))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"loopback", Config{RaftAddr: "127.0.0.1:8081", GossipAddr: "127.0.0.2:8082"}, true},
		{"localhost and ::1", Config{RaftAddr: "localhost:8081", GossipAddr: "[::1]:8082", Advertise: "127.0.0.5"}, true},
		{"no gossip", Config{RaftAddr: "127.0.0.1:8081"}, true},
		{"raft on every interface", Config{RaftAddr: "0.0.0.0:8081"}, false},
		{"raft on an empty host", Config{RaftAddr: ":8081"}, false},
		{"gossip on a LAN", Config{RaftAddr: "127.0.0.1:8081", GossipAddr: "10.0.0.1:8082"}, false},
		{"advertised on a LAN", Config{RaftAddr: "127.0.0.1:8081", Advertise: "10.0.0.1"}, false},
		{"advertised by name", Config{RaftAddr: "127.0.0.1:8081", Advertise: "node1.example:8081"}, false},
		{"with a key", Config{RaftAddr: "0.0.0.0:8081", GossipAddr: "0.0.0.0:8082", Advertise: "10.0.0.1", Key: key}, true},
	}
	for _, tt := range tests {
		err := requireKeyOffLoopback(tt.cfg)
		if (err == nil) != tt.ok || err != nil && !strings.Contains(err.Error(), "linkraft keygen") {
			t.Errorf("%s: %v, want ok=%v (and an error that names linkraft keygen)", tt.name, err, tt.ok)
		}
	}
}

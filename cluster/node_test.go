package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
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

// testKey is the cluster key of the nodes a test starts: one per
// top-level test, so that the nodes of a test share it and those of tests
// running alongside (on ports one of them freed) never talk to them.
func testKey(t testing.TB) *secure.Key {
	t.Helper()
	test, _, _ := strings.Cut(t.Name(), "/")
	sum := sha256.Sum256([]byte("linkraft cluster test " + test))
	key, err := secure.ParseKey(base64.StdEncoding.EncodeToString(sum[:]))
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// openNode starts a real single-voter node on dir; tweaks change its
// configuration first.
func openNode(t *testing.T, dir string, tweaks ...func(*Config)) *Node {
	t.Helper()
	cfg := Config{
		ID:       "n1",
		DataDir:  dir,
		RaftAddr: freeAddr(t),
		Key:      testKey(t),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Raft:     RaftConfig{LogLevel: "off"},
		Writes:   WriteConfig{ClickFlushInterval: time.Hour},
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
				runtime.Gosched() // four readers on two cores leave Raft its turn
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

// TestOpenRefusesNoKey: no node listens without the cluster key, loopback
// included.
func TestOpenRefusesNoKey(t *testing.T) {
	t.Parallel()
	n, err := Open(Config{ID: "n1", DataDir: t.TempDir(), RaftAddr: freeAddr(t), GossipAddr: freeAddr(t)}, fsm.New())
	if err == nil {
		n.Close()
		t.Fatal("a node without a key opened")
	}
	if !strings.Contains(err.Error(), "--cluster-key-file") {
		t.Errorf("the error %q does not say how to give a key", err)
	}
}

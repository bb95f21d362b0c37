package e2e

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rssBytes is a process's resident memory, from /proc.
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// zeros is an endless body of n bytes that costs the sender no memory.
type zeros struct{ left int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), z.left)
	clear(p[:n])
	z.left -= n
	return int(n), nil
}

// TestLargeBodiesNeedACredential: restore and import take bodies of up to
// 1 GiB, but only from a client whose credential was checked first. An
// anonymous 300 MB body, sized or streamed, is refused before it is read
// and the node's memory barely moves (it grew by 600 MB when the limit
// came before the credential).
func TestLargeBodiesNeedACredential(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	// A node without --admin-token: the case where the body limit once
	// came with no check at all.
	n := startNode(t, nodeOptions{Settings: map[string]string{"admin-token": ""}})
	n.credential = initialKey(t, n)
	l := n.createURL(t, "https://example.com/kept")
	before := rssBytes(t, n.pid())
	const size = 300 << 20
	for _, path := range []string{"/admin/restore", "/admin/import"} {
		for _, sized := range []bool{true, false} {
			req, err := http.NewRequest(http.MethodPost, "http://"+n.httpAddr+path, &zeros{left: size})
			if err != nil {
				t.Fatal(err)
			}
			if sized {
				req.ContentLength = size
			} // else: chunked
			req.Header.Set("Content-Type", "application/octet-stream")
			resp, err := n.client.Do(req)
			if err != nil {
				t.Logf("POST %s (sized %v): connection cut: %v", path, sized, err)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge && resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("anonymous 300 MB POST %s (sized %v): %d, want 413 or 401", path, sized, resp.StatusCode)
			}
		}
	}
	if grew := rssBytes(t, n.pid()) - before; grew > 32<<20 {
		t.Fatalf("anonymous bodies grew the node by %d MB", grew>>20)
	}
	n.requireRedirect(t, l.ShortCode, "https://example.com/kept")
}

// initialKey waits for the admin key a node without --admin-token writes
// to its data dir, and returns it.
func initialKey(t *testing.T, n *node) string {
	t.Helper()
	path := filepath.Join(n.dataDir, "admin.key")
	var key string
	if !eventually(10*time.Second, func() bool {
		b, err := os.ReadFile(path)
		key = strings.TrimSpace(string(b))
		return err == nil && key != ""
	}) {
		t.Fatalf("no %s after the node led", path)
	}
	return key
}

// pid is the node's current process id.
func (n *node) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd.Process.Pid
}

package e2e

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// procOf is the file /proc/<pid>/<name> of n's process. Where there is
// no /proc at all (not Linux) the test is skipped. A node whose file
// cannot be read, or that is a zombie, has died: that fails the test,
// for a dead node spends no CPU and grows no memory, and a measure of it
// would pass while proving nothing.
func procOf(t *testing.T, n *node, name string) []byte {
	t.Helper()
	pid := n.pid()
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	b, err := os.ReadFile(dir + name)
	if err != nil {
		if _, none := os.Stat("/proc/self/" + name); none != nil {
			t.Skipf("no /proc here: %v", none)
		}
		t.Fatalf("%s (pid %d) died: %v (exit: %v)\n%s", n.id, pid, err, n.exitErr(), tail(n.out.String(), 2000))
	}
	// Read after the file, the state says whether what was read is a
	// live process's: an exited one not yet reaped still has its files.
	stat, err := os.ReadFile(dir + "stat")
	if err != nil {
		t.Fatalf("%s (pid %d) died: %v (exit: %v)\n%s", n.id, pid, err, n.exitErr(), tail(n.out.String(), 2000))
	}
	// The state, field 3, follows the command name, which is in
	// parentheses and may hold spaces.
	s := string(stat)
	if fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(fields) == 0 || fields[0] == "Z" || fields[0] == "X" {
		t.Fatalf("%s (pid %d) died: its state is %q (exit: %v)\n%s", n.id, pid, fields, n.exitErr(), tail(n.out.String(), 2000))
	}
	return b
}

// rssBytes is n's resident memory, from /proc.
func rssBytes(t *testing.T, n *node) int64 {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(procOf(t, n, "status")))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc status of %s", n.id)
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
	before := rssBytes(t, n)
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
	if grew := rssBytes(t, n) - before; grew > 32<<20 {
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

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportMapsLinesBack checks that the server's report, which counts
// lines of the body sent, is shown with the source file's lines.
func TestImportMapsLinesBack(t *testing.T) {
	n := startFakeNode(t, map[string]cannedAnswer{
		"POST /admin/import": jsonAnswer(`{"created":1,"skipped":0,"failed":[{"line":2,"error":"code plain is taken by another link or was deleted"}]}`),
	})
	fixture := filepath.Join("..", "..", "migrate", "testdata", "links.csv")
	code, out, errOut := runCmd(t, "import", "--from", "csv", "--addr", n.addr, "--key", "lr_admin", "--workspace", "moved", fixture)
	if code != 1 {
		t.Fatalf("exit %d, want 1 for a report with failures\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"created 1, skipped 1", "failed 5",
		"links.csv:3: code plain is taken", // body line 2 is the file's line 3
		"links.csv:6: custom_code",
		"kept creation times: 1, click totals: 1", // promo-2030's
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	req := n.sent(t, "POST", "/admin/import")
	lines := strings.Split(strings.TrimSpace(string(req.body)), "\n")
	if req.ctype != "application/x-ndjson" || len(lines) != 2 || !strings.Contains(lines[1], `"workspace":"moved"`) ||
		!strings.Contains(lines[0], `"workspace":"marketing"`) || !strings.Contains(lines[0], `"created_at":"2025-01-01T00:00:00Z","clicks":100`) {
		t.Fatalf("sent %s %q", req.ctype, req.body)
	}
}

// TestImportSaysWhatItKeeps: creation times and click totals are sent
// and reported as kept; one the server would refuse is left out and
// reported as dropped, and its link is still imported.
func TestImportSaysWhatItKeeps(t *testing.T) {
	n := startFakeNode(t, map[string]cannedAnswer{
		"POST /admin/import": jsonAnswer(`{"created":3,"skipped":0,"failed":[]}`),
	})
	file := filepath.Join(t.TempDir(), "links.csv")
	csv := "short_code,original_url,created_at,clicks\n" +
		"kept,https://example.com/kept,2020-05-01T12:00:00Z,42\n" +
		"future,https://example.com/future,2999-01-01T00:00:00Z,3\n" +
		"absurd,https://example.com/absurd,,2000000000000\n"
	if err := os.WriteFile(file, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "import", "--from", "csv", "--dry-run", file)
	if code != 0 || !strings.Contains(out, "would keep creation times: 1, click totals: 2") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "import", "--from", "csv", "--addr", n.addr, "--key", "lr_admin", file)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"created 3, skipped 0",
		"kept creation times: 1, click totals: 2",
		"1 creation times: before 1970 or in the future; those links are created at the import",
		"1 click totals: negative or over 10^12; those links start at 0 clicks",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	want := `{"short_code":"kept","original_url":"https://example.com/kept","created_at":"2020-05-01T12:00:00Z","clicks":42}
{"short_code":"future","original_url":"https://example.com/future","clicks":3}
{"short_code":"absurd","original_url":"https://example.com/absurd"}
`
	if got := string(n.sent(t, "POST", "/admin/import").body); got != want {
		t.Errorf("sent:\n%s\nwant:\n%s", got, want)
	}
}

func TestImportUsage(t *testing.T) {
	for _, args := range [][]string{
		{"import", "x.csv"},
		{"import", "--from", "csv"},
		{"import", "--from", "csv", "--workspace", "a/b", filepath.Join("..", "..", "migrate", "testdata", "links.csv")},
	} {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	// A dry run needs no node.
	code, out, _ := runCmd(t, "import", "--from", "bitly", "--dry-run", "--addr", "127.0.0.1:1", filepath.Join("..", "..", "migrate", "testdata", "bitly.json"))
	if code != 1 || !strings.Contains(out, "would create 1") || !strings.Contains(out, "reserved word") {
		t.Fatalf("dry run: exit %d\n%s", code, out)
	}
}

// TestImportGoesToTheLeader: named a follower, the import is sent to the
// leader, which reads it as it arrives, once the leader answered a probe;
// with a leader that does not answer, it goes to the node named.
func TestImportGoesToTheLeader(t *testing.T) {
	leader := startFakeNode(t, map[string]cannedAnswer{
		"GET /health/live":   jsonAnswer(`{"status":"alive"}`),
		"POST /admin/import": jsonAnswer(`{"created":2,"skipped":0,"failed":[]}`),
	})
	followerOf := func(leaderHTTP string) *fakeNode {
		return startFakeNode(t, map[string]cannedAnswer{
			"GET /admin/cluster": jsonAnswer(`{"node_id":"n2","role":"follower","http_addr":"127.0.0.1:1","servers":[` +
				`{"id":"n1","http_addr":"` + leaderHTTP + `","suffrage":"Voter","leader":true},` +
				`{"id":"n2","http_addr":"127.0.0.1:1","suffrage":"Voter","leader":false}]}`),
			"POST /admin/import": jsonAnswer(`{"created":2,"skipped":0,"failed":[]}`),
		})
	}
	file := filepath.Join(t.TempDir(), "links.csv")
	if err := os.WriteFile(file, []byte("short_code,original_url\nfirst,https://example.com/a\nsecond,https://example.com/b\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	follower := followerOf(leader.addr)
	code, out, errOut := runCmd(t, "import", "--from", "csv", "--addr", follower.addr, "--key", "lr_admin", file)
	if code != 0 || !strings.Contains(out, "sending the import to the leader, n1 at "+leader.addr) || !strings.Contains(out, "created 2") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if req := leader.sent(t, "POST", "/admin/import"); req.auth != "Bearer lr_admin" || !strings.Contains(string(req.body), `"short_code":"second"`) {
		t.Fatalf("the leader got %+v", req)
	}
	for _, r := range follower.requests() {
		if r.method == "POST" {
			t.Fatalf("the follower got the import too: %+v", r)
		}
	}

	unreachable := followerOf("127.0.0.1:1")
	code, out, errOut = runCmd(t, "import", "--from", "csv", "--addr", unreachable.addr, "--key", "lr_admin", file)
	if code != 0 || strings.Contains(out, "sending the import to the leader") {
		t.Fatalf("leader not answering: exit %d\n%s%s", code, out, errOut)
	}
	unreachable.sent(t, "POST", "/admin/import")
}

package main

import (
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
		"1 click totals: an imported link starts at 0 clicks",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	req := n.only(t)
	lines := strings.Split(strings.TrimSpace(string(req.body)), "\n")
	if req.ctype != "application/x-ndjson" || len(lines) != 2 || !strings.Contains(lines[1], `"workspace":"moved"`) ||
		!strings.Contains(lines[0], `"workspace":"marketing"`) {
		t.Fatalf("sent %s %q", req.ctype, req.body)
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

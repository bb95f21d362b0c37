package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestImportFromCSV imports a fixture of package migrate into a real node
// with "linkraft import --from csv", then reads the links back.
func TestImportFromCSV(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	fixture := filepath.Join(root, "migrate", "testdata", "links.csv")
	cli := func(args ...string) (string, error) {
		return runCommand(t, time.Minute, []string{"LINKRAFT_ADMIN_TOKEN=" + n.credential, "LINKRAFT_ADDR=" + n.httpAddr},
			append([]string{"import", "--from", "csv"}, args...)...)
	}

	out, err := cli("--dry-run", fixture)
	if err == nil || !strings.Contains(out, "would create 2") || !strings.Contains(out, "links.csv:6: custom_code") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if r := n.get(t, "/api/v1/urls/plain"); r.status != http.StatusNotFound {
		t.Fatalf("the dry run wrote: %v", r)
	}

	// Some lines are refused, so the exit status is 1 and the report says which.
	out, err = cli(fixture)
	if err == nil || !strings.Contains(out, "created 2, skipped 1") || !strings.Contains(out, "links.csv:5: code plain is already used by line 3") ||
		strings.Contains(out, "titles") || !strings.Contains(out, "1 click totals") {
		t.Fatalf("import: %v\n%s", err, out)
	}
	n.requireRedirect(t, "plain", "https://example.com/plain")
	n.requireRedirect(t, "promo-2030", "https://example.com/promo")
	var l link
	decodeObject(t, n.get(t, "/api/v1/urls/promo-2030"), nil, &l)
	if l.Workspace != "marketing" || l.ExpiresAt == nil || !strings.HasPrefix(*l.ExpiresAt, "2099-12-31T23:59:59") {
		t.Fatalf("imported link: %+v", l)
	}
	var kept struct {
		Title string   `json:"title"`
		Tags  []string `json:"tags"`
	}
	decodeObject(t, n.get(t, "/api/v1/urls/promo-2030"), nil, &kept)
	if kept.Title != "Promo, big" || strings.Join(kept.Tags, ",") != "sale,q1" {
		t.Fatalf("the import dropped the title or tags: %+v", kept)
	}

	// Again: the server skips what it already has, and says so.
	out, _ = cli(fixture)
	if !strings.Contains(out, "created 0, skipped 3") {
		t.Fatalf("second import:\n%s", out)
	}
}

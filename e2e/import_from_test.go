package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestImportFromCSV imports a fixture of package migrate into a
// three-node cluster with "linkraft import --from csv" named a follower
// (which sends it on to the leader), then reads the links back on every
// node: codes, targets, workspaces, expiry, titles, tags, creation times
// and click totals are kept.
func TestImportFromCSV(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	_, followers := waitOneLeader(t, formationBound, nodes...)
	n := followers[0]
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
	if err == nil || !strings.Contains(out, "would create 2") || !strings.Contains(out, "links.csv:6: custom_code") ||
		!strings.Contains(out, "would keep creation times: 1, click totals: 1") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if r := n.get(t, "/api/v1/urls/plain"); r.status != http.StatusNotFound {
		t.Fatalf("the dry run wrote: %v", r)
	}

	// Some lines are refused, so the exit status is 1 and the report says which.
	out, err = cli(fixture)
	if err == nil || !strings.Contains(out, "created 2, skipped 1") || !strings.Contains(out, "links.csv:5: code plain is already used by line 3") ||
		!strings.Contains(out, "sending the import to the leader") ||
		strings.Contains(out, "not kept") || !strings.Contains(out, "kept creation times: 1, click totals: 1") {
		t.Fatalf("import: %v\n%s", err, out)
	}
	for _, m := range nodes {
		m.requireRedirectHead(t, "plain", "https://example.com/plain")
		var l link
		var kept struct {
			Title string   `json:"title"`
			Tags  []string `json:"tags"`
		}
		r := m.get(t, "/api/v1/urls/promo-2030")
		decodeObject(t, r, readFields, &l)
		decodeObject(t, r, nil, &kept)
		if l.Workspace != "marketing" || l.ExpiresAt == nil || !strings.HasPrefix(*l.ExpiresAt, "2099-12-31T23:59:59") ||
			l.CreatedAt != "2025-01-01T00:00:00.000Z" || l.ClickCount != 100 || l.LastAccessedAt != nil {
			t.Fatalf("imported link on %s: %+v, want it created 2025-01-01 with 100 clicks, never accessed here", m.id, l)
		}
		if kept.Title != "Promo, big" || strings.Join(kept.Tags, ",") != "sale,q1" {
			t.Fatalf("the import dropped the title or tags on %s: %+v", m.id, kept)
		}
	}
	// A click after the import adds to the imported total, everywhere.
	nodes[2].requireRedirect(t, "promo-2030", "https://example.com/promo")
	for _, m := range nodes {
		if got := m.waitClicks(t, "promo-2030", 101); got != 101 {
			t.Errorf("clicks on %s after one more: %d, want 101", m.id, got)
		}
	}

	// Again: the server skips what it already has, and says so.
	out, _ = cli(fixture)
	if !strings.Contains(out, "created 0, skipped 3") {
		t.Fatalf("second import:\n%s", out)
	}
}

package e2e

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestLinksCLI drives "linkraft links" against a real node with a key that
// has only the links scopes, as a person in a terminal would.
func TestLinksCLI(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})
	out, err := runCommand(t, 30*time.Second, []string{"LINKRAFT_ADMIN_TOKEN=" + n.credential, "LINKRAFT_ADDR=" + n.httpAddr},
		"keys", "create", "--name", "links-cli", "--scopes", "links:read,links:write", "--workspaces", "team")
	key := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "lr_") {
			key = line
		}
	}
	if err != nil || key == "" {
		t.Fatalf("linkraft keys create: %v\n%s", err, out)
	}
	cli := func(args ...string) (string, error) {
		return runCommand(t, 30*time.Second, []string{"LINKRAFT_KEY=" + key, "LINKRAFT_ADDR=" + n.httpAddr}, append([]string{"links"}, args...)...)
	}

	out, err = cli("create", "https://example.com/cli/ünïcode", "--code", "cli-one", "--expires-in", "24h", "--title", "CLI one", "--tags", "launch,cli")
	if err != nil || !strings.HasSuffix(strings.TrimSpace(out), "/cli-one") {
		t.Fatalf("links create: %v\n%s", err, out)
	}
	n.requireRedirect(t, "cli-one", "https://example.com/cli/ünïcode")
	for i := range 3 {
		if out, err := cli("create", "https://example.com/cli/"+itoa(i)); err != nil {
			t.Fatalf("links create %d: %v\n%s", i, err, out)
		}
	}
	// The node's refusal reaches the user as its detail, exit status 1.
	out, err = cli("create", "javascript:alert(1)")
	if err == nil || !strings.Contains(out, "400") || !strings.Contains(out, "scheme") {
		t.Fatalf("links create of a bad URL: %v\n%s", err, out)
	}
	out, err = cli("create", "https://example.com/", "--workspace", "elsewhere")
	if err == nil || !strings.Contains(out, "403") || !strings.Contains(out, "links:write") {
		t.Fatalf("links create outside the key's workspace: %v\n%s", err, out)
	}

	n.waitClicks(t, "cli-one", 1) // requireRedirect's
	out, err = cli("get", "cli-one")
	if err != nil || !regexp.MustCompile(`(?m)^clicks: +1$`).MatchString(out) || !strings.Contains(out, "team") ||
		!regexp.MustCompile(`(?m)^title: +CLI one$`).MatchString(out) || !regexp.MustCompile(`(?m)^tags: +launch,cli$`).MatchString(out) {
		t.Fatalf("links get: %v\n%s", err, out)
	}

	out, err = cli("list", "--workspace", "team", "--limit", "2", "--all", "--json")
	var doc struct {
		Links []struct {
			ShortCode string `json:"short_code"`
		} `json:"links"`
	}
	if err != nil || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Links) != 4 || doc.Links[3].ShortCode != "cli-one" {
		t.Fatalf("links list --all --json: want 4 links, the oldest last: %v\n%s", err, out)
	}
	out, err = cli("list", "--limit", "2")
	if err != nil || strings.Count(out, "https://example.com/cli/") != 2 || !strings.Contains(out, "cursor=") {
		t.Fatalf("links list of one page: %v\n%s", err, out)
	}

	out, err = cli("edit", "cli-one", "--url", "https://example.com/cli/edited", "--tags", "a,b", "--no-expiry")
	if err != nil || !strings.HasSuffix(strings.TrimSpace(out), "/cli-one -> https://example.com/cli/edited") {
		t.Fatalf("links edit: %v\n%s", err, out)
	}
	n.requireRedirect(t, "cli-one", "https://example.com/cli/edited")
	out, err = cli("history", "cli-one")
	if err != nil || !strings.Contains(out, "https://example.com/cli/ünïcode") || !strings.Contains(out, "https://example.com/cli/edited") {
		t.Fatalf("links history: %v\n%s", err, out)
	}
	if out, err := cli("edit", "cli-one", "--max-visits", "3", "--no-max-visits"); err == nil || !strings.Contains(out, "contradicts") {
		t.Fatalf("links edit with contradicting flags: %v\n%s", err, out)
	}
	if out, err := cli("delete", "cli-one"); err != nil || strings.TrimSpace(out) != "deleted cli-one" {
		t.Fatalf("links delete: %v\n%s", err, out)
	}
	if out, err := cli("get", "cli-one"); err == nil || !strings.Contains(out, "404") {
		t.Fatalf("links get after delete: %v\n%s", err, out)
	}
}

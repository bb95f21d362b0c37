package e2e

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// previousRelease is the last commit of the release before link options
// (API keys and a closed cluster): the build a cluster is upgraded from.
const previousRelease = "e935876e24ccfd5a8e115c3df3a53fdfd9322b56"

// buildPreviousRelease builds linkraft as it was at previousRelease, from
// this repository's history (git archive), with the module proxy for any
// module the current tree does not already use.
func buildPreviousRelease(t *testing.T) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	commit, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", previousRelease+"^{commit}").Output()
	if err != nil {
		t.Fatalf("the previous release (%s) is not in this clone's history: the upgrade test needs a full clone (git fetch --unshallow): %v", previousRelease[:7], err)
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, strings.TrimSpace(string(commit)), src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", previousRelease[:7], err, out)
	}
	bin := filepath.Join(t.TempDir(), "linkraft-previous")
	build := exec.Command(goTool(), "build", "-o", bin, "./cmd/linkraft")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the previous release: %v\n%s", err, out)
	}
	return bin
}

// TestRollingUpgrade: a cluster of the previous release is upgraded one
// node at a time. While old and new builds run together, every write the
// old build knows keeps working through any node, and nothing an old node
// could not apply is written: a link with options, an edit or a domain is
// refused (503, "finish the upgrade") through new nodes, and the old
// nodes never meet an entry they cannot decode. Once every node runs the
// new build, the new writes work, and every link from before is intact.
func TestRollingUpgrade(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	old := buildPreviousRelease(t)
	key := newClusterKey(t)
	nodes := make([]*node, 3)
	var gossip []string
	for i := range nodes {
		nodes[i] = newNode(t, "node"+itoa(i+1))
		nodes[i].bin = old
		nodes[i].clusterKey = key
		gossip = append(gossip, nodes[i].gossipAddr)
	}
	for _, n := range nodes {
		n.args, n.env = n.commandLine(nodeOptions{Settings: map[string]string{"bootstrap-expect": "3", "join": strings.Join(gossip, ",")}})
		n.launch()
	}
	waitOneLeader(t, formationBound, nodes...)
	var links []link
	for i := range 5 {
		links = append(links, nodes[i%3].createURL(t, "https://example.com/before-upgrade/"+itoa(i)))
	}

	for i, n := range nodes {
		n.bin = ""
		n.restartUntil(leaderKnown)
		waitOneLeader(t, formationBound, nodes...)
		for _, m := range nodes {
			links = append(links, m.createURL(t, "https://example.com/during-upgrade/"+itoa(i)+"/"+m.id))
		}
		if i == len(nodes)-1 {
			break
		}
		// Mixed: the new node refuses what an old one could not apply.
		r := n.postJSON(t, "/api/v1/urls", map[string]any{"original_url": "https://example.com/titled", "title": "too soon"})
		if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "upgrade") {
			t.Fatalf("a create with options through upgraded %s while %d node(s) run the old build: %v", n.id, 2-i, r)
		}
		if r := n.patch(t, links[0].ShortCode, `{"original_url":"https://example.com/too-soon"}`); r.status != http.StatusServiceUnavailable {
			t.Fatalf("an edit through upgraded %s in a mixed cluster: %v", n.id, r)
		}
		if r := n.patch(t, links[1].ShortCode, `{"short_code":"too-soon-`+itoa(i)+`"}`); r.status != http.StatusServiceUnavailable {
			t.Fatalf("a rename through upgraded %s in a mixed cluster: %v", n.id, r)
		}
		if r := n.postJSON(t, "/admin/domains", map[string]any{"domain": "too-soon.example"}); r.status != http.StatusServiceUnavailable {
			t.Fatalf("a domain through upgraded %s in a mixed cluster: %v", n.id, r)
		}
		// An import line with a creation time and clicks: the upgraded
		// leader fails that line, an upgraded follower the whole import.
		line := `{"short_code":"too-soon-` + itoa(i) + `","original_url":"https://example.com/imported","created_at":"2020-01-01T00:00:00Z","clicks":5}`
		r = n.request(t, http.MethodPost, "/admin/import", http.Header{"Content-Type": {"application/x-ndjson"}}, []byte(line))
		if refused := r.status == http.StatusServiceUnavailable || r.status == http.StatusOK && strings.Contains(string(r.body), `"created":0`); !refused || !strings.Contains(string(r.body), "upgrade") {
			t.Fatalf("an import keeping creation times through upgraded %s in a mixed cluster: %v", n.id, r)
		}
	}
	for _, n := range nodes {
		if out := n.out.String(); strings.Contains(out, "decode command") || strings.Contains(out, "unknown type") || strings.Contains(out, "unsupported snapshot version") {
			t.Fatalf("%s met an entry or snapshot it could not read:\n%s", n.id, tail(out, 3000))
		}
	}

	// All new: what needed every node now works (the levels are asked
	// again within a few seconds).
	var titled link
	if !eventually(15*time.Second, func() bool {
		r := nodes[1].postJSON(t, "/api/v1/urls", map[string]any{"original_url": "https://example.com/titled", "title": "after the upgrade"})
		if r.status == http.StatusCreated {
			decodeObject(t, r, nil, &titled)
		}
		return r.status == http.StatusCreated
	}) {
		t.Fatal("a create with options still refused 15 s after every node was upgraded")
	}
	if r := nodes[2].patch(t, links[0].ShortCode, `{"original_url":"https://example.com/after-upgrade"}`); r.status != http.StatusOK {
		t.Fatalf("an edit after the upgrade: %v", r)
	}
	// Each node asks for levels on its own (at most every 5 s a server):
	// the one that takes the import may learn of the last upgrade later
	// than the one that took the create.
	imported := `{"short_code":"after-upgrade","original_url":"https://example.com/imported","created_at":"2020-01-01T00:00:00Z","clicks":5}`
	var r response
	if !eventually(15*time.Second, func() bool {
		r = nodes[0].request(t, http.MethodPost, "/admin/import", http.Header{"Content-Type": {"application/x-ndjson"}}, []byte(imported))
		return r.status == http.StatusOK && strings.Contains(string(r.body), `"created":1`)
	}) {
		t.Fatalf("an import keeping creation times still refused 15 s after every node was upgraded: %v", r)
	}
	for _, n := range nodes {
		var l link
		decodeObject(t, n.get(t, "/api/v1/urls/after-upgrade"), readFields, &l)
		if l.CreatedAt != "2020-01-01T00:00:00.000Z" || l.ClickCount != 5 {
			t.Errorf("imported link on %s after the upgrade: %+v", n.id, l)
		}
	}
	// Once every server reports the new build, the leader raises the
	// cluster to its level: the new bounds hold from then on.
	waitRaised(t, nodes[0], 7)
	links[0].OriginalURL = "https://example.com/after-upgrade"
	for _, n := range nodes {
		checkRedirectsHead(t, n, append(links, titled))
	}
}

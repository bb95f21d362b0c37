package e2e

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// patch sends an edit of code through n.
func (n *node) patch(t *testing.T, code, body string) response {
	t.Helper()
	return n.request(t, http.MethodPatch, "/api/v1/urls/"+code, http.Header{"Content-Type": {"application/json"}}, []byte(body))
}

// TestEditIsVisibleOnEveryNode: after an edit's 200, the node that answered
// and every other node redirect to the new target at once, and every node
// keeps the same history of targets. Edits go through every node in turn
// (followers forward them to the leader).
func TestEditIsVisibleOnEveryNode(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	waitOneLeader(t, formationBound, nodes...)

	var stale []string
	var edited []link
	for i := range 15 {
		creator, editor := nodes[i%3], nodes[(i+1)%3]
		l := creator.createURL(t, "https://example.com/before/"+itoa(i))
		for round := range 2 {
			target := "https://example.com/after/" + itoa(i) + "/" + itoa(round)
			if r := editor.patch(t, l.ShortCode, `{"original_url":"`+target+`"}`); r.status != http.StatusOK {
				t.Fatalf("PATCH /%s through %s: want 200, got %v", l.ShortCode, editor.id, r)
			}
			for _, n := range []*node{editor, nodes[(i+2)%3], creator} {
				r := n.request(t, http.MethodHead, "/"+l.ShortCode, nil, nil)
				if got := r.header.Get("Location"); got != target {
					stale = append(stale, "HEAD /"+l.ShortCode+" on "+n.id+" after an edit through "+editor.id+": "+got+", want "+target)
				}
			}
		}
		edited = append(edited, l)
	}
	if len(stale) > 0 {
		t.Fatalf("%d reads right after an acknowledged edit served an older target:\n%v", len(stale), stale)
	}
	for _, l := range edited {
		var first []map[string]any
		for i, n := range nodes {
			var h struct{ Versions []map[string]any }
			if err := json.Unmarshal(n.get(t, "/api/v1/urls/"+l.ShortCode+"/history").body, &h); err != nil {
				t.Fatal(err)
			}
			if len(h.Versions) != 3 {
				t.Fatalf("history of %s on %s: %v, want the creation and two edits", l.ShortCode, n.id, h.Versions)
			}
			if i == 0 {
				first = h.Versions
			} else if !reflect.DeepEqual(first, h.Versions) {
				t.Fatalf("history of %s differs between %s and %s:\n%v\n%v", l.ShortCode, nodes[0].id, n.id, first, h.Versions)
			}
		}
	}
}

// TestVisitLimitIsExactAcrossNodes: a link limited to five visits, visited
// by many clients through every node at once, redirects exactly five
// times in all and answers 410 to every other visit; its click count is
// five on every node.
func TestVisitLimitIsExactAcrossNodes(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	waitOneLeader(t, formationBound, nodes...)
	l := nodes[0].createLink(t, map[string]any{"original_url": "https://example.com/limited", "max_visits": 5})

	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := nodes[w%3]
			for range 5 {
				r := n.request(t, http.MethodGet, "/"+l.ShortCode, nil, nil)
				mu.Lock()
				statuses[r.status]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if statuses[http.StatusFound] != 5 || statuses[http.StatusGone] != 55 {
		t.Fatalf("60 visits to a link limited to 5 through three nodes: %v, want 5 × 302 and 55 × 410", statuses)
	}
	for _, n := range nodes {
		if got := n.waitClicks(t, l.ShortCode, 5); got != 5 {
			t.Fatalf("click count on %s: %d, want 5", n.id, got)
		}
	}
}

// TestManagedLinksOnFollowers: what a link has beyond its target — a
// password, rules, query forwarding — holds on every node, not only where
// it was set; a bulk create through a follower answers each item in order.
func TestManagedLinksOnFollowers(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, followers := waitOneLeader(t, formationBound, nodes...)
	protected := leader.createLink(t, map[string]any{"original_url": "https://example.com/private", "password": "open sesame"})
	ruled := leader.createLink(t, map[string]any{"original_url": "https://example.com/web", "forward_query": true,
		"rules": []any{map[string]any{"when": map[string]any{"device": "android"}, "url": "https://play.example/app"}}})
	android := "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 Chrome/120.0 Mobile Safari/537.36"
	for _, n := range followers {
		if r := n.request(t, http.MethodGet, "/"+protected.ShortCode, nil, nil); r.status != http.StatusUnauthorized || r.header.Get("Location") != "" {
			t.Errorf("%s without the password: %v Location %q", n.id, r, r.header.Get("Location"))
		}
		if r := n.request(t, http.MethodGet, "/"+protected.ShortCode, http.Header{"X-Link-Password": {"open sesame"}}, nil); r.header.Get("Location") != "https://example.com/private" {
			t.Errorf("%s with the password: %v", n.id, r)
		}
		if r := n.request(t, http.MethodHead, "/"+ruled.ShortCode+"?utm=e2e", http.Header{"User-Agent": {android}}, nil); r.header.Get("Location") != "https://play.example/app?utm=e2e" {
			t.Errorf("%s, an Android visit: Location %q", n.id, r.header.Get("Location"))
		}
	}

	r := followers[0].postJSON(t, "/api/v1/urls/bulk", map[string]any{"links": []any{
		map[string]any{"original_url": "https://example.com/bulk/1"},
		map[string]any{"original_url": "ftp://example.com/bulk/2"},
		map[string]any{"original_url": "https://example.com/bulk/3", "custom_code": "bulk-e2e"},
		map[string]any{"original_url": "https://example.com/bulk/4", "custom_code": "bulk-e2e"},
	}})
	var bulk struct {
		Results []struct {
			Status int   `json:"status"`
			Link   *link `json:"link"`
		}
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &bulk) != nil || len(bulk.Results) != 4 {
		t.Fatalf("bulk through %s: %v", followers[0].id, r)
	}
	for i, want := range []int{201, 400, 201, 409} {
		if bulk.Results[i].Status != want {
			t.Errorf("bulk item %d: %d, want %d", i, bulk.Results[i].Status, want)
		}
	}
	for _, n := range nodes {
		n.requireRedirectHead(t, bulk.Results[0].Link.ShortCode, "https://example.com/bulk/1")
		n.requireRedirectHead(t, "bulk-e2e", "https://example.com/bulk/3")
	}
}

// TestTwoDomainsWithTheSameCode: one code in two domains, each served by
// its own Host on every node; the default domain's link on any other host.
func TestTwoDomainsWithTheSameCode(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	_, followers := waitOneLeader(t, formationBound, nodes...)
	for _, d := range []string{"a.example", "b.example"} {
		if r := followers[0].postJSON(t, "/admin/domains", map[string]any{"domain": d, "not_found_redirect": "https://" + d + "/missing"}); r.status != http.StatusOK {
			t.Fatalf("register %s: %v", d, r)
		}
	}
	for _, d := range []string{"", "a.example", "b.example"} {
		fields := map[string]any{"original_url": "https://example.com/" + d, "custom_code": "shared"}
		if d != "" {
			fields["domain"] = d
		}
		followers[1].createLink(t, fields)
	}
	for _, n := range nodes {
		for _, tc := range []struct{ host, path, want string }{
			{"a.example", "/shared", "https://example.com/a.example"},
			{"B.example:80", "/shared", "https://example.com/b.example"},
			{n.httpAddr, "/shared", "https://example.com/"},
			{"a.example", "/nothing-here", "https://a.example/missing"},
		} {
			r := n.request(t, http.MethodHead, tc.path, http.Header{"Host": {tc.host}}, nil)
			if got := r.header.Get("Location"); got != tc.want {
				t.Errorf("%s: HEAD %s%s: %d Location %q, want %q", n.id, tc.host, tc.path, r.status, got, tc.want)
			}
		}
	}
}

// TestListIsReadAfterWrite: a link created through one node is in the
// list and the tags another node answers right after, in every round:
// each catches up with the leader first, as a lookup does.
//
// The two halves ask different nodes, each asked nothing else since the
// write, so that neither half's catch-up serves the other. A follower
// learns that the write committed only with the leader's next append
// (some 50-100 ms later), so most rounds whose reader is a follower ask it
// before it applied the write: a read that skips the catch-up fails within
// a few rounds, and 24 rounds (16 of them asking a follower for the tags,
// as many for the list) make that all but certain.
func TestListIsReadAfterWrite(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	for round := range 24 {
		via, tagsReader, listReader := nodes[round%3], nodes[(round+1)%3], nodes[(round+2)%3]
		tag := "raw" + itoa(round) // in no link before this round's
		l := via.createLink(t, map[string]any{"url": "https://example.com/list/" + itoa(round), "tags": []string{tag}})
		if r := tagsReader.get(t, "/api/v1/tags"); !strings.Contains(string(r.body), `"`+tag+`"`) {
			t.Fatalf("round %d: created a link tagged %s through %s; the tags %s answered right after lack it: %s", round, tag, via.id, tagsReader.id, r.body)
		}
		var list struct {
			Links []struct {
				ShortCode string `json:"short_code"`
			} `json:"links"`
		}
		decodeObject(t, listReader.get(t, "/api/v1/urls?limit=5"), nil, &list)
		if len(list.Links) == 0 || list.Links[0].ShortCode != l.ShortCode {
			t.Fatalf("round %d: created %s through %s; the list %s answered right after starts with %v", round, l.ShortCode, via.id, listReader.id, list.Links)
		}
	}
}

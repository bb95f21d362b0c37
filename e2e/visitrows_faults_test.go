package e2e

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"
)

// TestVisitRowsAcrossALeaderKill: the joint visitor tallies behind the
// visit rows come from the same exactly-once click entries as the day
// breakdowns, through a leader killed with SIGKILL (its successor takes
// the batches resent to it), the dead node's restart from its snapshot
// and log, and clicks on every node around both. After each round every
// node lists as many rows as the link has clicks, the rows grouped by each
// dimension equal that node's own breakdown, and every node lists the
// same rows.
func TestVisitRowsAcrossALeaderKill(t *testing.T) {
	skipIfShort(t)
	nodes := startCluster(t, 3, map[string]string{"trusted-proxy": "127.0.0.0/8", "snapshot-threshold": "16"})
	leader, _ := waitOneLeader(t, formationBound, nodes...)
	waitRaised(t, leader, 9) // fsm.LevelVisitRows
	code := leader.createURL(t, "https://example.com/rows-kill").ShortCode
	visitors := []struct{ ua, referer, forwardedFor string }{
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "https://news.example.com/a", "8.8.8.8"},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1", "", "81.2.69.142"},
		{"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0", "https://mail.example.org/x", "193.0.6.139"},
		{"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", "", "8.8.8.8"},
	}
	people := int64(0)
	visit := func(through []*node) {
		t.Helper()
		for _, n := range through {
			for i, v := range visitors {
				h := http.Header{"User-Agent": {v.ua}, "X-Forwarded-For": {v.forwardedFor}, "Authorization": nil}
				if v.referer != "" {
					h.Set("Referer", v.referer)
				}
				if r := n.request(t, http.MethodGet, "/"+code, h, nil); r.status != http.StatusFound {
					t.Fatalf("GET /%s on %s: %v", code, n.id, r)
				}
				if i != len(visitors)-1 { // the last is a bot's
					people++
				}
			}
		}
	}
	check := func(round string, on []*node) {
		t.Helper()
		for _, n := range on {
			if !eventually(3*clickWaitTimeout, func() bool { return n.clicks(t, code) == people }) {
				t.Fatalf("%s: %s counts %d clicks, want %d", round, n.id, n.clicks(t, code), people)
			}
			rows := visitRows(t, n, code)
			if int64(len(rows)) != people {
				t.Fatalf("%s: %s lists %d rows for %d clicks", round, n.id, len(rows), people)
			}
			for _, dim := range []string{"browser", "os", "country", "referrer"} {
				got := map[string]int64{}
				for _, r := range rows {
					v, _ := r[dim].(string)
					got[v]++
				}
				want := map[string]int64{}
				for _, g := range n.visits(t, "/api/v1/urls/"+code+"/stats?group_by="+dim).Visits.Groups {
					want[g.Value] = g.Clicks
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: %s's rows by %s %v, its breakdown %v", round, n.id, dim, got, want)
				}
			}
		}
		// The same rows on every node, read in one pass; once more if
		// an hour ended during it (its rows then move from the hour's
		// start to spread over it).
		var differ string
		eventually(5*time.Second, func() bool {
			differ = ""
			first := visitRows(t, on[0], code)
			for _, n := range on[1:] {
				if !reflect.DeepEqual(visitRows(t, n, code), first) {
					differ = n.id
				}
			}
			return differ == ""
		})
		if differ != "" {
			t.Errorf("%s: %s lists other rows than %s", round, differ, on[0].id)
		}
	}

	visit(nodes)
	check("before the kill", nodes)
	leader.kill9()
	var rest []*node
	for _, n := range nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	waitOneLeader(t, formationBound, rest...)
	visit(rest)
	check("after the kill", rest)
	leader.restartUntil(leaderKnown)
	visit(nodes)
	check("after the restart", nodes)
}

// visitRows lists a link's visit rows on n, people only, without the
// short URL.
func visitRows(t *testing.T, n *node, code string) []map[string]any {
	t.Helper()
	r := n.get(t, "/api/v1/urls/"+code+"/visits?exclude_bots=true&limit=5000")
	var page struct {
		Visits []map[string]any `json:"visits"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &page) != nil {
		t.Fatalf("rows of %s on %s: %v", code, n.id, r)
	}
	for _, v := range page.Visits {
		delete(v, "short_url") // each node names itself in it
	}
	return page.Visits
}

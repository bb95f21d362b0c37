package e2e

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// visitsAnswer is the part of a grouped stats answer this test reads.
type visitsAnswer struct {
	Clicks int64 `json:"clicks"`
	Visits struct {
		Clicks   int64 `json:"clicks"`
		Crawlers int64 `json:"crawlers"`
		Previews int64 `json:"previews"`
		Groups   []struct {
			Value  string `json:"value"`
			Clicks int64  `json:"clicks"`
		} `json:"groups"`
	} `json:"visits"`
}

func (n *node) visits(t *testing.T, path string) visitsAnswer {
	t.Helper()
	r := n.get(t, path)
	var v visitsAnswer
	if r.status != http.StatusOK || json.Unmarshal(r.body, &v) != nil {
		t.Fatalf("%s on %s: %v", path, n.id, r)
	}
	return v
}

// TestVisitBreakdownsOnEveryNode: clicks with known User-Agents, referrers
// and client addresses forwarded by a trusted proxy, made on all three
// nodes (a limited link's through followers to the leader), give the
// same breakdowns on every node, each summing to the link's clicks, with
// previews and crawlers apart; the CSV answer parses to the same numbers.
func TestVisitBreakdownsOnEveryNode(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, map[string]string{"trusted-proxy": "127.0.0.0/8"})
	leader, _ := waitOneLeader(t, formationBound, nodes...)
	plain := leader.createURL(t, "https://example.com/visits")
	limited := leader.createLink(t, map[string]any{"url": "https://example.com/limited", "max_visits": 100})
	const (
		chrome  = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
		safari  = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1"
		firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"
		slack   = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
		google  = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	)
	visitors := []struct {
		ua, referer, forwardedFor string
	}{
		{chrome, "https://news.example.com/story", "8.8.8.8"},      // US
		{safari, "", "81.2.69.142"},                                // GB
		{firefox, "https://mail.example.org/inbox", "193.0.6.139"}, // NL
		{chrome, "", "10.1.2.3"},                                   // private: unknown
		{slack, "", "8.8.8.8"},                                     // a preview
		{google, "", "8.8.8.8"},                                    // a crawler
	}
	// Every node serves every visitor of each link twice.
	for _, code := range []string{plain.ShortCode, limited.ShortCode} {
		for _, n := range nodes {
			for _, v := range visitors {
				h := http.Header{"User-Agent": {v.ua}, "X-Forwarded-For": {v.forwardedFor}, "Authorization": nil}
				if v.referer != "" {
					h.Set("Referer", v.referer)
				}
				for range 2 {
					if r := n.request(t, http.MethodGet, "/"+code, h, nil); r.status != http.StatusFound {
						t.Fatalf("GET /%s on %s as %+v: %v", code, n.id, v, r)
					}
				}
			}
		}
	}
	const people, previews, crawlers = 3 * 4 * 2, 3 * 2, 3 * 2
	want := map[string]map[string]int64{
		"country":  {"US": 6, "GB": 6, "NL": 6, "XX": 6},
		"browser":  {"chrome": 12, "safari": 6, "firefox": 6},
		"os":       {"windows": 12, "ios": 6, "linux": 6},
		"device":   {"desktop": 18, "mobile": 6},
		"referrer": {"news.example.com": 6, "mail.example.org": 6, "direct": 12},
	}
	for _, code := range []string{plain.ShortCode, limited.ShortCode} {
		var first map[string]visitsAnswer
		for _, n := range nodes {
			// Bots ride in the same batches as people, and the last
			// batch may hold only bots: wait for both.
			path := "/api/v1/urls/" + code + "/stats?group_by=device"
			eventually(clickWaitTimeout, func() bool {
				v := n.visits(t, path)
				return v.Clicks >= people && v.Visits.Crawlers+v.Visits.Previews >= crawlers+previews
			})
			if got := n.clicks(t, code); got != people {
				t.Fatalf("clicks of %s on %s: %d, want %d (bots apart)", code, n.id, got, people)
			}
			answers := map[string]visitsAnswer{}
			for dim, groups := range want {
				v := n.visits(t, "/api/v1/urls/"+code+"/stats?group_by="+dim)
				got, sum := map[string]int64{}, int64(0)
				for _, g := range v.Visits.Groups {
					got[g.Value] = g.Clicks
					sum += g.Clicks
				}
				if !reflect.DeepEqual(got, groups) || sum != v.Clicks || v.Visits.Clicks != people {
					t.Errorf("%s by %s on %s: %v (sum %d, clicks %d), want %v", code, dim, n.id, got, sum, v.Clicks, groups)
				}
				if v.Visits.Previews != previews || v.Visits.Crawlers != crawlers {
					t.Errorf("%s on %s: %d previews, %d crawlers; want %d and %d", code, n.id, v.Visits.Previews, v.Visits.Crawlers, previews, crawlers)
				}
				answers[dim] = v
			}
			if first == nil {
				first = answers
			} else if !reflect.DeepEqual(answers, first) {
				t.Errorf("%s: %s answers differently from %s", code, n.id, nodes[0].id)
			}
		}
	}
	// The workspace sees both links; CSV says the same as JSON.
	for _, n := range nodes {
		r := n.get(t, "/api/v1/stats?workspace=default&group_by=country&format=csv")
		rows, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
		if r.status != http.StatusOK || err != nil || len(rows) != 5 || rows[0][0] != "country" {
			t.Fatalf("workspace CSV on %s: %v %v", n.id, err, r)
		}
		for _, row := range rows[1:] {
			if row[1] != "12" {
				t.Errorf("workspace CSV on %s: %v, want 12 clicks a country", n.id, rows)
			}
		}
	}
	// Exactly once: a flush later the numbers hold.
	time.Sleep(2 * fastFlush)
	for _, n := range nodes {
		if got := n.clicks(t, plain.ShortCode); got != people {
			t.Fatalf("clicks on %s settled at %d, want %d", n.id, got, people)
		}
	}
}

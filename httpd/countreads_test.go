package httpd

import (
	"testing"
)

// TestCountReadsCatchUpFirst: every read that shows a link's click count,
// and robots.txt, first applies what the leader has acknowledged (one
// read-index round), so that a count, once any node showed it, only goes
// forward whichever node a client asks next (e2e
// TestCountsOnlyGoForwardAcrossNodes tries it on a live cluster, where a
// node behind is a matter of timing), and a link made crawlable is listed
// by every node right after (e2e TestShlinkRobots).
func TestCountReadsCatchUpFirst(t *testing.T) {
	s, reads := newCountingServer(t)
	code := mustCreate(t, s, `{"url":"https://example.com/counted"}`)
	for _, read := range []struct{ name, uri string }{
		{"link", "/api/v1/urls/" + code},
		{"stats", "/api/v1/urls/" + code + "/stats"},
		{"list", "/api/v1/urls"},
		{"YOURLS url-stats", "/yourls-api.php?action=url-stats&format=json&shorturl=" + code + "&signature=" + testToken},
		{"Shlink short URL", "/rest/v3/short-urls/" + code},
		// Not a count, but a list of links that Shlink's tests read right
		// after the write that made one crawlable.
		{"robots.txt", "/robots.txt"},
	} {
		before := reads.n.Load()
		ctx := do(s, "GET", read.uri, "", "")
		if status := ctx.Response.StatusCode(); status != 200 {
			t.Fatalf("%s: %d %s", read.name, status, ctx.Response.Body())
		}
		if reads.n.Load() == before {
			t.Errorf("%s showed a click count without catching up with the leader first", read.name)
		}
	}
}

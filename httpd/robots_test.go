package httpd

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// robotsTxt is the robots.txt s answers for host.
func robotsTxt(t *testing.T, s *Server, host string) string {
	t.Helper()
	ctx := do(s, "GET", "/robots.txt", "", "", "Authorization", "", "Host", host)
	if ctx.Response.StatusCode() != 200 {
		t.Fatalf("robots.txt of %s: %d %s", host, ctx.Response.StatusCode(), ctx.Response.Body())
	}
	return string(ctx.Response.Body())
}

// TestRobotsTxtKeptBetweenWrites: robots.txt, which anyone may ask for as
// often as they like, scans the links once between writes, not once a
// request; a write on the node answering is in its next answer all the
// same, and so is a restore.
func TestRobotsTxtKeptBetweenWrites(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	var backup bytes.Buffer
	if err := realNode(s).Backup(&backup); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, `{"url":"https://example.com/a","workspace":"w","custom_code":"kept-a","crawlable":true}`)
	var withA bytes.Buffer
	if err := realNode(s).Backup(&withA); err != nil {
		t.Fatal(err)
	}

	scans := s.api.tags.robots.scans.Load()
	first := robotsTxt(t, s, "sho.rt")
	if again := robotsTxt(t, s, "sho.rt"); again != first || !strings.Contains(first, "Allow: /kept-a\n") {
		t.Fatalf("robots.txt changed without a write, or lacks kept-a:\n%s\nthen\n%s", first, again)
	}
	if n := s.api.tags.robots.scans.Load() - scans; n != 1 {
		t.Fatalf("two robots.txt without a write in between scanned the links %d times, want once", n)
	}

	mustCreate(t, s, `{"url":"https://example.com/a","workspace":"w","custom_code":"kept-b","crawlable":true}`)
	if got := robotsTxt(t, s, "sho.rt"); !strings.Contains(got, "Allow: /kept-a\nAllow: /kept-b\n") {
		t.Fatalf("robots.txt right after a crawlable link was made:\n%s", got)
	}

	// A restore replaces the state robots.txt was kept for.
	for _, restore := range []struct {
		backup *bytes.Buffer
		want   string
	}{{&withA, "Allow: /kept-a\nDisallow: /\n"}, {&backup, "User-agent: *\nDisallow: /\n"}} {
		if ctx := do(s, "POST", "/admin/restore", "application/octet-stream", restore.backup.String()); ctx.Response.StatusCode() != 200 {
			t.Fatalf("restore: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
		if got := robotsTxt(t, s, "sho.rt"); !strings.HasSuffix(got, restore.want) {
			t.Fatalf("robots.txt after a restore:\n%s\nwant it to end\n%s", got, restore.want)
		}
	}
}

// TestRobotsCacheIsBounded: the kept bodies never pass their count or
// their bytes, whatever hosts are asked for.
func TestRobotsCacheIsBounded(t *testing.T) {
	c := newRobotsCache()
	big := make([]byte, maxRobotsBytes/4+1)
	for i := range maxRobotsCached + 10 {
		body := []byte("User-agent: *\n")
		if i%100 == 0 {
			body = big
		}
		c.put(fmt.Sprintf("d%d.example", i), robotsEntry{body: body})
		if len(c.entries) > maxRobotsCached || c.bytes > maxRobotsBytes {
			t.Fatalf("after %d domains: %d kept, %d bytes", i+1, len(c.entries), c.bytes)
		}
	}
}

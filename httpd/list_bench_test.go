//go:build unix

package httpd

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
)

// benchListLinks is how many links the list benchmarks hold: the size at
// which a compatible API's list or count must still cost about what the
// native list of one link costs (docs/BENCHMARKS.md).
const benchListLinks = 100_000

// BenchmarkListOfOne asks each API for a list of one link, or for its
// counts, of a node holding benchListLinks links, with a key that sees
// every workspace. Besides the time per request it reports the process's
// CPU time per request (cpu-ns/op), which a machine shared with other
// work inflates less.
func BenchmarkListOfOne(b *testing.B) {
	s := newTestServer(b, nil)
	waitRaised(b, s)
	for i := 0; i < benchListLinks; i += maxBulkLinks {
		var items []string
		for j := i; j < i+maxBulkLinks; j++ {
			items = append(items, fmt.Sprintf(`{"url":"https://example.com/%d"}`, j))
		}
		ctx := do(s, "POST", "/api/v1/urls/bulk", "application/json", `{"links":[`+strings.Join(items, ",")+`]}`)
		if status(ctx) != 200 {
			b.Fatalf("seed: %d %s", status(ctx), ctx.Response.Body())
		}
	}
	key := benchKey(b, s)
	for _, tc := range []struct{ name, uri, header string }{
		{"native", "/api/v1/urls?limit=1", "X-Api-Key"},
		{"kutt", "/api/v2/links?limit=1", "X-Api-Key"},
		{"shlink", "/rest/v3/short-urls?itemsPerPage=1", "X-Api-Key"},
		{"shlink-page-5000", "/rest/v3/short-urls?itemsPerPage=10&page=5000", "X-Api-Key"},
		{"yourls-db-stats", "/yourls-api.php?action=db-stats&format=json&signature=" + key, ""},
	} {
		b.Run(tc.name, func(b *testing.B) {
			headers := []string{"Authorization", ""}
			if tc.header != "" {
				headers = append(headers, tc.header, key)
			}
			start := cpuTime(b)
			for b.Loop() {
				ctx := do(s, "GET", tc.uri, "", "", headers...)
				if status(ctx) != 200 {
					b.Fatalf("%s: %d %s", tc.uri, status(ctx), ctx.Response.Body())
				}
			}
			b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// benchKey is a key that reads and writes links and reads stats in every
// workspace.
func benchKey(b *testing.B, s *Server) string {
	id, key, hash, err := fsm.MintKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	k := fsm.APIKey{ID: id, Name: "bench", Hash: hash, Scopes: fsm.ScopeLinksRead | fsm.ScopeLinksWrite | fsm.ScopeStatsRead,
		Workspaces: []string{fsm.AllWorkspaces}, CreatedAt: 1}
	if _, err := s.node.Writes.Propose(context.Background(), fsm.KeyCreateCommand{Key: k, By: fsm.RootKeyID, Now: 1}, cluster.ProposeOptions{}); err != nil {
		b.Fatalf("create key: %v", err)
	}
	return key
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

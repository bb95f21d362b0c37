package httpd

import (
	"context"
	"fmt"
	"testing"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
)

// missesAnswered is a node's reads whose misses are answered with err, as
// the cluster answers them: fsm.ErrNotFound when the leader confirmed the
// miss, an error wrapping cluster.ErrNoLeader when no leader could.
type missesAnswered struct {
	Reads
	err error
}

func (m missesAnswered) Lookup(ctx context.Context, code string) (fsm.Link, error) {
	if l, ok := m.FSM().Get(code); ok {
		return l, nil
	}
	return fsm.Link{}, m.err
}

// TestRedirectSaysWhenAMissIsItsOwnView: a code the node does not hold is
// 404 either way, but when no leader could confirm the miss (the node has
// none) the answer says it is the node's own view (X-Linkraft-Stale), for
// API clients and browsers alike; a held code redirects as ever.
func TestRedirectSaysWhenAMissIsItsOwnView(t *testing.T) {
	noLeader := fmt.Errorf("confirm miss of nosuch: %w: none for longer than an election takes", cluster.ErrNoLeader)
	tests := []struct {
		name      string
		missErr   error
		method    string
		accept    string
		wantStale bool
	}{
		{"a miss the leader confirmed", fsm.ErrNotFound, "GET", "", false},
		{"a miss no leader could confirm", noLeader, "GET", "", true},
		{"a miss no leader could confirm, HEAD", noLeader, "HEAD", "", true},
		{"a miss no leader could confirm, a browser", noLeader, "GET", "text/html", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServerOn(t, nil, func(n *Node) { n.Reads = missesAnswered{n.Reads, tt.missErr} })
			code := mustCreate(t, s, `{"url":"https://example.com/held"}`)

			ctx := do(s, tt.method, "/nosuch", "", "", "Accept", tt.accept)
			stale := string(ctx.Response.Header.Peek(staleHeader))
			if status(ctx) != 404 || (stale != "") != tt.wantStale {
				t.Errorf("%s /nosuch: %d, %s %q; want 404, marked stale: %v", tt.method, status(ctx), staleHeader, stale, tt.wantStale)
			}

			ctx = do(s, tt.method, "/"+code, "", "", "Accept", tt.accept)
			if status(ctx) != 302 || string(ctx.Response.Header.Peek("Location")) != "https://example.com/held" || len(ctx.Response.Header.Peek(staleHeader)) != 0 {
				t.Errorf("%s /%s (held): %d to %q, %s %q; want 302 to the target, not stale", tt.method, code, status(ctx),
					ctx.Response.Header.Peek("Location"), staleHeader, ctx.Response.Header.Peek(staleHeader))
			}
		})
	}
}

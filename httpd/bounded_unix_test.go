//go:build unix

package httpd

import (
	"syscall"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// processCPU is the CPU time this process has used so far, user and
// system, on all its threads: the node under test runs in it.
func processCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestRefusedBulkHashesNoPassword: a bulk of 300 items that will all be
// refused, each with a password, costs the node well under a second of
// CPU: its items are refused before any password is hashed (bcrypt costs
// some 70 ms of CPU a password, 20 s for the bulk).
func TestRefusedBulkHashesNoPassword(t *testing.T) {
	s := newTestServer(t, nil)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite, 0, "a")
	links := s.fsm.Len()
	for _, tc := range []struct {
		name, item string
		want       int
	}{
		{"a workspace the key may not use", `{"url":"https://example.com/%d","workspace":"b","password":"correct horse %d"}`, 403},
		{"a bad field after the password", `{"url":"https://example.com/%d","password":"correct horse %d","rules":[{"when":{},"url":"https://example.com/r"}]}`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := bulkBody(300, tc.item)
			before := processCPU(t)
			ctx := do(s, "POST", bulkPath, "application/json", body, "Authorization", "Bearer "+key)
			spent := processCPU(t) - before
			t.Logf("a refused bulk of 300 password items (%s) cost %v of CPU", tc.name, spent)
			if n := countStatuses(bulkStatuses(t, ctx)); n[tc.want] != 300 {
				t.Fatalf("item statuses %v, want 300 × %d", n, tc.want)
			}
			if spent > time.Second {
				t.Fatalf("the refused bulk cost %v of CPU, want under 1 s", spent)
			}
		})
	}
	if n := s.fsm.Len(); n != links {
		t.Fatalf("refused bulks made %d links", n-links)
	}
}

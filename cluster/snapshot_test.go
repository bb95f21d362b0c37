package cluster

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestLargeLogVolumeTakesASnapshot writes a few large entries, far fewer
// than Raft's entry threshold, and checks that their volume alone made the
// node snapshot, so a restart does not replay them.
func TestLargeLogVolumeTakesASnapshot(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir(), func(c *Config) { c.Raft.SnapshotBytes = 256 << 10 })

	long := "https://example.com/" + strings.Repeat("x", 1500) + "/"
	for i := range 200 { // ~300 KiB in 200 entries; Raft's threshold is 8192
		createURL(t, n, long+string(rune('a'+i%26))+strings.Repeat("y", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if n.raft.Stats()["last_snapshot_index"] != "0" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no snapshot after %d bytes of entries (limit %d)", 200*1500, 256<<10)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

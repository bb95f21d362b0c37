package fsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// BenchmarkApplyCreates applies batches of 256 creates, as the leader's
// proposer writes them under load: what the state machine spends on each
// create (ns/op is per create): counter codes, with a request id (every
// create through a follower), and custom codes (each checked free).
func BenchmarkApplyCreates(b *testing.B) {
	for _, kind := range []string{"plain", "idempotency-key", "custom-code"} {
		b.Run(kind, func(b *testing.B) {
			f := onDisk(b)
			defer f.Close()
			applyCreates(b, f, kind)
		})
	}
}

// applyCreates applies b.N creates of kind (BenchmarkApplyCreates) in
// batches of 256.
func applyCreates(b *testing.B, f *FSM, kind string) {
	writer := testAPIKey("aaaaaaaaaaaa", ScopeLinksWrite, AllWorkspaces)
	applyAll(b, f, InitCommand{Key: testKey}.Encode(), KeyCreateCommand{Key: writer, By: RootKeyID, Now: 1}.Encode())
	const batch = 256
	entries := make([]*raft.Log, 0, b.N/batch+1)
	for i := 0; i < b.N; i += batch {
		items := make([]CreateRequest, 0, batch)
		for j := i; j < min(i+batch, b.N); j++ {
			r := CreateRequest{URL: fmt.Sprintf("https://example.com/some/long/path?n=%d", j), CodeLength: 7, KeyID: "aaaaaaaaaaaa", Workspace: "default"}
			switch kind {
			case "idempotency-key":
				r.RequestID = fmt.Sprintf("%032x", j)
			case "custom-code":
				r.CustomCode = fmt.Sprintf("k%07d", j*7919%10_000_000)
			}
			items = append(items, r)
		}
		entries = append(entries, &raft.Log{Index: uint64(len(entries) + 3), Type: raft.LogCommand, Data: CreateBatch{Now: int64(i), Items: items}.Encode()})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, e := range entries {
		for _, r := range f.ApplyBatch([]*raft.Log{e})[0].([]CreateResult) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
}

// BenchmarkApplyClicks applies click batches of 1000 counts with varied
// visitors over 1000 links (each count of a batch another link's: every
// count reads and writes its link's day) and over 10 links (100 counts a
// link in each batch: a hot link's day is read and written once a batch),
// in a cluster raised to LevelCerts (day counts only) and to
// LevelVisitRows (with joint tallies): what one count of a batch costs
// (ns/op is per count).
func BenchmarkApplyClicks(b *testing.B) {
	for _, links := range []int{1000, 10} {
		for _, level := range []int{LevelCerts, LevelVisitRows} {
			b.Run(fmt.Sprintf("links-%d/level-%d", links, level), func(b *testing.B) { benchmarkApplyClicks(b, links, level) })
		}
	}
}

func benchmarkApplyClicks(b *testing.B, links, level int) {
	const batch = 1000
	f := New()
	loadLinks(b, f, max(links, 1000), imported)
	applyFrom(f, 10_000, RaiseCommand{To: level}.Encode())
	entries := make([]*raft.Log, 0, b.N/batch+1)
	for i := 0; i < b.N; i += batch {
		counts := make([]ClickCount, 0, batch)
		for j := i; j < min(i+batch, b.N); j++ {
			counts = append(counts, ClickCount{Code: fmt.Sprintf("c%07d", j%links), Count: 1, Visitor: variedVisitor(j / links)})
		}
		cmd := ClickBatch{Node: "n1", Seq: uint64(len(entries) + 1), Now: (480_000 + int64(i/100_000)) * hourMillis, Counts: counts, Visitors: true}
		entries = append(entries, &raft.Log{Index: uint64(len(entries) + 10_001), Type: raft.LogCommand, Data: cmd.Encode()})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, e := range entries {
		if applied, _ := f.ApplyBatch([]*raft.Log{e})[0].(bool); !applied {
			b.Fatal("a batch was not applied")
		}
	}
}

package fsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// BenchmarkApplyCreates applies batches of 256 creates, as the leader's
// proposer writes them under load: what the state machine spends on each
// create (ns/op is per create). plain: counter codes; idempotency-key:
// each with a request id (every create through a follower); custom-code:
// each a custom code, checked free; dedupe: each with dedupe and a URL of
// its own (a lookup of its target that finds nothing, then a new link);
// dedupe-hit: with dedupe, each URL's link made before the timer starts
// (the lookup returns it).
func BenchmarkApplyCreates(b *testing.B) {
	for _, kind := range []string{"plain", "idempotency-key", "custom-code", "dedupe", "dedupe-hit"} {
		b.Run(kind, func(b *testing.B) {
			f := onDisk(b)
			defer f.Close()
			applyCreates(b, f, kind)
		})
	}
}

// applyCreates applies b.N counter-code creates of a kind (as
// BenchmarkApplyCreates names them) in batches of 256.
func applyCreates(b *testing.B, f *FSM, kind string) {
	writer := testAPIKey("aaaaaaaaaaaa", ScopeLinksWrite, AllWorkspaces)
	applyAll(b, f, InitCommand{Key: testKey}.Encode(), KeyCreateCommand{Key: writer, By: RootKeyID, Now: 1}.Encode())
	const batch = 256
	batches := func(dedupe, keyed bool) [][]byte {
		var out [][]byte
		for i := 0; i < b.N; i += batch {
			items := make([]CreateRequest, 0, batch)
			for j := i; j < min(i+batch, b.N); j++ {
				url := fmt.Sprintf("https://example.com/some/long/path?n=%d", j)
				r := CreateRequest{URL: url, CodeLength: 7, KeyID: "aaaaaaaaaaaa", Workspace: "default"}
				if keyed {
					r.RequestID = fmt.Sprintf("%032x", j)
				}
				if dedupe {
					r.Dedupe, r.Canonical = true, url
				}
				if kind == "custom-code" {
					r.CustomCode = fmt.Sprintf("k%07d", j*7919%10_000_000)
				}
				items = append(items, r)
			}
			out = append(out, CreateBatch{Now: int64(i), Items: items}.Encode())
		}
		return out
	}
	index := uint64(3)
	apply := func(cmd []byte) {
		for _, r := range f.ApplyBatch([]*raft.Log{{Index: index, Type: raft.LogCommand, Data: cmd}})[0].([]CreateResult) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		index++
	}
	cmds := batches(kind == "dedupe" || kind == "dedupe-hit", kind == "idempotency-key")
	if kind == "dedupe-hit" {
		for _, cmd := range cmds {
			apply(cmd)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, cmd := range cmds {
		apply(cmd)
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

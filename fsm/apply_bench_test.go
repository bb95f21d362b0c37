package fsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// BenchmarkApplyCreates applies batches of 256 keyed creates, as the
// leader's proposer writes them under load: what the state machine spends
// on each create (ns/op is per create).
func BenchmarkApplyCreates(b *testing.B) {
	f := New()
	writer := testAPIKey("aaaaaaaaaaaa", ScopeLinksWrite, AllWorkspaces)
	applyAll(b, f, InitCommand{Key: testKey}.Encode(), KeyCreateCommand{Key: writer, By: RootKeyID, Now: 1}.Encode())
	const batch = 256
	entries := make([]*raft.Log, 0, b.N/batch+1)
	for i := 0; i < b.N; i += batch {
		items := make([]CreateRequest, 0, batch)
		for j := i; j < min(i+batch, b.N); j++ {
			items = append(items, CreateRequest{URL: fmt.Sprintf("https://example.com/some/long/path?n=%d", j), CodeLength: 7, KeyID: "aaaaaaaaaaaa", Workspace: "default"})
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

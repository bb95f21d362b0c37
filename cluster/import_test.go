package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

func TestProposeCreatesKeepsOrderAndIsolatesRefusals(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir())
	waitFor(t, n.leadership.ready)
	if res, err := n.Create(context.Background(), fsm.CreateRequest{URL: "https://example.com/old", Workspace: "default", CustomCode: "present"}); err != nil || res.Err != nil {
		t.Fatalf("create: %v / %v", err, res.Err)
	}

	const count = 700 // several entries
	reqs := make([]fsm.CreateRequest, count)
	for i := range reqs {
		reqs[i] = fsm.CreateRequest{URL: fmt.Sprintf("https://example.com/%d", i), Workspace: "default", CustomCode: fmt.Sprintf("bulk-%04d", i), CodeLength: 7}
	}
	reqs[300].CustomCode = "bulk-0005" // a later line with an earlier code: the earlier wins
	reqs[400].CodeLength = 99          // refused before proposing, alone
	reqs[500].CustomCode = "present"   // taken before the import
	reqs[600].CustomCode = ""          // a counter code, like any create
	before := n.raft.LastIndex()

	results, index, err := n.ProposeCreates(context.Background(), reqs).Wait()
	if err != nil {
		t.Fatalf("ProposeCreates: %v", err)
	}
	if len(results) != count {
		t.Fatalf("%d results for %d creates", len(results), count)
	}
	if index <= before || index > n.raft.LastIndex() {
		t.Errorf("index %d outside the entries appended (%d, %d]", index, before, n.raft.LastIndex())
	}
	for i, res := range results {
		switch i {
		case 300, 500:
			if !errors.Is(res.Err, fsm.ErrCodeTaken) {
				t.Errorf("create %d (code %s): err %v, want ErrCodeTaken", i, reqs[i].CustomCode, res.Err)
			}
		case 400:
			if !errors.Is(res.Err, fsm.ErrInvalidRequest) {
				t.Errorf("create %d (code length 99): err %v, want ErrInvalidRequest", i, res.Err)
			}
		case 600:
			if res.Err != nil || len(res.Link.Code) != 7 {
				t.Errorf("create %d (counter code): %+v", i, res)
			}
		default:
			if res.Err != nil || res.Link.Code != reqs[i].CustomCode || res.Link.URL != reqs[i].URL {
				t.Errorf("create %d: %+v, want %s -> %s", i, res, reqs[i].CustomCode, reqs[i].URL)
			}
		}
	}
	if l, ok := n.FSM().Get("bulk-0005"); !ok || l.URL != "https://example.com/5" {
		t.Errorf("bulk-0005 = %+v, want the first create's URL", l)
	}
	if l, ok := n.FSM().Get("present"); !ok || l.URL != "https://example.com/old" {
		t.Errorf("present = %+v, want the link from before the import", l)
	}
	// One create was refused before proposing; the rest fill full entries.
	if entries, want := n.raft.LastIndex()-before, uint64(count-1+maxBulkEntryItems-1)/maxBulkEntryItems; entries > want {
		t.Errorf("%d creates took %d log entries, want %d", count, entries, want)
	}
}

func TestCutBulkBoundsEntries(t *testing.T) {
	t.Parallel()
	long := "https://example.com/" + strings.Repeat("x", 8000)
	var reqs []fsm.CreateRequest
	for i := range 1000 {
		url := "https://example.com/short"
		if i%3 == 0 {
			url = long
		}
		reqs = append(reqs, fsm.CreateRequest{URL: url, Workspace: "default", CustomCode: fmt.Sprintf("c%d", i)})
	}
	reqs = append(reqs, fsm.CreateRequest{URL: strings.Repeat("y", 2*maxBulkEntryBytes), Workspace: "default"})
	reqs[7].Strategy = 9 // no such strategy: its own error, in no entry
	// Imported lines, with the longest creation times and clicks there are.
	for i := 500; i < len(reqs)-1; i++ {
		reqs[i].CreatedAt, reqs[i].Clicks = -1<<63, ^uint64(0)
	}
	results := make([]fsm.CreateResult, len(reqs))

	entries := cutBulk(reqs, results)
	next := 0
	for _, items := range entries {
		batch := make([]fsm.CreateRequest, len(items))
		for k, i := range items {
			if next == 7 {
				next++ // refused: in no entry
			}
			if i != next {
				t.Fatalf("entry holds create %d where %d was next", i, next)
			}
			next++
			batch[k] = reqs[i]
		}
		size := len(fsm.CreateBatch{Now: time.Now().UnixMilli(), Items: batch}.Encode())
		if len(items) > maxBulkEntryItems || len(items) > 1 && size > maxBulkEntryBytes {
			t.Errorf("entry of %d creates, %d bytes: over %d creates or %d bytes", len(items), size, maxBulkEntryItems, maxBulkEntryBytes)
		}
	}
	if next != len(reqs) {
		t.Errorf("entries cover %d of %d creates", next, len(reqs))
	}
	if !errors.Is(results[7].Err, fsm.ErrInvalidRequest) {
		t.Errorf("create with an unknown strategy: err %v, want ErrInvalidRequest", results[7].Err)
	}
}

func TestProposeCreatesWithoutLeadershipCreatesNothing(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir(), func(c *Config) {
		c.ID, c.Discovery.BootstrapExpect, c.Writes.Timeout = "lone", 2, time.Second // waits to be joined
	})

	reqs := []fsm.CreateRequest{
		{URL: "https://example.com/a", Workspace: "default", CustomCode: "aaa"},
		{URL: "https://example.com/b", Workspace: "default", CustomCode: "bbb"},
	}
	results, index, err := n.ProposeCreates(context.Background(), reqs).Wait()
	if !errors.Is(err, ErrNoLeader) || index != 0 {
		t.Fatalf("ProposeCreates on a node that does not lead: index %d, err %v; want ErrNoLeader", index, err)
	}
	for i, res := range results {
		if !errors.Is(res.Err, ErrNoLeader) {
			t.Errorf("create %d: err %v, want ErrNoLeader", i, res.Err)
		}
	}
	if n.FSM().Len() != 0 {
		t.Errorf("the node holds %d links, want none", n.FSM().Len())
	}
}

// TestProposeCreatesKeepsImportedValuesOnceEveryServerCan: an import's
// creation times and clicks reach the state only when every server of the
// configuration applies their entry type; until then those lines fail
// alone, saying why, and the import's other lines are created.
func TestProposeCreatesKeepsImportedValuesOnceEveryServerCan(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir())
	waitFor(t, n.leadership.ready)
	created := time.Date(2020, 5, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	imported := func(code string) fsm.CreateRequest {
		return fsm.CreateRequest{URL: "https://example.com/" + code, Workspace: "default", CustomCode: code, CreatedAt: created, Clicks: 42}
	}

	results, _, err := n.ProposeCreates(context.Background(), []fsm.CreateRequest{imported("alone")}).Wait()
	if err != nil || results[0].Err != nil {
		t.Fatalf("import on a single node: %v / %v", err, results[0].Err)
	}
	if l, _ := n.FSM().Get("alone"); l.CreatedAt != created || l.Clicks != 42 {
		t.Fatalf("imported link %+v, want created %d with 42 clicks", l, created)
	}

	// A server of an older build joins (as a non-voter that never
	// answers, so this node still commits alone).
	if err := n.raft.AddNonvoter("old", "127.0.0.1:1", 0, time.Second).Error(); err != nil {
		t.Fatalf("add a non-voter: %v", err)
	}
	n.levels.heard("old", fsm.LevelVisits)
	plain := fsm.CreateRequest{URL: "https://example.com/plain", Workspace: "default", CustomCode: "plain"}
	results, _, err = n.ProposeCreates(context.Background(), []fsm.CreateRequest{imported("held"), plain, imported("held-too")}).Wait()
	if err != nil {
		t.Fatalf("ProposeCreates: %v", err)
	}
	for i, res := range results {
		if wantErr := i != 1; wantErr != errors.Is(res.Err, ErrUpgrading) {
			t.Errorf("create %d: err %v; want ErrUpgrading only for the imported lines", i, res.Err)
		}
	}
	if _, ok := n.FSM().Get("held"); ok {
		t.Error("a line needing a newer build than a server's was created")
	}
	if _, ok := n.FSM().Get("plain"); !ok {
		t.Error("the plain line was held back with the imported ones")
	}
}

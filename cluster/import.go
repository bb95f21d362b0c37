package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// Bulk creates (an import): the caller already holds thousands of creates,
// so they skip the proposer queue (a channel hand-off, a goroutine and
// a reply each) and go into Raft as full entries, many in flight.
//
// maxBulkEntryItems and maxBulkEntryBytes bound one such entry. Entry size
// hardly matters for speed once many are in flight: a million-link import
// (one node, 2 cores) took 2.5-3.7 s with 64, 128 or 256
// creates per entry, 2-7 s with 512 to 2048 (noise dominated). It matters
// for memory: Raft's log cache keeps the last 1024 entries, and through a
// pointer into each entry's apply future also its results. The live heap
// after that import was 683 MiB with 2048 creates per entry, 475 MiB with
// 256 and 410 MiB with 128 or 64. The byte bound keeps entries of long URLs
// well below wire.MaxBodyBytes and Raft's RPC timeouts.
const (
	maxBulkEntryItems = 128
	maxBulkEntryBytes = 1 << 20
)

// bulkItemOverhead bounds what fsm.CreateBatch.Encode adds to an item's strings:
// five length prefixes, strategy, dedupe, expiry and code length varints,
// and an import's creation time and click total.
const bulkItemOverhead = 5*10 + 2 + 10 + 10 + 2*10

// BulkCreates is a set of creates handed to Raft by ProposeCreates and not
// yet known applied.
type BulkCreates struct {
	results []fsm.CreateResult
	entries []bulkEntry
	err     error // the first write error
}

// bulkEntry is one proposed log entry and the indexes of its creates in
// the caller's slice.
type bulkEntry struct {
	items  []int // indexes into results
	future raft.ApplyFuture
}

// ProposeCreates proposes reqs on this node, which must lead, as log
// entries of up to maxBulkEntryItems creates, in the order given, and
// returns without waiting for them to be committed. Entries of two calls
// made one after the other by one goroutine are in the log in that order,
// so with repeated custom codes the earlier create wins. ctx bounds only
// the wait for this node to be a ready leader.
//
// Unlike Create, nothing is relayed or retried: a bulk caller is the
// leader's own handler (followers forward the whole request), and creates
// without request ids must not be proposed twice.
func (n *Node) ProposeCreates(ctx context.Context, reqs []fsm.CreateRequest) *BulkCreates {
	b := &BulkCreates{results: make([]fsm.CreateResult, len(reqs))}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Writes.Timeout)
	defer cancel()
	if err := n.leadership.waitReady(ctx, true); err != nil {
		b.err = err
		for i := range b.results {
			b.results[i].Err = err
		}
		return b
	}
	// An item above the level some server applies fails alone (the
	// others go ahead); the answer is the same for every item of a level,
	// so each level is asked once per call, not once per line.
	var levels [fsm.EntryLevel + 1]struct {
		asked bool
		err   error
	}
	for i := range reqs {
		level := reqs[i].Level() // at most fsm.EntryLevel: this build encodes it
		if l := &levels[level]; !l.asked {
			l.asked, l.err = true, n.levels.require(ctx, level)
		}
		b.results[i].Err = levels[level].err
	}
	now := time.Now().UnixMilli()
	for _, items := range cutBulk(reqs, b.results) {
		batch := make([]fsm.CreateRequest, len(items))
		for k, i := range items {
			batch[k] = reqs[i]
		}
		cmd := fsm.CreateBatch{Now: now, Items: batch}.Encode()
		b.entries = append(b.entries, bulkEntry{items: items, future: n.handOff(cmd)})
	}
	return b
}

// cutBulk groups the indexes of reqs into entries, in order, each at most
// maxBulkEntryItems creates and maxBulkEntryBytes encoded (a larger create
// goes alone). A create the log's encoding cannot carry would fail every
// create of its entry on every replica: it gets its error in results and
// joins no entry.
func cutBulk(reqs []fsm.CreateRequest, results []fsm.CreateResult) [][]int {
	var (
		entries [][]int
		items   []int
		size    int
	)
	for i := range reqs {
		req := &reqs[i]
		if results[i].Err != nil { // refused before
			continue
		}
		if err := checkCreate(*req); err != nil {
			results[i].Err = err
			continue
		}
		s := len(req.RequestID) + len(req.URL) + len(req.Canonical) + len(req.Workspace) + len(req.CustomCode) + bulkItemOverhead
		if req.Options != nil {
			s += len(fsm.EncodeOptions(req.Options))
		}
		if len(items) == maxBulkEntryItems || len(items) > 0 && size+s > maxBulkEntryBytes {
			entries = append(entries, items)
			items, size = nil, 0
		}
		if items == nil {
			items = make([]int, 0, min(maxBulkEntryItems, len(reqs)-i))
		}
		items = append(items, i)
		size += s
	}
	if len(items) > 0 {
		entries = append(entries, items)
	}
	return entries
}

// Wait returns one result per create given to ProposeCreates, once Raft
// has decided every entry, and the log index of the last entry applied
// (0 when none was).
//
// A create whose entry was not applied, or whose outcome is unknown, has
// the write error as its Err (ErrNoLeader: not applied; ErrTimeout: maybe
// applied; ErrClosed), and the first such error is returned as well: the
// cluster takes no writes from this node now, so the caller stops
// proposing. Every other Err is the FSM's decision about that create.
func (b *BulkCreates) Wait() ([]fsm.CreateResult, uint64, error) {
	var index uint64
	for _, e := range b.entries {
		if err := e.future.Error(); err != nil {
			err = raftError(err)
			if b.err == nil {
				b.err = err
			}
			b.fail(e.items, err)
			continue
		}
		index = max(index, e.future.Index())
		results, ok := e.future.Response().([]fsm.CreateResult)
		if !ok || len(results) != len(e.items) {
			// Applied, but not as a create batch: the entry did not decode
			// here, nor anywhere else; it created nothing.
			err, isErr := e.future.Response().(error)
			if !isErr {
				err = fmt.Errorf("unexpected response %T", e.future.Response())
			}
			b.fail(e.items, fmt.Errorf("apply %d creates: %w", len(e.items), err))
			continue
		}
		for k, i := range e.items {
			b.results[i] = results[k]
		}
	}
	return b.results, index, b.err
}

func (b *BulkCreates) fail(items []int, err error) {
	for _, i := range items {
		b.results[i].Err = err
	}
}

package fsm

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm/store"
)

// FSM is the Raft state machine. Raft calls Apply, ApplyBatch, Snapshot and
// Restore from one goroutine; HTTP handlers read concurrently through the
// read methods, which see either the old or the new state, never a mix.
type FSM struct {
	mu sync.RWMutex
	s  *state

	// applied is the index of the last log entry applied here, 0 until the
	// first entry after start or a restore. Raft's own applied index runs
	// ahead of the FSM (it counts entries handed to the FSM goroutine), so
	// read-after-write must wait on this one.
	applied atomic.Uint64
	// appliedTerm is the term of the entry at applied: with it, a kept
	// state names its log position (kept.go).
	appliedTerm uint64
	// skipThrough is the index a resumed state was kept at: Raft hands
	// the entries up to it to the FSM again, which has them already.
	// delivered is the last index Raft handed over, skipped or applied.
	skipThrough, delivered uint64

	engines engines // where each restore's engine goes (engine.go)
	closed  sync.Once
	// filling counts the code filters being filled for resumed states;
	// each fill runs while fills holds the number it took (kept.go).
	filling sync.WaitGroup
	fills   atomic.Uint64
}

var _ raft.BatchingFSM = (*FSM)(nil)

// New returns an empty FSM whose engine is in memory.
func New() *FSM {
	f, err := Open(Config{})
	if err != nil {
		panic(fmt.Sprintf("fsm: an engine in memory did not open: %v", err))
	}
	return f
}

// Open returns an empty FSM whose engine is in cfg.Dir. What the
// directory holds is removed first, but for a state the last stop kept
// (Resume takes it or removes it): a start after a crash rebuilds the
// state from Raft's snapshot and log (engine.go).
func Open(cfg Config) (*FSM, error) {
	if cfg.Dir != "" {
		if err := emptyBut(cfg.Dir, keptDir); err != nil {
			return nil, fmt.Errorf("open fsm: %w", err)
		}
	}
	f := &FSM{engines: engines{cfg: cfg}}
	if cfg.Dir != "" {
		f.engines.cache = store.NewCache(cfg.BlockCacheBytes)
	}
	eng := f.engines.open()
	// A node's engine opens now, so that a directory it cannot use stops
	// the start with its error rather than the first entry applied.
	if cfg.Dir != "" && !eng.ready() {
		f.engines.cache.Release()
		return nil, fmt.Errorf("open fsm: %w", eng.err)
	}
	f.s = newState(eng)
	eng.published = true
	return f, nil
}

// Close closes the engine once no snapshot reads it; a second Close does
// nothing. Nothing may be applied or read after it.
func (f *FSM) Close() {
	f.closed.Do(func() {
		f.stopFilling()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.s.eng.release()
		f.releaseCache()
	})
}

func (f *FSM) releaseCache() {
	if f.engines.cache != nil {
		f.engines.cache.Release()
	}
}

// emptyBut removes what dir holds but the entry named keep, creating dir
// if it is missing.
func emptyBut(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != keep {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// Apply applies one committed log entry.
func (f *FSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies committed entries under the FSM's write lock, let go
// only between the pieces of a batch too large for one engine batch. Results
// are []CreateResult for a create batch, error for a delete, bool for a
// click batch, and an error for an entry that does not decode.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	results := make([]any, len(logs))
	if len(logs) == 0 {
		return results
	}
	last := logs[len(logs)-1]
	if last.Index > f.skipThrough {
		f.s.requests.awaitFill() // a resumed state's index, built while readers go on
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delivered = last.Index
	if last.Index <= f.skipThrough {
		return results // a resumed state has them all
	}
	f.s.requests.settle()
	f.s.eng.applying = true
	for i, l := range logs {
		if l.Type != raft.LogCommand || l.Index <= f.skipThrough {
			continue
		}
		results[i] = f.s.apply(l.Data)
		if l != last && (f.s.eng.batchFull() || f.s.links.recs.manyChanged()) {
			// A node catching up is handed hundreds of entries at once: the
			// engine takes them in pieces, as if Raft had handed fewer, so
			// its batch and the changed records stay bounded, and readers
			// waiting meanwhile read the state up to l.
			f.commit(l)
			f.mu.Unlock()
			f.mu.Lock()
			f.s.eng.applying = true
		}
	}
	f.commit(last)
	return results
}

// commit writes what was applied up to l into the engine, and makes l
// the last entry applied.
func (f *FSM) commit(l *raft.Log) {
	if err := f.s.eng.commit(l.Index); err != nil {
		// The state in memory has the batch and the engine does not: no
		// later entry could be applied the same way as on the other nodes.
		// Stopping keeps the log, which a restart applies again.
		panic(fmt.Sprintf("fsm: the engine did not take entries up to %d: %v", l.Index, err))
	}
	f.applied.Store(l.Index)
	f.appliedTerm = l.Term
}

// Applied returns the index of the last log entry this FSM applied, and
// false when it has applied none since it started or was restored (then
// Raft's applied index is exact: it is the restored snapshot's).
func (f *FSM) Applied() (uint64, bool) {
	i := f.applied.Load()
	return i, i != 0
}

// Target is what a redirect needs to know about a code.
type Target struct {
	Code      string // the qualified code, safe to keep as a map key
	URL       string
	ExpiresAt int64
	Options   *Options // nil for a plain link
	// Fallback: the request's host is a registered domain that has no
	// such code here, and the link is the default domain's.
	Fallback bool
	// Domain is the registered domain the request's host names (zero for
	// none), on a miss too: whoever serves the answer needs no second
	// look at the host.
	Domain Domain
}

// Lookup finds the redirect target of code in the default domain. It does
// not allocate, but for the options of a link not in the option cache.
func (f *FSM) Lookup(code []byte) (Target, bool) { return f.Resolve(nil, code) }

// Resolve finds the redirect target of code as a request for host asks
// for it: in the registered domain host names, and then (as Shlink does)
// in the default domain, whose links every host serves. It does not
// allocate, but for the options of a link not in the option cache.
func (f *FSM) Resolve(host, code []byte) (Target, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var (
		r             *record
		d             Domain
		found, onHost bool
	)
	if len(f.s.domains) > 0 {
		r, d, onHost, found = f.s.lookupOnHost(host, code)
	}
	fallback := false
	if !found {
		if r, found = f.s.links.find(unsafe.String(unsafe.SliceData(code), len(code))); !found { // only compared, never kept
			return Target{Domain: d}, false
		}
		fallback = onHost
	}
	t := Target{Code: r.code, URL: r.url, ExpiresAt: r.expiresAt}
	if r.flags&flagOptions != 0 {
		t.Options = f.s.opts.of(r)
	}
	t.Fallback, t.Domain = fallback, d
	return t, true
}

// lookupOnHost finds code in the registered domain d that host names;
// onHost reports whether host names one at all.
func (s *state) lookupOnHost(host, code []byte) (r *record, d Domain, onHost, found bool) {
	d, ok := s.domains.ofHost(host)
	if !ok {
		return nil, Domain{}, false, false
	}
	var qualified [maxCodeLen]byte
	n := copy(qualified[:], d.Name)
	qualified[n] = '/'
	if m := copy(qualified[n+1:], code); m == len(code) {
		r, found = s.links.find(unsafe.String(&qualified[0], n+1+m))
	}
	return r, d, true, found
}

// VisitsUsed is what the visit limit of the link with this qualified code
// counts (its clicks and its bots), 0 for none: a link at its limit
// answers at once, without the leader.
func (f *FSM) VisitsUsed(code string) uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if p, ok := f.s.links.lookup(code); ok {
		return f.s.visitsUsed(p)
	}
	return 0
}

// Get returns the link with this qualified code (QualifiedCode).
func (f *FSM) Get(code string) (Link, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if p, ok := f.s.links.lookup(code); ok {
		return f.s.link(p), true
	}
	return Link{}, false
}

// List returns up to limit links of the workspaces (nil: all of them),
// newest first, with IDs below before (0: from the newest). next is the
// cursor for the following page, 0 when there is none.
func (f *FSM) List(workspaces []string, before uint64, limit int) (links []Link, next uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	w := f.newestFirst(workspaces, "", before)
	for p, ok := w.next(); ok; p, ok = w.next() {
		if len(links) == limit {
			next = links[limit-1].ID // another link follows the page
			break
		}
		links = append(links, f.s.link(p))
	}
	return links, next
}

// LinksAfter returns up to limit live links with ids above after, oldest
// first: a page of a walk of every link, such as an export, which holds
// the state's lock for a page at a time and a page in memory, whatever the
// number of links. next is the cursor for the following page, 0 when
// there is none. Link ids never change, so a walk goes on across a
// restore the node installs between pages.
func (f *FSM) LinksAfter(after uint64, limit int) (links []Link, next uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	from, _ := f.s.links.positionOf(after + 1)
	f.s.links.recs.scanFrom(from, true, func(r *record) bool {
		if !r.live() || r.id <= after {
			return true
		}
		if len(links) == limit {
			next = links[limit-1].ID
			return false
		}
		l := f.s.links.linkOf(r)
		l.Options = f.s.opts.walkedOf(r)
		links = append(links, l)
		return true
	})
	return links, next
}

// Len is the number of live links (expired ones included until purged).
func (f *FSM) Len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.links.live()
}

// LinkIDs is how many link ids the cluster has given (every link created
// or imported; a restore keeps the highest) and how many it can: once
// they are equal, creates are refused (ErrStateFull). The limit is
// MaxRecords until the cluster is raised to LevelPositions.
func (f *FSM) LinkIDs() (used, limit uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.lastID, f.s.links.recs.limit(f.s.raised)
}

// Initialized reports whether the code key has been applied.
func (f *FSM) Initialized() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.hasKey
}

// ClusterID identifies the cluster this state belongs to; empty until the
// first leader has initialised it.
func (f *FSM) ClusterID() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if !f.s.hasKey {
		return ""
	}
	return hex.EncodeToString(f.s.clusterID[:])
}

// NeedsPurge reports whether the purge command would change anything, so
// the leader proposes purges only when they do work.
func (f *FSM) NeedsPurge(c PurgeCommand) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if at, ok := f.s.requests.oldest(); ok && at < c.RequestsBefore {
		return true
	}
	return f.s.links.anyExpiredBefore(c.ExpiredBefore)
}

// ServerHTTP is the HTTP address recorded for a cluster member.
func (f *FSM) ServerHTTP(id string) (string, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	addr, ok := f.s.servers.addrs[id]
	return addr, ok
}

// ClickSeq is the last click batch sequence applied for node.
func (f *FSM) ClickSeq(node string) uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.clickSeqs.of(node)
}

// Snapshot takes a view of the state that Persist encodes while Apply goes
// on. It reads what is on disk from a view of the engine and shares the
// orphan visits' pages instead of copying them (see recordTable), so it
// writes back the apply's changes, changes sharing bookkeeping and takes
// the write lock.
//
// On disk it also takes the engine's checkpoint (snapref.go) after the
// lock is let go: Raft calls Snapshot where it calls ApplyBatch, so nothing
// changes the state until it returns, and redirects go on meanwhile.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	if f.delivered < f.skipThrough {
		f.mu.Unlock()
		// Raft would label it with the last index it handed over, and the
		// state is further on: whoever restored it would apply the
		// entries between twice.
		return nil, fmt.Errorf("snapshot: the state was kept at index %d, and Raft has replayed the log to %d", f.skipThrough, f.delivered)
	}
	snap, err := f.s.snapshot()
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	snap.index, snap.term = f.applied.Load(), f.appliedTerm
	if snap.checkpoint, err = f.checkpoint(snap); err != nil && f.engines.cfg.Logf != nil {
		f.engines.cfg.Logf("snapshot: no checkpoint, the snapshot copies the state: %v", err)
	}
	return snap, nil
}

// Restore replaces the whole state with a snapshot. The new state is built
// aside and swapped in at once, so readers never see a partial state.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	r := bufio.NewReader(rc)
	if head, _ := r.Peek(CheckpointMagicLen); IsCheckpointStream(head) {
		return f.restoreFiles(r)
	}
	s, err := readSnapshot(r, &f.engines)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	f.replace(s.s)
	return nil
}

// replace makes s the FSM's state; Raft sets the index it is at.
func (f *FSM) replace(s *state) {
	f.fills.Add(1) // a fill of the state replaced stops
	f.mu.Lock()
	old := f.s
	s.eng.published = true
	f.s = s
	f.applied.Store(0)
	f.appliedTerm, f.skipThrough = 0, 0
	f.mu.Unlock()
	old.eng.retire()
}

// WriteBackup writes a consistent snapshot of the current state to w: what
// a backup holds, inside the envelope cluster seals it in.
func (f *FSM) WriteBackup(w io.Writer) error {
	f.mu.Lock()
	snap, err := f.s.snapshot()
	f.mu.Unlock()
	if err != nil {
		return err
	}
	defer snap.Release()
	return snap.writeTo(w)
}

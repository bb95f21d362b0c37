package fsm

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"maps"
	"os"
	"slices"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm/codes"
	"github.com/linkraft/linkraft/fsm/store"
)

// Snapshot format: the magic "LKRS", a version byte, then the sections the
// version holds, in the order features registers them (registry.go, and
// DESIGN.md), each element encoded by encoder; finally a CRC-32C
// of everything before it, big-endian. Collections are sorted so that equal
// states give byte-identical snapshots. The oldest version that holds the
// state is written (snapshot.version), so that older builds read it; every
// version is still read.
var snapshotMagic = []byte("LKRS")

const (
	snapshotV1      = 1  // links with their canonical URL, then a dedupe section
	snapshotV2      = 2  // links with flags; the dedupe index is a flag
	snapshotV3      = 3  // version 2, then clicks per hour
	snapshotV4      = 4  // version 3, then API keys and the audit log
	snapshotV5      = 5  // version 4 with each link's options, then the domains
	snapshotV6      = 6  // version 5, then visitors per link and day, and webhooks
	snapshotV7      = 7  // version 6 whose audit log may record restores
	snapshotV8      = 8  // version 7 of a raised cluster: its level after the version, the security audit at the end
	snapshotV9      = 9  // version 8, then the certificates (certs.go)
	snapshotV10     = 10 // version 9 of a cluster raised to LevelVisitRows
	snapshotV11     = 11 // version 10 of a cluster raised to LevelRemovals: the removed servers after the servers
	snapshotV12     = 12 // version 11 of a cluster raised to LevelTargets: links' authors after the keys' domains
	snapshotV13     = 13 // version 12 of a cluster raised to LevelDisabled: links may be flagged disabled
	snapshotVersion = snapshotV13
)

// Link flags in a version 2 snapshot.
const (
	snapDedupe   = 1 << iota // the link takes part in dedupe
	snapIndexed              // dedupe returns this link for its URL
	snapDisabled             // version 13 on: the link was disabled on purpose (flagDisabled)
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// snapshot is a point-in-time view of state that Apply does not change:
// small collections are copied, link records are read from the engine's
// view (recordView), orphan visits' pages are shared.
type snapshot struct {
	hasKey     bool
	key        codes.Key
	clusterID  [16]byte
	lastID     uint64
	counters   []counterEntry
	records    recordView
	newestHour uint32 // the newest hour any click batch carried: retention's clock
	workspaces []string
	live       int
	tombstones int             // how many: the codes are in engine
	engine     *store.Snapshot // the engine's view (engine.go)
	err        error           // the first failure reading engine
	clickSeqs  []clickSeqEntry
	servers    []serverEntry
	removed    []removedEntry
	requests   int // how many: the records are in engine
	keys       []*APIKey
	revoked    []string
	audit      []AuditEntry // the one ring, or link writes once kept apart
	security   []AuditEntry // security actions kept apart
	raised     int
	certs      certState
	domains    []Domain
	orphans    orphanTable // shares days as visits does
	hooks      []hookState // copies; their events are never changed (webhooks.go)
	authors    []string    // key ids by author number (authors.go): a copy
	level      int         // the state's entry level: which version holds it
	release    func()
	// checkpoint is the directory of the engine's checkpoint and state
	// file at index and term, which Persist refers to when the sink has a
	// directory (snapref.go); "": the snapshot is a copy.
	checkpoint  string
	index, term uint64

	defaultDomain Domain // the default domain's redirects (version 10)
}

var _ raft.FSMSnapshot = (*snapshot)(nil)

// snapshot takes a view of the state; sorting is left to writeTo so the
// FSM lock is held only for the copies. The caller holds the write lock.
func (s *state) snapshot() (*snapshot, error) {
	view, releaseView, err := s.eng.view()
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	records, release := s.links.recs.share(view)
	snap := &snapshot{
		hasKey:     s.hasKey,
		key:        s.key,
		clusterID:  s.clusterID,
		lastID:     s.lastID,
		records:    records,
		newestHour: s.links.hours.newest,
		workspaces: s.links.workspaceNames(),
		requests:   s.requests.len(),
		live:       s.links.live(),
		tombstones: s.tombstones.len(),
		engine:     view,
		release:    func() { release(); releaseView() },
	}
	for length, next := range s.counters {
		snap.counters = append(snap.counters, counterEntry{length, next})
	}
	for id, addr := range s.servers.addrs {
		snap.servers = append(snap.servers, serverEntry{id, addr})
	}
	for id, incarnation := range s.servers.removed {
		snap.removed = append(snap.removed, removedEntry{id, incarnation})
	}
	// Keys never change once added, so the view may share them.
	snap.keys = slices.Collect(maps.Values(s.keys))
	snap.revoked = slices.Collect(maps.Keys(s.revoked))
	snap.audit, snap.security = s.audit.writes.oldestFirst(), s.audit.security.oldestFirst()
	snap.raised = s.raised
	snap.certs = s.certs.clone()
	snap.authors = s.links.authorView()
	snap.clickSeqs = s.clickSeqs.entries()
	snap.orphans = s.orphans.share()
	snap.level = s.level()
	snap.domains = slices.Collect(maps.Values(s.domains))
	snap.defaultDomain = s.defaultDomain
	snap.hooks = s.hooks.snapshot()
	return snap, nil
}

// fail keeps the first error met while writing the snapshot.
func (snap *snapshot) fail(err error) {
	if err != nil && snap.err == nil {
		snap.err = err
	}
}

func (snap *snapshot) sort() {
	slices.SortFunc(snap.counters, func(a, b counterEntry) int { return cmp.Compare(a.length, b.length) })
	slices.SortFunc(snap.clickSeqs, func(a, b clickSeqEntry) int { return cmp.Compare(a.node, b.node) })
	slices.SortFunc(snap.servers, func(a, b serverEntry) int { return cmp.Compare(a.id, b.id) })
	sortRemovals(snap.removed)
	slices.SortFunc(snap.keys, func(a, b *APIKey) int { return cmp.Compare(a.ID, b.ID) })
	slices.Sort(snap.revoked)
	slices.SortFunc(snap.domains, func(a, b Domain) int { return cmp.Compare(a.Name, b.Name) })
}

// Persist writes the snapshot to the Raft snapshot sink.
func (snap *snapshot) Persist(sink raft.SnapshotSink) error {
	if d, ok := sink.(DirSink); ok && snap.checkpoint != "" && snap.moveCheckpoint(d) {
		if err := WriteReference(sink, snap.index, snap.term); err != nil {
			_ = sink.Cancel()
			return fmt.Errorf("persist snapshot: %w", err)
		}
		return sink.Close()
	}
	if err := snap.writeTo(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release lets the state change the pages this snapshot shared in place
// again, and closes its view of the engine.
func (snap *snapshot) Release() {
	snap.release()
	if snap.checkpoint != "" {
		os.RemoveAll(snap.checkpoint) // what Persist did not move
	}
}

// flushSize is how much encoded data is buffered before a write.
const flushSize = 64 << 10

// chunked is an encoder whose bytes go to out about flushSize at a time:
// a snapshot or a state file (kept.go) of any size is never held whole.
type chunked struct {
	e   encoder
	out io.Writer
	err error // the first write's
}

func newChunked(out io.Writer) *chunked {
	return &chunked{e: encoder{buf: make([]byte, 0, 2*flushSize)}, out: out}
}

// flush writes what is encoded once flushSize of it is, or when forced.
func (c *chunked) flush(force bool) {
	if c.err == nil && (force || len(c.e.buf) >= flushSize) {
		_, c.err = c.out.Write(c.e.buf)
		c.e.buf = c.e.buf[:0]
	}
}

func (snap *snapshot) writeTo(w io.Writer) error {
	snap.sort()
	crc := crc32.New(crcTable)
	c := newChunked(io.MultiWriter(w, crc))
	e := &c.e

	version := snap.version()
	e.fixed(snapshotMagic)
	e.byte(version)
	for _, sec := range registry.sections {
		if sec.write != nil && sec.holds(version) {
			sec.write(snap, e, version, c.flush)
		}
	}
	c.flush(true)
	snap.fail(snap.records.err)
	if snap.err != nil {
		return fmt.Errorf("write snapshot: %w", snap.err)
	}
	if c.err != nil {
		return fmt.Errorf("write snapshot: %w", c.err)
	}
	if _, err := w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		return fmt.Errorf("write snapshot checksum: %w", err)
	}
	return nil
}

// minLinkSize is the smallest encoding of a link: nine one-byte fields.
const minLinkSize = 9

// ErrCorruptSnapshot reports a snapshot or backup that cannot be restored.
var ErrCorruptSnapshot = errors.New("corrupt snapshot")

// ReadSnapshot reads and verifies a snapshot (also the one inside a backup,
// once cluster has checked its envelope) and builds the state it holds. It never changes any FSM;
// restoring is a separate step. The stream is decoded as it is read, so
// the snapshot's bytes are never all in memory at once. The state's
// engine is in memory: Close releases it.
func ReadSnapshot(r io.Reader) (*Snapshot, error) {
	return readSnapshot(r, &engines{})
}

// readSnapshot is ReadSnapshot into a new engine of es.
func readSnapshot(r io.Reader, es *engines) (*Snapshot, error) {
	eng := es.open()
	s, err := decodeSnapshot(newStreamDecoder(r, crc32.New(crcTable)), eng)
	if err == nil {
		err = eng.settle()
	}
	if err != nil {
		eng.retire()
		if errors.Is(err, ErrStateFull) { // sound, and larger than this state can be
			return nil, fmt.Errorf("read snapshot: %w", err)
		}
		return nil, fmt.Errorf("%w: %v", ErrCorruptSnapshot, err)
	}
	s.links.compactLists()
	return &Snapshot{s: s}, nil
}

// HasSnapshotMagic reports whether b starts as a snapshot does: a backup
// from a build that wrote the bare snapshot, before backups were
// authenticated.
func HasSnapshotMagic(b []byte) bool { return bytes.HasPrefix(b, snapshotMagic) }

// NewSnapshotChecksum is the checksum a snapshot ends with, big-endian in
// its last crc32.Size bytes, over every byte before them. A restore reads a
// backup whose authentication failed through it, to tell damage (the
// checksum fails too) from a change made on purpose (whoever made it
// recomputed the checksum).
func NewSnapshotChecksum() hash.Hash32 { return crc32.New(crcTable) }

// Snapshot is a decoded, verified snapshot ready to become an FSM's state.
type Snapshot struct {
	s      *state
	closed sync.Once
}

// Close releases the snapshot's engine; a second Close does nothing.
func (s *Snapshot) Close() { s.closed.Do(s.s.eng.retire) }

// Links is the number of links in the snapshot.
func (s *Snapshot) Links() int { return s.s.links.live() }

// Level is the entry level a node must apply to hold the snapshot's
// state (FSM.Level).
func (s *Snapshot) Level() int { return s.s.level() }

// decodeSnapshot decodes every section straight into a new state, refusing
// anything inconsistent (a restored state can never hold two links under
// one code), then checks the trailing checksum. A checksum mismatch is
// reported before any decoding error, as it is the cause of both.
func decodeSnapshot(d *decoder, eng *engine) (*state, error) {
	magic := make([]byte, len(snapshotMagic))
	d.fixed(magic)
	if errors.Is(d.err, errRead) {
		return nil, d.err
	}
	if d.err != nil || !bytes.Equal(magic, snapshotMagic) {
		return nil, errors.New("not a linkraft snapshot")
	}
	st, err := decodeSections(d, eng)
	if err == nil && d.need(5) {
		err = errors.New("trailing bytes")
	}
	sum, ok := d.trailer()
	switch {
	case errors.Is(d.err, errRead):
		return nil, d.err
	case !ok:
		return nil, fmt.Errorf("checksum: %w", errTruncated)
	case binary.BigEndian.Uint32(sum) != d.sum.Sum32():
		return nil, errors.New("checksum mismatch")
	case err != nil:
		return nil, err
	}
	return st, nil
}

// decodeSections reads the version and every section it holds, in order,
// into a new state.
func decodeSections(d *decoder, eng *engine) (*state, error) {
	version := d.byte()
	if d.err != nil {
		return nil, d.err
	}
	if version < snapshotV1 || version > snapshotVersion {
		return nil, fmt.Errorf("unsupported snapshot version %d", version)
	}
	st := newState(eng)
	for _, sec := range registry.sections {
		if !sec.holds(version) {
			continue
		}
		if err := sec.read(st, d, version); err != nil {
			return nil, err
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	st.counts = countsOf(st) // derived, not stored: see listCounts
	return st, nil
}

// version is the oldest snapshot version that holds this state: version 4
// while its level is LevelKeys (no options, domains or keys limited to
// domains), 7 only while its audit log records a restore, 8 once the
// cluster was raised to LevelBounds, 9 once raised to LevelCerts, 10 once
// raised to LevelVisitRows, 11 once raised to LevelRemovals, 12 once raised
// to LevelTargets, 13 once raised to LevelDisabled. A cluster in the
// middle of an upgrade, whose new nodes hold only such state (nothing
// newer is written until every node applies it, see EntryLevel), then
// sends its old nodes snapshots they can read. The choice depends on the state alone, so equal states
// still give equal bytes.
func (snap *snapshot) version() byte {
	switch {
	case snap.level >= LevelDisabled:
		return snapshotV13
	case snap.level >= LevelTargets:
		return snapshotV12
	case snap.level >= LevelRemovals:
		return snapshotV11
	case snap.level >= LevelVisitRows:
		return snapshotV10
	case snap.level >= LevelCerts:
		return snapshotV9
	case snap.level >= LevelBounds:
		return snapshotV8
	case snap.level >= LevelRestoreAudit:
		return snapshotV7
	case snap.level >= LevelVisits:
		return snapshotV6
	case snap.level == LevelOptions:
		return snapshotV5
	}
	return snapshotV4
}

// optionsOf is the Options of the link r as the snapshot's engine view
// holds them, nil for none.
func (snap *snapshot) optionsOf(r *record) *Options {
	if r.flags&flagOptions == 0 {
		return nil
	}
	v, found, err := snap.engine.Get(optionKey(nil, r.id), nil)
	opts, derr := decodeStoredOptions(v)
	switch {
	case err != nil:
		snap.fail(err)
	case !found || derr != nil:
		snap.fail(fmt.Errorf("options of link %d (found %v): %v", r.id, found, derr))
	}
	return opts
}

package fsm

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm/codes"
)

// Snapshot format, version 1: the magic "LKRS", a version byte, then the
// sections below in order, each element encoded by encoder; finally a CRC-32C
// of everything before it, big-endian. Collections are sorted so that equal
// states give byte-identical snapshots.
var snapshotMagic = []byte("LKRS")

const snapshotVersion = 1

var crcTable = crc32.MakeTable(crc32.Castagnoli)

type counterEntry struct {
	length int
	next   uint64
}

type dedupeEntry struct{ key, code string }

type clickSeqEntry struct {
	node string
	seq  uint64
}

type serverEntry struct{ id, httpAddr string }

// snapshot is a point-in-time copy of state, independent of it.
type snapshot struct {
	hasKey     bool
	key        codes.Key
	clusterID  [16]byte
	lastID     uint64
	counters   []counterEntry
	links      []Link
	dedupe     []dedupeEntry
	tombstones []string
	clickSeqs  []clickSeqEntry
	servers    []serverEntry
	requests   []requestRecord
}

var _ raft.FSMSnapshot = (*snapshot)(nil)

// copy takes a snapshot. Links are copied by value; sorting is left to
// writeTo so the FSM lock is held only for the copy.
func (s *state) copy() *snapshot {
	snap := &snapshot{
		hasKey:     s.hasKey,
		key:        s.key,
		clusterID:  s.clusterID,
		lastID:     s.lastID,
		links:      make([]Link, 0, len(s.links)),
		tombstones: slices.Collect(maps.Keys(s.tombstones)),
		requests:   slices.Clone(s.requestLog),
	}
	for length, next := range s.counters {
		snap.counters = append(snap.counters, counterEntry{length, next})
	}
	for _, l := range s.links {
		snap.links = append(snap.links, *l)
	}
	for k, c := range s.dedupe {
		snap.dedupe = append(snap.dedupe, dedupeEntry{k, c})
	}
	for n, seq := range s.clickSeqs {
		snap.clickSeqs = append(snap.clickSeqs, clickSeqEntry{n, seq})
	}
	for id, addr := range s.servers {
		snap.servers = append(snap.servers, serverEntry{id, addr})
	}
	return snap
}

func (snap *snapshot) sort() {
	slices.SortFunc(snap.counters, func(a, b counterEntry) int { return cmp.Compare(a.length, b.length) })
	slices.SortFunc(snap.links, func(a, b Link) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(snap.dedupe, func(a, b dedupeEntry) int { return cmp.Compare(a.key, b.key) })
	slices.Sort(snap.tombstones)
	slices.SortFunc(snap.clickSeqs, func(a, b clickSeqEntry) int { return cmp.Compare(a.node, b.node) })
	slices.SortFunc(snap.servers, func(a, b serverEntry) int { return cmp.Compare(a.id, b.id) })
}

// Persist writes the snapshot to the Raft snapshot sink.
func (snap *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := snap.writeTo(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release is a no-op: the snapshot holds only its own copies.
func (snap *snapshot) Release() {}

// flushSize is how much encoded data is buffered before a write.
const flushSize = 64 << 10

func (snap *snapshot) writeTo(w io.Writer) error {
	snap.sort()
	crc := crc32.New(crcTable)
	out := io.MultiWriter(w, crc)
	e := encoder{buf: make([]byte, 0, 2*flushSize)}
	var werr error
	flush := func(force bool) {
		if werr == nil && (force || len(e.buf) >= flushSize) {
			_, werr = out.Write(e.buf)
			e.buf = e.buf[:0]
		}
	}

	e.fixed(snapshotMagic)
	e.byte(snapshotVersion)
	e.bool(snap.hasKey)
	e.fixed(snap.key[:])
	e.fixed(snap.clusterID[:])
	e.uvarint(snap.lastID)
	e.uvarint(uint64(len(snap.counters)))
	for _, c := range snap.counters {
		e.uvarint(uint64(c.length))
		e.uvarint(c.next)
	}
	e.uvarint(uint64(len(snap.links)))
	for i := range snap.links {
		encodeLink(&e, &snap.links[i])
		flush(false)
	}
	e.uvarint(uint64(len(snap.dedupe)))
	for _, d := range snap.dedupe {
		e.string(d.key)
		e.string(d.code)
		flush(false)
	}
	e.uvarint(uint64(len(snap.tombstones)))
	for _, t := range snap.tombstones {
		e.string(t)
		flush(false)
	}
	e.uvarint(uint64(len(snap.clickSeqs)))
	for _, c := range snap.clickSeqs {
		e.string(c.node)
		e.uvarint(c.seq)
	}
	e.uvarint(uint64(len(snap.servers)))
	for _, sv := range snap.servers {
		e.string(sv.id)
		e.string(sv.httpAddr)
	}
	e.uvarint(uint64(len(snap.requests)))
	for _, r := range snap.requests {
		e.string(r.id)
		e.string(r.code)
		e.bool(r.existing)
		e.varint(r.at)
		e.uvarint(r.fingerprint)
		flush(false)
	}
	flush(true)
	if werr != nil {
		return fmt.Errorf("write snapshot: %w", werr)
	}
	if _, err := w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		return fmt.Errorf("write snapshot checksum: %w", err)
	}
	return nil
}

func encodeLink(e *encoder, l *Link) {
	e.uvarint(l.ID)
	e.string(l.Code)
	e.string(l.URL)
	e.string(l.Workspace)
	e.string(l.Canonical)
	e.varint(l.CreatedAt)
	e.varint(l.ExpiresAt)
	e.uvarint(l.Clicks)
	e.varint(l.LastAccess)
}

// minLinkSize is the smallest encoding of a link: nine one-byte fields.
const minLinkSize = 9

func decodeLink(d *decoder) Link {
	return Link{
		ID: d.uvarint(), Code: d.string(), URL: d.string(), Workspace: d.string(),
		Canonical: d.string(), CreatedAt: d.varint(), ExpiresAt: d.varint(),
		Clicks: d.uvarint(), LastAccess: d.varint(),
	}
}

// ErrCorruptSnapshot reports a snapshot or backup that cannot be restored.
var ErrCorruptSnapshot = errors.New("corrupt snapshot")

// ReadSnapshot reads and verifies a snapshot (or a backup, which has the same
// format). It never changes any FSM; restoring is a separate step.
func ReadSnapshot(r io.Reader) (*Snapshot, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	snap, err := decodeSnapshot(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptSnapshot, err)
	}
	return &Snapshot{snap: snap}, nil
}

// Snapshot is a decoded, verified snapshot ready to become an FSM's state.
type Snapshot struct{ snap *snapshot }

// Links is the number of links in the snapshot.
func (s *Snapshot) Links() int { return len(s.snap.links) }

func decodeSnapshot(data []byte) (*snapshot, error) {
	if len(data) < len(snapshotMagic)+1+4 || !bytes.Equal(data[:len(snapshotMagic)], snapshotMagic) {
		return nil, errors.New("not a linkraft snapshot")
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return nil, errors.New("checksum mismatch")
	}
	d := decoder{buf: body[len(snapshotMagic):]}
	if v := d.byte(); v != snapshotVersion {
		return nil, fmt.Errorf("unsupported snapshot version %d", v)
	}
	snap := &snapshot{hasKey: d.bool()}
	d.fixed(snap.key[:])
	d.fixed(snap.clusterID[:])
	snap.lastID = d.uvarint()
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		snap.counters = append(snap.counters, counterEntry{length: int(d.uvarint()), next: d.uvarint()})
	}
	n := d.count(minLinkSize)
	snap.links = make([]Link, 0, n)
	for ; n > 0 && d.err == nil; n-- {
		snap.links = append(snap.links, decodeLink(&d))
	}
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		snap.dedupe = append(snap.dedupe, dedupeEntry{key: d.string(), code: d.string()})
	}
	for n := d.count(1); n > 0 && d.err == nil; n-- {
		snap.tombstones = append(snap.tombstones, d.string())
	}
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		snap.clickSeqs = append(snap.clickSeqs, clickSeqEntry{node: d.string(), seq: d.uvarint()})
	}
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		snap.servers = append(snap.servers, serverEntry{id: d.string(), httpAddr: d.string()})
	}
	for n := d.count(5); n > 0 && d.err == nil; n-- {
		snap.requests = append(snap.requests, requestRecord{
			id: d.string(), code: d.string(), existing: d.bool(), at: d.varint(), fingerprint: d.uvarint(),
		})
	}
	if d.err == nil && len(d.buf) != 0 {
		return nil, fmt.Errorf("%d trailing bytes", len(d.buf))
	}
	if d.err != nil {
		return nil, d.err
	}
	return snap, snap.check()
}

// check rejects snapshots whose sections contradict each other, so a
// restored state can never hold two links under one code.
func (snap *snapshot) check() error {
	seen := make(map[string]struct{}, len(snap.links))
	var prevID uint64
	for _, l := range snap.links {
		if l.Code == "" || l.URL == "" || l.Workspace == "" {
			return fmt.Errorf("link %d has an empty field", l.ID)
		}
		if _, dup := seen[l.Code]; dup {
			return fmt.Errorf("code %q appears twice", l.Code)
		}
		if l.ID <= prevID || l.ID > snap.lastID {
			return fmt.Errorf("link %q has out-of-order id %d", l.Code, l.ID)
		}
		seen[l.Code] = struct{}{}
		prevID = l.ID
	}
	for _, c := range snap.counters {
		if c.length < codes.MinCounterLength || c.length > codes.MaxCounterLength {
			return fmt.Errorf("counter for code length %d", c.length)
		}
	}
	return nil
}

// state builds a live state from the snapshot.
func (s *Snapshot) state() *state {
	snap := s.snap
	st := newState()
	st.hasKey, st.key, st.clusterID, st.lastID = snap.hasKey, snap.key, snap.clusterID, snap.lastID
	for _, c := range snap.counters {
		st.counters[c.length] = c.next
	}
	for i := range snap.links {
		st.insertRestored(&snap.links[i])
	}
	for _, d := range snap.dedupe {
		st.dedupe[d.key] = d.code
	}
	for _, t := range snap.tombstones {
		st.tombstones[t] = struct{}{}
	}
	for _, c := range snap.clickSeqs {
		st.clickSeqs[c.node] = c.seq
	}
	for _, sv := range snap.servers {
		st.servers[sv.id] = sv.httpAddr
	}
	for _, r := range snap.requests {
		st.requests[r.id] = r
	}
	st.requestLog = snap.requests
	return st
}

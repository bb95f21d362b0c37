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
	"slices"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm/codes"
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
	snapshotVersion = 11 // version 10 of a cluster raised to LevelRemovals: the removed servers after the servers
)

// Link flags in a version 2 snapshot.
const (
	snapDedupe  = 1 << iota // the link takes part in dedupe
	snapIndexed             // dedupe returns this link for its URL
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

type counterEntry struct {
	length int
	next   uint64
}

type clickSeqEntry struct {
	node string
	seq  uint64
}

type serverEntry struct{ id, httpAddr string }

// snapshot is a point-in-time view of state that Apply does not change:
// small collections are copied, link records are shared (recordTable).
type snapshot struct {
	hasKey     bool
	key        codes.Key
	clusterID  [16]byte
	lastID     uint64
	counters   []counterEntry
	records    recordView
	workspaces []string
	live       int
	tombstones []string
	clickSeqs  []clickSeqEntry
	servers    []serverEntry
	removed    []removedEntry
	requests   []requestRecord
	keys       []*APIKey
	revoked    []string
	audit      []AuditEntry // the one ring, or link writes once kept apart
	security   []AuditEntry // security actions kept apart
	raised     int
	certs      certState
	opts       optionTable // Options never change once stored: shared
	domains    []Domain
	visits     visitTable  // shares pages, links and days: see visitTable
	orphans    orphanTable // shares days as visits does
	hooks      []hookState // copies; their events are never changed (webhooks.go)
	level      int         // the state's entry level: which version holds it
	release    func()

	defaultDomain Domain // the default domain's redirects (version 10)
}

var _ raft.FSMSnapshot = (*snapshot)(nil)

// snapshot takes a view of the state; sorting is left to writeTo so the
// FSM lock is held only for the copies. The caller holds the write lock.
func (s *state) snapshot() *snapshot {
	records, release := s.links.recs.share()
	snap := &snapshot{
		hasKey:    s.hasKey,
		key:       s.key,
		clusterID: s.clusterID,
		lastID:    s.lastID,
		records:   records,
		// The request log only grows by append (a purge replaces it), so
		// capping it keeps later appends out of the view, as
		// workspaceNames does for the workspaces.
		workspaces: s.links.workspaceNames(),
		requests:   slices.Clip(s.requests.log),
		live:       s.links.live(),
		tombstones: slices.Collect(s.tombstones.all()),
		release:    release,
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
	snap.opts = s.opts.clone()
	snap.clickSeqs = s.clickSeqs.entries()
	snap.visits = s.visits.share()
	snap.orphans = s.orphans.share()
	snap.level = s.level()
	snap.domains = slices.Collect(maps.Values(s.domains))
	snap.defaultDomain = s.defaultDomain
	snap.hooks = s.hooks.snapshot()
	return snap
}

func (snap *snapshot) sort() {
	slices.SortFunc(snap.counters, func(a, b counterEntry) int { return cmp.Compare(a.length, b.length) })
	slices.Sort(snap.tombstones)
	slices.SortFunc(snap.clickSeqs, func(a, b clickSeqEntry) int { return cmp.Compare(a.node, b.node) })
	slices.SortFunc(snap.servers, func(a, b serverEntry) int { return cmp.Compare(a.id, b.id) })
	sortRemovals(snap.removed)
	slices.SortFunc(snap.keys, func(a, b *APIKey) int { return cmp.Compare(a.ID, b.ID) })
	slices.Sort(snap.revoked)
	slices.SortFunc(snap.domains, func(a, b Domain) int { return cmp.Compare(a.Name, b.Name) })
}

// Persist writes the snapshot to the Raft snapshot sink.
func (snap *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := snap.writeTo(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release lets the state change the records this snapshot shared in place
// again.
func (snap *snapshot) Release() { snap.release() }

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

	version := snap.version()
	e.fixed(snapshotMagic)
	e.byte(version)
	for _, sec := range registry.sections {
		if sec.write != nil && sec.holds(version) {
			sec.write(snap, &e, version, flush)
		}
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

// encodeLink writes a link as version 2 has it: the canonical URL only
// when it differs from the URL.
func (snap *snapshot) encodeLink(e *encoder, r *record) {
	text := &snap.records.text
	var flags byte
	if r.dedupe() {
		flags |= snapDedupe
	}
	if r.flags&flagIndexed != 0 {
		flags |= snapIndexed
	}
	e.uvarint(r.id)
	e.string(text.code(r))
	e.string(text.url(r))
	e.string(snap.workspaces[r.workspace])
	e.string(text.str(r.text, int(r.codeLen)+int(r.urlLen), int(r.canonLen)))
	e.byte(flags)
	e.varint(r.createdAt)
	e.varint(r.expiresAt)
	e.uvarint(r.clicks)
	e.varint(r.lastAccess)
}

// encodeClickHours writes the newest hour, then for each live link with
// clicks within retention: its id, the number of hours, and per hour the
// distance from the previous one (from 0 for the first) and the count.
func (snap *snapshot) encodeClickHours(e *encoder, flush func(bool)) {
	recs, hours := &snap.records, &snap.records.hours
	e.uvarint(uint64(hours.newest))
	n := 0
	for p := range recs.n {
		if recs.at(p).live() && len(hours.kept(p)) > 0 {
			n++
		}
	}
	e.uvarint(uint64(n))
	for p := range recs.n {
		kept := hours.kept(p)
		if !recs.at(p).live() || len(kept) == 0 {
			continue
		}
		e.uvarint(recs.at(p).id)
		e.uvarint(uint64(len(kept)))
		prev := uint32(0)
		for _, h := range kept {
			e.uvarint(uint64(h.hour - prev))
			e.uvarint(uint64(h.count))
			prev = h.hour
		}
		flush(false)
	}
}

// minLinkSize is the smallest encoding of a link: nine one-byte fields.
const minLinkSize = 9

// ErrCorruptSnapshot reports a snapshot or backup that cannot be restored.
var ErrCorruptSnapshot = errors.New("corrupt snapshot")

// ReadSnapshot reads and verifies a snapshot (also the one inside a backup,
// once cluster has checked its envelope) and builds the state it holds. It never changes any FSM;
// restoring is a separate step. The stream is decoded as it is read, so
// the snapshot's bytes are never all in memory at once.
func ReadSnapshot(r io.Reader) (*Snapshot, error) {
	s, err := decodeSnapshot(newStreamDecoder(r, crc32.New(crcTable)))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptSnapshot, err)
	}
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
type Snapshot struct{ s *state }

// Links is the number of links in the snapshot.
func (s *Snapshot) Links() int { return s.s.links.live() }

// Level is the entry level a node must apply to hold the snapshot's
// state (FSM.Level).
func (s *Snapshot) Level() int { return s.s.level() }

// decodeSnapshot decodes every section straight into a new state, refusing
// anything inconsistent (a restored state can never hold two links under
// one code), then checks the trailing checksum. A checksum mismatch is
// reported before any decoding error, as it is the cause of both.
func decodeSnapshot(d *decoder) (*state, error) {
	magic := make([]byte, len(snapshotMagic))
	d.fixed(magic)
	if errors.Is(d.err, errRead) {
		return nil, d.err
	}
	if d.err != nil || !bytes.Equal(magic, snapshotMagic) {
		return nil, errors.New("not a linkraft snapshot")
	}
	st, err := decodeSections(d)
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
func decodeSections(d *decoder) (*state, error) {
	version := d.byte()
	if d.err != nil {
		return nil, d.err
	}
	if version < snapshotV1 || version > snapshotVersion {
		return nil, fmt.Errorf("unsupported snapshot version %d", version)
	}
	st := newState()
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
	return st, nil
}

// decodeClickHours reads the clicks per hour. Every entry must name a link,
// in id order, with hours strictly increasing, within retention and not
// after the newest hour, and counts above zero.
func (lt *linkTable) decodeClickHours(d *decoder) error {
	newest := d.uvarint()
	if d.err == nil && newest > uint64(^uint32(0)) {
		return fmt.Errorf("newest click hour %d", newest)
	}
	hours := &lt.recs.hours
	hours.newest = uint32(newest)
	var prevID uint64
	for n := d.count(3); n > 0 && d.err == nil; n-- {
		id := d.uvarint()
		p, ok := lt.positionOf(id)
		if d.err == nil && (!ok || id <= prevID) {
			return fmt.Errorf("click hours for link %d: no such link, or out of order", id)
		}
		prevID = id
		hour := uint64(0)
		for k := d.count(2); k > 0 && d.err == nil; k-- {
			step, count := d.uvarint(), d.uvarint()
			hour += step
			switch {
			case d.err != nil:
				return d.err
			case step == 0 && len(hours.at(p)) > 0, hour > newest, hour < uint64(hours.oldestKept()), count == 0, count > uint64(^uint32(0)):
				return fmt.Errorf("link %d: click hour %d with %d clicks", id, hour, count)
			}
			hours.add(p, uint32(hour), count, lt.recs.gen, false)
		}
	}
	return nil
}

// readLinks inserts the links section, checking each link as it goes.
func readLinks(st *state, d *decoder, version byte) error {
	var prevID uint64
	for n := d.count(minLinkSize); n > 0 && d.err == nil; n-- {
		l := decodeSnapLink(d, version)
		if d.err != nil {
			return d.err
		}
		if err := l.check(prevID, st.lastID); err != nil {
			return err
		}
		if _, dup := st.links.lookup(l.code); dup {
			return fmt.Errorf("code %q appears twice", l.code)
		}
		prevID = l.r.id
		dedupe := l.flags&snapDedupe != 0
		if dedupe && l.canonical == "" {
			l.canonical = l.url
		}
		p := st.links.insert(l.r, l.code, l.url, l.ws, l.canonical, dedupe)
		st.setOptions(p, l.opts)
		if l.flags&snapIndexed != 0 {
			if err := st.links.restoreIndexed(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// snapLink is a link as the links section holds it. Its strings are views
// of the decoder's buffer until insert copies them.
type snapLink struct {
	r                        record
	code, url, ws, canonical string
	flags                    byte
	opts                     *Options
}

// decodeSnapLink reads one link of a snapshot of the given version.
func decodeSnapLink(d *decoder, version byte) snapLink {
	l := snapLink{r: record{id: d.uvarint()}}
	l.code, l.url, l.ws, l.canonical = d.stringView(), d.stringView(), d.stringView(), d.stringView()
	switch {
	case version >= snapshotV2:
		l.flags = d.byte()
	case l.canonical != "":
		l.flags = snapDedupe
	}
	l.r.createdAt, l.r.expiresAt, l.r.clicks, l.r.lastAccess = d.varint(), d.varint(), d.uvarint(), d.varint()
	switch {
	case version >= snapshotV10:
		l.opts = decodeOptionsExtended(d)
	case version >= snapshotV5:
		l.opts = decodeOptions(d)
	}
	return l
}

// check refuses a link that Apply could not have made, or that comes out
// of id order: ids above prevID and at most lastID.
func (l *snapLink) check(prevID, lastID uint64) error {
	if err := l.opts.check(); err != nil {
		return fmt.Errorf("link %q: %w", l.code, err)
	}
	switch {
	case l.code == "" || l.url == "" || l.ws == "":
		return fmt.Errorf("link %d has an empty field", l.r.id)
	case len(l.code) > maxCodeLen:
		return fmt.Errorf("link %d has a code of %d bytes", l.r.id, len(l.code))
	case l.r.id <= prevID || l.r.id > lastID:
		return fmt.Errorf("link %q has out-of-order id %d", l.code, l.r.id)
	case l.flags&^(snapDedupe|snapIndexed) != 0 || l.flags == snapIndexed || (l.canonical != "" && l.flags&snapDedupe == 0):
		return fmt.Errorf("link %q has flags %#x", l.code, l.flags)
	}
	return nil
}

// version is the oldest snapshot version that holds this state: version 4
// while its level is LevelKeys (no options, domains or keys limited to
// domains), 7 only while its audit log records a restore, 8 once the
// cluster was raised to LevelBounds, 9 once raised to LevelCerts, 10 once
// raised to LevelVisitRows, 11 once raised to LevelRemovals. A cluster in the middle of an upgrade, whose
// new nodes hold only such state (nothing newer is written until every
// node applies it, see EntryLevel), then sends its old nodes snapshots
// they can read. The choice depends on the state alone, so equal states
// still give equal bytes.
func (snap *snapshot) version() byte {
	switch {
	case snap.level >= LevelRemovals:
		return snapshotVersion
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

// encodeKeyDomains writes, for the keys limited to domains, their id and
// domains, by id (keys are sorted).
func (snap *snapshot) encodeKeyDomains(e *encoder) {
	n := 0
	for _, k := range snap.keys {
		if len(k.Domains) > 0 {
			n++
		}
	}
	e.uvarint(uint64(n))
	for _, k := range snap.keys {
		if len(k.Domains) > 0 {
			e.string(k.ID)
			encodeStrings(e, k.Domains)
		}
	}
}

// readKeyDomains reads what encodeKeyDomains wrote; each entry must name
// a key, and the key's domains must pass validKey.
func readKeyDomains(st *state, d *decoder) error {
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		id, domains := d.string(), decodeStrings(d)
		k, ok := st.keys[id]
		if d.err != nil {
			return d.err
		}
		if !ok {
			return fmt.Errorf("domains of key %q, which does not exist", id)
		}
		limited := *k
		limited.Domains = domains
		if !validKey(&limited) {
			return fmt.Errorf("key %q: invalid domains", id)
		}
		st.keys[id] = &limited
	}
	return nil
}

// encodeKeys writes the API keys section, by id.
func (snap *snapshot) encodeKeys(e *encoder) {
	e.uvarint(uint64(len(snap.keys)))
	for _, k := range snap.keys {
		encodeKey(e, k)
		e.string(k.CreatedBy)
	}
	e.uvarint(uint64(len(snap.revoked)))
	for _, id := range snap.revoked {
		e.string(id)
	}
}

// readKeys reads the API keys, each one Apply would accept, in strictly
// increasing id order, then the ids of revoked keys.
func readKeys(st *state, d *decoder) error {
	prev := ""
	for n := d.count(1 + 1 + KeyHashSize + 1 + 1 + 2 + 1); n > 0 && d.err == nil; n-- {
		k := decodeKey(d)
		k.CreatedBy = d.string()
		if d.err != nil {
			break
		}
		if !validKey(k) || k.ID <= prev {
			return fmt.Errorf("key %q invalid or out of order", k.ID)
		}
		prev = k.ID
		st.keys[k.ID] = k
	}
	for n := d.count(1); n > 0 && d.err == nil; n-- {
		id := d.string()
		if _, live := st.keys[id]; d.err == nil && (!ValidKeyID(id) || live) {
			return fmt.Errorf("revoked key %q invalid or still live", id)
		}
		st.revoked[id] = struct{}{}
	}
	return d.err
}

// readDomains reads the registered domains, and checks that every link
// outside the default domain lives in one of them.
func readDomains(st *state, d *decoder, version byte) error {
	for n := d.count(3); n > 0 && d.err == nil; n-- {
		dom := Domain{Name: d.string(), RootRedirect: d.string(), NotFoundRedirect: d.string()}
		if version >= snapshotV10 {
			dom.InvalidRedirect = d.string()
		}
		if d.err == nil && !validDomainName(dom.Name) {
			return fmt.Errorf("domain name %q", dom.Name)
		}
		st.domains[dom.Name] = dom
	}
	if version >= snapshotV10 {
		st.defaultDomain = Domain{RootRedirect: d.string(), NotFoundRedirect: d.string(), InvalidRedirect: d.string()}
	}
	for name := range st.links.domainsUsed() {
		if _, ok := st.domains[name]; !ok && d.err == nil {
			return fmt.Errorf("links in domain %q, which is not registered", name)
		}
	}
	return nil
}

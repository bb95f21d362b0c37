package fsm

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"unsafe"

	"github.com/linkraft/linkraft/fsm/store"
)

// A clean stop keeps the state (Keep) and the next start resumes it
// (Resume): the engine stays as it is, and what the state holds in
// memory beside it goes into a file in the engine's directory, so a start
// reads that file instead of rebuilding the engine from Raft's snapshot.
// The kept state is tied to a position of the Raft log, the index and term
// of the last entry it applied: whoever resumes it checks that its log
// holds that entry, and Raft then hands the FSM only the entries after it
// (ApplyBatch skips the ones it already has). A start after a crash finds
// no kept state: the engine writes no log of its own, so only a closed
// engine is whole, and the start resumes the checkpoint of its latest
// snapshot instead (snapref.go; DESIGN.md, "Memory and disk").

// keptDir is where Keep leaves the engine, beside the numbered ones.
// Only a closed engine with its state file is ever there: Resume renames
// it before it opens it, so a crash after that leaves no kept state.
const keptDir = "kept"

// keptFile is the state file inside the kept engine's directory.
const keptFile = "linkraft-state"

// keptMagic opens a state file; keptVersion is its layout.
var keptMagic = []byte("LKKEPT")

// keptVersion is the layout this build writes; it reads every layout
// from 1 on (1: the lists of positions as steps; 2: as runs; 3: the
// engine holds the expiry index, expiries.go; 4: and the crawlable and
// tag indexes, crawlable.go and tagindex.go), so that a snapshot's
// checkpoint an older build wrote is read. Builds before LevelOptionIndexes
// refuse layout 4.
const keptVersion = 4

const (
	// keptExpiries is the first layout whose engine holds the expiry index.
	keptExpiries = 3
	// keptOptionIndexes is the first layout whose engine holds the crawlable
	// and tag indexes.
	keptOptionIndexes = 4
)

// Keep closes the FSM and keeps its state in Config.Dir for the next
// start's Resume, returning the index it was kept at. When it cannot
// keep it (a restore it applied nothing after, a failure) it closes the
// FSM anyway and says why: the next start rebuilds the state from Raft's
// snapshot and log. An FSM in memory has nothing to keep: Keep returns 0
// and leaves it open.
func (f *FSM) Keep() (uint64, error) {
	if f.engines.cfg.Dir == "" {
		return 0, nil
	}
	var index uint64
	err := errors.New("fsm: already closed")
	f.closed.Do(func() {
		f.stopFilling()
		f.mu.Lock()
		defer f.mu.Unlock()
		defer f.releaseCache()
		index = f.applied.Load()
		err = f.keep(index)
	})
	return index, err
}

// keep writes the state file and flushes the engine, then closes it and
// moves it to keptDir; whatever fails, the engine is closed.
func (f *FSM) keep(index uint64) error {
	e := f.s.eng
	if err := f.writeKept(index); err != nil {
		e.release()
		return err
	}
	e.refs.Store(0)
	e.batch.Close()
	if err := e.st.Close(); err != nil {
		return err
	}
	kept := filepath.Join(f.engines.cfg.Dir, keptDir)
	if err := os.RemoveAll(kept); err != nil { // one a start did not take
		return fmt.Errorf("keep the state: %w", err)
	}
	if err := os.Rename(e.dir, kept); err != nil {
		return fmt.Errorf("keep the state: %w", err)
	}
	return store.SyncDir(f.engines.cfg.Dir)
}

func (f *FSM) writeKept(index uint64) error {
	e := f.s.eng
	switch {
	case index == 0:
		return errors.New("nothing was applied since the state was restored: the log position it is at is not known")
	case e.refs.Load() != 1:
		return errors.New("a snapshot still reads the state")
	}
	if !e.ready() {
		return e.err
	}
	if e.st.AppliedIndex() != index {
		return fmt.Errorf("the engine is at index %d, the state at %d", e.st.AppliedIndex(), index)
	}
	snap, err := f.s.snapshot()
	if err != nil {
		return err
	}
	defer snap.Release()
	snap.index, snap.term = index, f.appliedTerm
	if err := writeKeptFile(filepath.Join(e.dir, keptFile), f.s, snap); err != nil {
		return err
	}
	return e.st.Flush()
}

// Resume takes the state the last Keep left in Config.Dir, if there is
// one and accept takes its log position (the index and term of the last
// entry it applied); the FSM then skips the entries up to that index
// when Raft hands them to it again. It returns the index resumed at and
// whether it resumed. A kept state it does not take is removed: a start
// then rebuilds the state from Raft's snapshot and log. Call it once,
// before Raft starts.
func (f *FSM) Resume(accept func(index, term uint64) bool) (uint64, bool, error) {
	if f.engines.cfg.Dir == "" {
		return 0, false, nil
	}
	kept := filepath.Join(f.engines.cfg.Dir, keptDir)
	index, term, err := readKeptPosition(filepath.Join(kept, keptFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, false, nil
	case err == nil && !accept(index, term):
		err = fmt.Errorf("this node's log does not hold the entry it was kept at (index %d, term %d)", index, term)
	}
	if err != nil {
		return 0, false, errors.Join(fmt.Errorf("resume: %w", err), os.RemoveAll(kept))
	}
	eng := f.engines.open()
	if err := os.Rename(kept, eng.dir); err != nil {
		return 0, false, fmt.Errorf("resume: %w", err)
	}
	if err := store.SyncDir(f.engines.cfg.Dir); err != nil {
		return 0, false, fmt.Errorf("resume: %w", err)
	}
	s, err := readKept(eng, index)
	if err != nil {
		return 0, false, fmt.Errorf("resume: %w", err)
	}
	f.install(s, index, term)
	f.fillIndexes(s)
	return index, true, nil
}

// readKept builds the state of an engine that holds a state file at
// index, and removes the file: from now on the engine is not a kept
// state but the FSM's. An engine it cannot read is removed.
func readKept(eng *engine, index uint64) (s *state, err error) {
	path := filepath.Join(eng.dir, keptFile)
	defer func() {
		if err != nil {
			eng.retire()
		}
	}()
	defer recoverRead(&err)
	s, layout, err := readKeptFile(path, eng)
	if err == nil && layout < keptExpiries {
		s.links.indexExpiries()
		err = eng.settle()
	}
	if err == nil && layout < keptOptionIndexes {
		s.opts.index(s.links.positionOf)
		err = eng.settle()
	}
	if err == nil {
		// What the state hashes with a seed of its own is rebuilt once
		// the state is installed (fillIndexes): the code filter and the
		// request window's index.
		s.links.codes.filter.partial = true
		s.requests.startFill()
		err = eng.err
	}
	if err == nil && eng.st.AppliedIndex() != index {
		err = fmt.Errorf("the engine is at index %d, its state file at %d", eng.st.AppliedIndex(), index)
	}
	if err == nil {
		err = os.Remove(path)
	}
	return s, err
}

// install makes s the FSM's state, at the log position it was kept at.
func (f *FSM) install(s *state, index, term uint64) {
	f.mu.Lock()
	old := f.s
	s.eng.published = true
	f.s = s
	f.applied.Store(index)
	f.appliedTerm, f.skipThrough = term, index
	f.mu.Unlock()
	old.eng.retire()
}

// The state file: keptMagic, the version byte, the index and term, the
// state's version byte (the snapshot version its sections are written
// in), the link tables, the sections, the keys limited to their own
// links, and a CRC-32C of everything before it, big-endian.
func writeKeptFile(path string, s *state, snap *snapshot) error {
	file, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("keep the state: %w", err)
	}
	defer file.Close()
	crc := crc32.New(crcTable)
	c := newChunked(io.MultiWriter(file, crc))
	e, flush := &c.e, c.flush
	snap.sort()
	version := snap.version()
	e.fixed(keptMagic)
	e.byte(keptVersion)
	e.uvarint(snap.index)
	e.uvarint(snap.term)
	e.byte(version)
	s.links.keep(e, flush)
	s.counts.keep(e, flush)
	// The other counts the state keeps of what is in the engine.
	for _, n := range []uint64{uint64(s.tombstones.n), uint64(s.opts.n), uint64(s.visits.links),
		s.requests.first, s.requests.next} {
		e.uvarint(n)
	}
	for _, sec := range registry.sections {
		if sec.memory && sec.holds(version) {
			sec.write(snap, e, version, flush)
		}
	}
	encodeStrings(e, ownKeys(snap.keys))
	flush(true)
	werr := c.err
	if werr == nil {
		_, werr = file.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	}
	if werr == nil {
		werr = file.Sync()
	}
	if werr != nil {
		return fmt.Errorf("keep the state: %w", werr)
	}
	return file.Close()
}

// readKeptPosition reads the index and term at the head of a state file.
func readKeptPosition(path string) (index, term uint64, err error) {
	file, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer file.Close()
	d := newStreamDecoder(file, crc32.New(crcTable))
	index, term, _, _ = readKeptHead(d)
	return index, term, d.err
}

func readKeptHead(d *decoder) (index, term uint64, version, layout byte) {
	magic := make([]byte, len(keptMagic))
	d.fixed(magic)
	if d.err != nil || !bytes.Equal(magic, keptMagic) {
		d.fail(errors.New("not a kept state"))
	}
	if layout = d.byte(); d.err == nil && (layout < 1 || layout > keptVersion) {
		d.fail(fmt.Errorf("a kept state of layout %d, newer than this build", layout))
	}
	index, term, version = d.uvarint(), d.uvarint(), d.byte()
	if d.err == nil && (version < snapshotV1 || version > snapshotVersion) {
		d.fail(fmt.Errorf("unsupported state version %d", version))
	}
	return index, term, version, layout
}

// readKeptFile builds the state of a kept engine and its state file.
func readKeptFile(path string, eng *engine) (*state, byte, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer file.Close()
	if !eng.ready() {
		return nil, 0, eng.err
	}
	d := newStreamDecoder(bufio.NewReaderSize(file, flushSize), crc32.New(crcTable))
	_, _, version, layout := readKeptHead(d)
	st := newState(eng)
	if d.err == nil {
		st.links.resume(d, layout)
		st.counts.resume(d)
		st.tombstones.n, st.opts.n, st.visits.links = int(d.uvarint()), int(d.uvarint()), int(d.uvarint())
		st.requests.first, st.requests.next = d.uvarint(), d.uvarint()
	}
	for _, sec := range registry.sections {
		if d.err != nil {
			break
		}
		if sec.memory && sec.holds(version) {
			d.fail(sec.read(st, d, version))
		}
	}
	if d.err == nil {
		d.fail(readOwnKeys(st, d))
	}
	sum, ok := d.trailer()
	switch {
	case d.err != nil:
		return nil, 0, fmt.Errorf("state file: %w", d.err)
	case !ok || binary.BigEndian.Uint32(sum) != d.sum.Sum32():
		return nil, 0, errors.New("state file: checksum mismatch")
	}
	return st, layout, eng.err
}

// keep writes what the link table holds in memory: what the engine's
// keys alone would take a walk of every record to rebuild.
func (lt *linkTable) keep(e *encoder, flush func(bool)) {
	e.uvarint(uint64(lt.recs.n))
	encodeUints(e, lt.recs.firstIDs, flush)
	e.uvarint(uint64(lt.codes.live))
	e.uvarint(uint64(lt.hours.newest))
	encodeStrings(e, lt.workspaces.names)
	for _, list := range lt.workspaces.links {
		encodePositions(e, list, flush)
	}
	encodeStrings(e, lt.authors.ids)
	for _, list := range lt.authors.links {
		encodePositions(e, list, flush)
	}
	e.uvarint(uint64(len(lt.authors.free)))
	for _, n := range lt.authors.free {
		e.uvarint(uint64(n))
	}
	domains := slices.Sorted(maps.Keys(lt.domainLinks))
	e.uvarint(uint64(len(domains)))
	for _, name := range domains {
		e.string(name)
		e.uvarint(uint64(lt.domainLinks[name]))
	}
}

func (lt *linkTable) resume(d *decoder, layout byte) {
	positions := decodePositions
	if layout == 1 {
		positions = decodePositionSteps
	}
	if lt.recs.n = d.uvarint(); lt.recs.n < lt.recs.first || lt.recs.n > maxPosition {
		d.fail(fmt.Errorf("kept state: %d records", lt.recs.n))
	}
	lt.recs.written = lt.recs.n
	lt.recs.firstIDs = decodeUints(d)
	lt.codes.live = int(d.uvarint())
	lt.hours.newest = uint32(d.uvarint())
	for _, name := range decodeStrings(d) {
		lt.workspaces.intern(name)
	}
	for i := range lt.workspaces.links {
		lt.workspaces.links[i] = positions(d, lt.recs.n)
	}
	lt.authors.ids = decodeStrings(d)
	lt.authors.links = make([]*positionList, len(lt.authors.ids))
	for n, id := range lt.authors.ids {
		lt.authors.links[n] = positions(d, lt.recs.n)
		if id != "" {
			lt.authors.nums[id] = uint16(n)
		}
	}
	for n := d.count(1); n > 0 && d.err == nil; n-- {
		lt.authors.free = append(lt.authors.free, uint16(d.uvarint()))
	}
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		name := d.string()
		lt.domainLinks[name] = int(d.uvarint())
	}
	if d.err == nil && (len(lt.authors.ids) == 0 || lt.authors.ids[0] != "") {
		d.fail(errors.New("author numbers do not start at 1"))
	}
}

// keep writes the list totals.
func (c *listCounts) keep(e *encoder, flush func(bool)) {
	e.uvarint(uint64(len(c.ws)))
	for _, w := range c.ws {
		encodeTotal(e, w.all)
		encodeTotal(e, w.home)
		domains := slices.Sorted(maps.Keys(w.domains))
		e.uvarint(uint64(len(domains)))
		for _, name := range domains {
			e.string(name)
			encodeTotal(e, w.domains[name])
		}
		flush(false)
	}
	e.uvarint(uint64(len(c.tags)))
	for k, t := range c.tags {
		e.uvarint(uint64(k.ws))
		e.string(k.domain)
		e.string(k.tag)
		e.bool(k.anyDomain)
		encodeTotal(e, t)
		flush(false)
	}
}

func (c *listCounts) resume(d *decoder) {
	for n := d.count(3); n > 0 && d.err == nil; n-- {
		c.ws = append(c.ws, wsCounts{all: decodeTotal(d), home: decodeTotal(d)})
		w := &c.ws[len(c.ws)-1]
		for m := d.count(3); m > 0 && d.err == nil; m-- {
			if w.domains == nil {
				w.domains = map[string]ListTotal{}
			}
			name := d.string()
			w.domains[name] = decodeTotal(d)
		}
	}
	for n := d.count(6); n > 0 && d.err == nil; n-- {
		k := tagKey{ws: uint32(d.uvarint()), domain: d.string(), tag: d.string(), anyDomain: d.bool()}
		c.tags[k] = decodeTotal(d)
	}
}

func encodeTotal(e *encoder, t ListTotal) { e.uvarint(uint64(t.Links)); e.uvarint(t.Clicks) }

func decodeTotal(d *decoder) ListTotal {
	return ListTotal{Links: int(d.uvarint()), Clicks: d.uvarint()}
}

func encodeUints(e *encoder, vs []uint64, flush func(bool)) {
	e.uvarint(uint64(len(vs)))
	for _, v := range vs {
		e.uvarint(v)
		flush(false)
	}
}

func decodeUints(d *decoder) []uint64 {
	n := d.count(1)
	vs := make([]uint64, 0, min(n, maxPrealloc))
	for range n {
		vs = append(vs, d.uvarint())
	}
	return vs
}

// maxPrealloc bounds what a count read from a file reserves before the
// elements it counts arrive: a damaged count fails on the bytes, not on
// an allocation.
const maxPrealloc = 1 << 16

// fillIndexes builds, off the FSM's lock, what a resumed state s hashes
// with a seed of its own: a scan of every record would hold up the start
// (a second at 10M links, 0.4 s a million idempotency records).
//
// First the request window's index, which Apply waits for
// (requestWindow.settle): readers go on meanwhile. Then the filter bits
// of every code s holds, live or tombstoned: until they are set the
// filter is partial and answers "may hold" to every code, so lookups read
// the engine as they would without a filter; bits the writer sets
// meanwhile are kept.
func (f *FSM) fillIndexes(s *state) {
	x, w := &s.links.codes, &s.requests
	requests := w.fill != nil // the index is to be built (startFill)
	f.mu.Lock()
	view, release, err := s.eng.view()
	fill := f.fills.Add(1) // a later state's fill, a restore or a stop ends this one
	if err == nil {
		f.filling.Add(1)
	}
	f.mu.Unlock()
	if err != nil {
		if requests {
			close(w.fill.done) // Apply builds the index itself
		}
		return // the filter stays partial: lookups read the engine
	}
	going := func() bool { return f.fills.Load() == fill }
	go func() {
		defer f.filling.Done()
		defer release()
		if requests {
			w.fillFrom(view, going)
		}
		filled := codeFilter{words: make([]uint64, len(x.filter.words)), mask: x.filter.mask}
		var err error
		for _, prefix := range []byte{codePrefix, tombstonePrefix} { // live and retired codes
			err = view.Scan([]byte{prefix}, nil, func(key, _ []byte) bool {
				code := key[1:]
				filled.add(x.hash(unsafe.String(unsafe.SliceData(code), len(code)))) // hashed, not kept
				return going()
			})
			if err != nil {
				break
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if err != nil || !going() || f.s != s {
			return
		}
		for i, w := range filled.words {
			x.filter.words[i] |= w
		}
		x.filter.partial = false
	}()
}

// stopFilling stops a filter's fill and waits for it: Keep closes the
// engine under it.
func (f *FSM) stopFilling() {
	f.fills.Add(1)
	f.filling.Wait()
}

// ownKeys is the ids of the keys limited to their own links, sorted: the
// keys section does not hold that mark (the authors section does).
func ownKeys(keys []*APIKey) []string {
	var own []string
	for _, k := range keys {
		if k.OwnLinksOnly {
			own = append(own, k.ID)
		}
	}
	slices.SortFunc(own, cmp.Compare[string])
	return own
}

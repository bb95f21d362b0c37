package fsm

import "fmt"

// The small pieces of the state, each behind the few operations Apply,
// readers and snapshots use, so that one at a time can move to disk
// without the others knowing: the tombstones, the links' options and the
// click batches' sequences. The larger pieces have files of their own:
// linkTable (links.go), requestWindow (requests.go), visitTable
// (visittable.go).

// tombstoneSet is every code ever deleted or purged, never handed out
// again: on disk, one key per code (tombstoneKey), with their count in
// memory for the snapshot, which writes the count first. Each is added to
// the state's code filter too, which then holds every code live or
// tombstoned: a code the filter never met is no tombstone, and has reads
// no disk for it (a restore's tombstones come through add, a resume's
// fill reads them).
type tombstoneSet struct {
	eng   *engine
	codes *codeIndex
	n     int
	key   []byte // reused by keyOf
}

// tombstonePrefix is the engine's table of tombstones (store/DESIGN.md,
// "Keys").
const tombstonePrefix = 'x'

func newTombstoneSet(eng *engine, codes *codeIndex) tombstoneSet {
	return tombstoneSet{eng: eng, codes: codes}
}

func (t *tombstoneSet) keyOf(code string) []byte {
	t.key = append(append(t.key[:0], tombstonePrefix), code...)
	return t.key
}

// add tombstones code (once: a second add changes nothing).
func (t *tombstoneSet) add(code string) {
	if t.has(code) {
		return
	}
	t.eng.set(t.keyOf(code), nil)
	t.codes.filter.add(t.codes.hash(code))
	t.n++
}

func (t *tombstoneSet) has(code string) bool {
	return t.codes.mayHold(code) && t.eng.has(t.keyOf(code))
}

// len is the number of tombstoned codes.
func (t *tombstoneSet) len() int { return t.n }

// scanTombstones calls fn with each tombstoned code of a view or an
// engine, in byte order, until fn returns false. code is valid only
// during the call.
func scanTombstones(scan func(prefix, from []byte, fn func(key, value []byte) bool) error, fn func(code []byte) bool) error {
	return scan([]byte{tombstonePrefix}, nil, func(key, _ []byte) bool { return fn(key[1:]) })
}

// clickSeqTable is, per node, the sequence of the last click batch
// applied from it: a batch not above it is a retry, ignored.
type clickSeqTable struct{ last map[string]uint64 }

func newClickSeqTable() clickSeqTable { return clickSeqTable{last: map[string]uint64{}} }

// advance records seq as node's last batch and reports whether it is
// above the previous one; if not, nothing changes.
func (c *clickSeqTable) advance(node string, seq uint64) bool {
	if seq <= c.last[node] {
		return false
	}
	c.last[node] = seq
	return true
}

// of is node's last applied sequence, 0 for none.
func (c *clickSeqTable) of(node string) uint64 { return c.last[node] }

// set is advance without the check, for a state rebuilt from a snapshot.
func (c *clickSeqTable) set(node string, seq uint64) { c.last[node] = seq }

// entries is every node's sequence, in no order.
func (c *clickSeqTable) entries() []clickSeqEntry {
	out := make([]clickSeqEntry, 0, len(c.last))
	for n, seq := range c.last {
		out = append(out, clickSeqEntry{n, seq})
	}
	return out
}

// writeTombstones and readTombstones are the deleted codes, sorted.
func writeTombstones(snap *snapshot, e *encoder, _ byte, flush func(bool)) {
	e.uvarint(uint64(snap.tombstones))
	n := 0
	snap.fail(scanTombstones(snap.engine.Scan, func(code []byte) bool {
		e.uvarint(uint64(len(code)))
		e.fixed(code)
		flush(false)
		n++
		return true
	}))
	if n != snap.tombstones {
		snap.fail(fmt.Errorf("the engine's view holds %d tombstones, the state counted %d", n, snap.tombstones))
	}
}

func readTombstones(st *state, d *decoder, _ byte) error {
	for n := d.count(1); n > 0 && d.err == nil; n-- {
		st.tombstones.add(d.string())
	}
	return st.eng.err
}

// writeClickSeqs and readClickSeqs are each node's last applied click
// batch, by node.
func writeClickSeqs(snap *snapshot, e *encoder, _ byte, _ func(bool)) {
	e.uvarint(uint64(len(snap.clickSeqs)))
	for _, c := range snap.clickSeqs {
		e.string(c.node)
		e.uvarint(c.seq)
	}
}

func readClickSeqs(st *state, d *decoder, _ byte) error {
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		st.clickSeqs.set(d.string(), d.uvarint())
	}
	return nil
}

type clickSeqEntry struct {
	node string
	seq  uint64
}

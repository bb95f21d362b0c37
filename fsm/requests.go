package fsm

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"hash/maphash"
	"strconv"
)

// requestRecord remembers the outcome of a create that carried a RequestID.
type requestRecord struct {
	id          string
	code        string
	existing    bool
	at          int64
	fingerprint uint64 // of the request, so a key cannot be reused for another
}

// fingerprint identifies what a create asked for (FNV-1a: deterministic on
// every node).
func fingerprint(r CreateRequest) uint64 {
	h := fnv.New64a()
	for _, part := range []string{r.URL, r.Workspace, r.CustomCode, strconv.Itoa(int(r.Strategy)),
		strconv.FormatBool(r.Dedupe), strconv.FormatInt(r.ExpiresAt, 10)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// requestWindow is the idempotency window: the records of recent creates
// on disk, each under its sequence number in apply order
// (requestLogPrefix), which purges drop from the front; and in memory an
// index from request id to the latest record's sequence number, holding
// 32-bit hashes and sequence numbers only (an 8-byte slot a record, where
// a record in memory cost ~115 bytes), whose hits are checked against the
// record on disk. A create's lookup of a new id, the common case, then
// reads no disk: a seek of a random key in the engine's memtable cost
// several microseconds on the path every relayed create takes.
type requestWindow struct {
	eng         *engine
	first, next uint64 // the log's sequence numbers are [first, next)
	oldestAt    int64  // the apply time of the record at first, when there is one
	index       hashIndex
	seed        maphash.Seed
	key, value  []byte // reused
	// fill is the index a resumed state builds off the FSM's lock
	// (FSM.fillIndexes); nil once index is whole. Only Apply reads the
	// index, and it waits for the fill first (awaitFill, settle).
	fill *requestFill
}

// requestFill is an index being built from a view of the engine. done is
// closed when it is over: index is then whole if ok.
type requestFill struct {
	done  chan struct{}
	index hashIndex
	ok    bool
}

// requestLogPrefix is the engine's table of the window's records
// (store/DESIGN.md, "Keys").
const requestLogPrefix = 'q'

func newRequestWindow(eng *engine, seed maphash.Seed) requestWindow {
	return requestWindow{eng: eng, seed: seed}
}

func (w *requestWindow) hash(id string) uint32 { return uint32(maphash.String(w.seed, id)) }

func logKey(dst []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst[:0], requestLogPrefix), seq)
}

// seqOf is the sequence number an index slot's low 32 bits stand for:
// the window never holds 2^32 records.
func (w *requestWindow) seqOf(low uint32) uint64 { return w.first + uint64(low-uint32(w.first)) }

// startFill marks the index as built elsewhere: a resume reads the
// window's bounds and its oldest record, and leaves its index to
// FSM.fillIndexes, which would otherwise hold up the start (~0.4 s a
// million records).
func (w *requestWindow) startFill() {
	w.fill = &requestFill{done: make(chan struct{})}
	if w.first < w.next {
		r, ok := w.record(w.first)
		if !ok {
			w.eng.fail(fmt.Errorf("request window: record %d is missing or damaged", w.first))
		}
		w.oldestAt = r.at
	}
}

// fillFrom builds the index from a view of the engine, off the FSM's
// lock, while going is true; Apply waits for it. The window's bounds do
// not move meanwhile: only Apply moves them.
func (w *requestWindow) fillFrom(view requestSource, going func() bool) {
	defer close(w.fill.done)
	index, err := w.indexFrom(view, going)
	w.fill.index, w.fill.ok = index, err == nil && going()
}

// awaitFill waits for the index's fill, if one runs: Apply calls it
// before it takes the FSM's lock, so readers go on meanwhile.
func (w *requestWindow) awaitFill() {
	if w.fill != nil {
		<-w.fill.done
	}
}

// settle takes the filled index, under the FSM's write lock, once the
// fill is over; a fill that did not finish (no view of the engine, a
// failed read) is done again here, from the writer's batch.
func (w *requestWindow) settle() {
	if w.fill == nil {
		return
	}
	<-w.fill.done
	fill := w.fill
	w.fill = nil
	if fill.ok {
		w.index = fill.index
		return
	}
	index, err := w.indexFrom(w.eng.batch, func() bool { return true })
	w.eng.fail(err)
	w.index = index
}

// requestSource is what an index is built from: a view of the engine, or
// the writer's batch.
type requestSource interface {
	Scan(prefix, from []byte, fn func(key, value []byte) bool) error
	Get(key, dst []byte) ([]byte, bool, error)
}

// indexFrom builds the index of the window's records in src, as add
// builds it: each id names its latest record.
func (w *requestWindow) indexFrom(src requestSource, going func() bool) (hashIndex, error) {
	var index hashIndex
	var key, value []byte
	var failed error
	idAt := func(seq uint64) string { // the id of the record at seq, "" if unreadable
		key = logKey(key, seq)
		v, found, err := src.Get(key, value[:0])
		value = v
		id, ok := requestIDOf(v)
		if err != nil || !found || !ok {
			failed = cmp.Or(err, fmt.Errorf("request window: record %d is missing or damaged", seq))
		}
		return id
	}
	err := src.Scan([]byte{requestLogPrefix}, nil, func(k, v []byte) bool {
		seq := binary.BigEndian.Uint64(k[1:])
		id, ok := requestIDOf(v)
		if !ok || seq < w.first || seq >= w.next {
			failed = fmt.Errorf("request window: record %d of [%d, %d) is damaged or out of place", seq, w.first, w.next)
			return false
		}
		h := w.hash(id)
		if low, found := index.lookup(h, func(low uint32) bool { return idAt(w.seqOf(low)) == id }); found {
			index.remove(h, low)
		}
		index.insert(h, uint32(seq))
		return failed == nil && going()
	})
	return index, cmp.Or(err, failed)
}

// record reads the record at seq.
func (w *requestWindow) record(seq uint64) (requestRecord, bool) {
	w.key = logKey(w.key, seq)
	v, found := w.eng.get(w.key)
	if !found {
		return requestRecord{}, false
	}
	return decodeRequest(&decoder{buf: v})
}

// find returns the sequence number and record indexed for id.
func (w *requestWindow) find(id string) (uint64, requestRecord, bool) {
	var rec requestRecord
	low, ok := w.index.lookup(w.hash(id), func(low uint32) bool {
		r, found := w.record(w.seqOf(low))
		if found && r.id == id {
			rec = r
			return true
		}
		return false
	})
	return w.seqOf(low), rec, ok
}

// get returns the indexed record for id.
func (w *requestWindow) get(id string) (requestRecord, bool) {
	_, rec, ok := w.find(id)
	return rec, ok
}

// add appends a record; it replaces an earlier record's index entry for
// the same id, which stays in the log until it is purged.
func (w *requestWindow) add(r requestRecord) {
	h := w.hash(r.id)
	if seq, _, ok := w.find(r.id); ok {
		w.index.remove(h, uint32(seq))
	}
	e := encoder{buf: w.value[:0]}
	encodeRequest(&e, r)
	w.value = e.buf
	w.key = logKey(w.key, w.next)
	w.eng.set(w.key, w.value)
	w.index.insert(h, uint32(w.next))
	if w.first == w.next {
		w.oldestAt = r.at
	}
	w.next++
}

// dropBefore forgets the records applied before at. With latestOnly (a
// cluster raised to LevelRequests) a dropped record's id is forgotten
// only if the record is the id's latest, as an index rebuilt from the
// records that stay finds it; before, every node forgot the id
// altogether, even with a later record of it in the log.
func (w *requestWindow) dropBefore(at int64, latestOnly bool) {
	if w.first == w.next || w.oldestAt >= at {
		return
	}
	r, ok := w.record(w.first)
	for ok && r.at < at {
		if seq, _, found := w.find(r.id); found && (!latestOnly || seq == w.first) {
			w.index.remove(w.hash(r.id), uint32(seq))
		}
		w.key = logKey(w.key, w.first)
		w.eng.delete(w.key)
		if w.first++; w.first == w.next {
			return
		}
		r, ok = w.record(w.first)
	}
	if !ok {
		w.eng.fail(fmt.Errorf("request window: record %d is missing or damaged", w.first))
		return
	}
	w.oldestAt = r.at
}

// oldest reports the apply time of the oldest record, if any.
func (w *requestWindow) oldest() (int64, bool) { return w.oldestAt, w.first < w.next }

func (w *requestWindow) len() int { return int(w.next - w.first) }

func encodeRequest(e *encoder, r requestRecord) {
	e.string(r.id)
	e.string(r.code)
	e.bool(r.existing)
	e.varint(r.at)
	e.uvarint(r.fingerprint)
}

// requestIDOf is the id of an encoded record, a view of v, if the whole
// record decodes.
func requestIDOf(v []byte) (string, bool) {
	d := decoder{buf: v}
	id := d.stringView()
	d.stringView()
	d.bool()
	d.varint()
	d.uvarint()
	return id, d.err == nil
}

func decodeRequest(d *decoder) (requestRecord, bool) {
	r := requestRecord{id: d.string(), code: d.string(), existing: d.bool(), at: d.varint(), fingerprint: d.uvarint()}
	return r, d.err == nil
}

// writeRequests and readRequests are the idempotency records, in apply
// order: the engine's values as they are.
func writeRequests(snap *snapshot, e *encoder, _ byte, flush func(bool)) {
	e.uvarint(uint64(snap.requests))
	n := 0
	snap.fail(snap.engine.Scan([]byte{requestLogPrefix}, nil, func(_, value []byte) bool {
		e.fixed(value)
		flush(false)
		n++
		return true
	}))
	if n != snap.requests {
		snap.fail(fmt.Errorf("the engine's view holds %d request records, the state counted %d", n, snap.requests))
	}
}

func readRequests(st *state, d *decoder, _ byte) error {
	for n := d.count(5); n > 0 && d.err == nil; n-- {
		r, ok := decodeRequest(d)
		if !ok {
			break
		}
		st.requests.add(r)
	}
	return st.eng.err
}

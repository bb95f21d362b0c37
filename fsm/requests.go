package fsm

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
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

// requestWindow is the idempotency window, on disk: each record under its
// sequence number in apply order (requestLogPrefix), which purges drop
// from the front, and under each request id the number of its latest
// record (requestIDPrefix). A record's value is its snapshot encoding.
type requestWindow struct {
	eng         *engine
	first, next uint64 // the log's sequence numbers are [first, next)
	oldestAt    int64  // the apply time of the record at first, when there is one
	key, value  []byte // reused
}

// The engine's tables of the window (store/DESIGN.md, "Keys").
const (
	requestIDPrefix  = 'r'
	requestLogPrefix = 'q'
)

func newRequestWindow(eng *engine) requestWindow { return requestWindow{eng: eng} }

func (w *requestWindow) idKey(id string) []byte {
	w.key = append(append(w.key[:0], requestIDPrefix), id...)
	return w.key
}

func logKey(dst []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst[:0], requestLogPrefix), seq)
}

// get returns the indexed record for id.
func (w *requestWindow) get(id string) (requestRecord, bool) {
	seq, ok := w.eng.get(w.idKey(id))
	if !ok || len(seq) != 8 {
		return requestRecord{}, false
	}
	v, ok := w.eng.get(logKey(w.key, binary.BigEndian.Uint64(seq)))
	if !ok {
		return requestRecord{}, false
	}
	return decodeRequest(&decoder{buf: v})
}

// add appends a record and indexes it under its id, in place of an
// earlier record of the same id, which stays in the log until purged.
func (w *requestWindow) add(r requestRecord) {
	e := encoder{buf: w.value[:0]}
	encodeRequest(&e, r)
	w.value = e.buf
	w.eng.set(logKey(w.key, w.next), w.value)
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], w.next)
	w.eng.set(w.idKey(r.id), seq[:])
	if w.first == w.next {
		w.oldestAt = r.at
	}
	w.next++
}

// dropBefore forgets the records applied before at. Dropping a record
// forgets its id altogether, even if a later record with the same id is
// still in the log: that is how the window has always behaved, and every
// node must keep behaving alike.
func (w *requestWindow) dropBefore(at int64) {
	for w.first < w.next && w.oldestAt < at {
		v, ok := w.eng.get(logKey(w.key, w.first))
		r, valid := decodeRequest(&decoder{buf: v})
		if !ok || !valid {
			w.eng.fail(fmt.Errorf("request window: record %d is missing or damaged", w.first))
			return
		}
		w.eng.delete(logKey(w.key, w.first))
		w.eng.delete(w.idKey(r.id))
		w.first++
		w.oldestAt = w.peekAt()
	}
}

// peekAt is the apply time of the record at first, 0 for none.
func (w *requestWindow) peekAt() int64 {
	if w.first == w.next {
		return 0
	}
	v, _ := w.eng.get(logKey(w.key, w.first))
	r, _ := decodeRequest(&decoder{buf: v})
	return r.at
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

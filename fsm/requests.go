package fsm

import (
	"hash/fnv"
	"hash/maphash"
	"slices"
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
// in apply order, which purges drop from the front, and an index from
// request id to the record. The index holds sequence numbers (the position
// a record would have if nothing had been dropped, modulo 2^32) instead of
// keys, so each record costs its 56 bytes, its id and an index slot.
type requestWindow struct {
	log   []requestRecord
	first uint32 // sequence number of log[0]
	index hashIndex
	seed  maphash.Seed
}

func newRequestWindow(seed maphash.Seed) requestWindow { return requestWindow{seed: seed} }

func (w *requestWindow) hash(id string) uint32 { return uint32(maphash.String(w.seed, id)) }

// find returns the sequence number of the indexed record for id.
func (w *requestWindow) find(id string) (uint32, bool) {
	return w.index.lookup(w.hash(id), func(seq uint32) bool { return w.log[seq-w.first].id == id })
}

// get returns the indexed record for id.
func (w *requestWindow) get(id string) (requestRecord, bool) {
	if seq, ok := w.find(id); ok {
		return w.log[seq-w.first], true
	}
	return requestRecord{}, false
}

// add appends a record; it replaces an earlier record's index entry for
// the same id, which stays in the log until it is purged.
func (w *requestWindow) add(r requestRecord) {
	h := w.hash(r.id)
	if seq, ok := w.find(r.id); ok {
		w.index.remove(h, seq)
	}
	seq := w.first + uint32(len(w.log))
	w.log = append(w.log, r)
	w.index.insert(h, seq)
}

// dropBefore forgets the records applied before at. Dropping a record
// forgets its id altogether, even if a later record with the same id is
// still in the log: that is how the window has always behaved, and every
// node must keep behaving alike.
func (w *requestWindow) dropBefore(at int64) {
	i := 0
	for ; i < len(w.log) && w.log[i].at < at; i++ {
		if seq, ok := w.find(w.log[i].id); ok {
			w.index.remove(w.hash(w.log[i].id), seq)
		}
	}
	w.log = slices.Clone(w.log[i:])
	w.first += uint32(i)
}

// oldest reports the apply time of the oldest record, if any.
func (w *requestWindow) oldest() (int64, bool) {
	if len(w.log) == 0 {
		return 0, false
	}
	return w.log[0].at, true
}

// writeRequests and readRequests are the idempotency records, in apply
// order.
func writeRequests(snap *snapshot, e *encoder, _ byte, flush func(bool)) {
	e.uvarint(uint64(len(snap.requests)))
	for _, r := range snap.requests {
		e.string(r.id)
		e.string(r.code)
		e.bool(r.existing)
		e.varint(r.at)
		e.uvarint(r.fingerprint)
		flush(false)
	}
}

func readRequests(st *state, d *decoder, _ byte) error {
	for n := d.count(5); n > 0 && d.err == nil; n-- {
		r := requestRecord{id: d.string(), code: d.string(), existing: d.bool(), at: d.varint(), fingerprint: d.uvarint()}
		st.requests.add(r)
	}
	return nil
}

package fsm

import (
	"fmt"

	"github.com/linkraft/linkraft/fsm/codes"
)

// The snapshot sections whose state has no file of its own: each a write
// and a read, registered in features (registry.go).

// writeRaised and readRaised are the level the cluster was raised to,
// right after the version (version 8 on).
func writeRaised(snap *snapshot, e *encoder, _ byte, _ func(bool)) { e.uvarint(uint64(snap.raised)) }

func readRaised(st *state, d *decoder, version byte) error {
	st.raised = int(d.uvarint())
	if d.err == nil && (st.raised < LevelBounds || st.raised > EntryLevel) {
		return fmt.Errorf("raised to level %d", st.raised)
	}
	// A raised state is written in the one version its level picks:
	// any other pairing would be written back in another version,
	// leaving out (or adding) sections, and equal states would no
	// longer give equal bytes.
	if want := (&snapshot{level: st.raised}).version(); d.err == nil && want != version {
		return fmt.Errorf("a state raised to level %d in a version %d snapshot (it is written in version %d)",
			st.raised, version, want)
	}
	st.audit.apart = true
	return nil
}

// writeKey and readKey are the code key, the cluster's id and the last
// link id.
func writeKey(snap *snapshot, e *encoder, _ byte, _ func(bool)) {
	e.bool(snap.hasKey)
	e.fixed(snap.key[:])
	e.fixed(snap.clusterID[:])
	e.uvarint(snap.lastID)
}

func readKey(st *state, d *decoder, _ byte) error {
	st.hasKey = d.bool()
	d.fixed(st.key[:])
	d.fixed(st.clusterID[:])
	st.lastID = d.uvarint()
	return nil
}

// writeCounters and readCounters are the next counter value per code
// length, by length.
func writeCounters(snap *snapshot, e *encoder, _ byte, _ func(bool)) {
	e.uvarint(uint64(len(snap.counters)))
	for _, c := range snap.counters {
		e.uvarint(uint64(c.length))
		e.uvarint(c.next)
	}
}

func readCounters(st *state, d *decoder, _ byte) error {
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		length, next := int(d.uvarint()), d.uvarint()
		if d.err == nil && (length < codes.MinCounterLength || length > codes.MaxCounterLength) {
			return fmt.Errorf("counter for code length %d", length)
		}
		st.counters[length] = next
	}
	return nil
}

// writeLinks writes the live links by id, each with its options from
// version 5 on.
func writeLinks(snap *snapshot, e *encoder, version byte, flush func(bool)) {
	e.uvarint(uint64(snap.live))
	for p := range snap.records.n {
		if r := snap.records.at(p); r.live() {
			snap.encodeLink(e, r)
			switch {
			case version >= snapshotV10:
				encodeOptionsExtended(e, snap.opts.get(p))
			case version >= snapshotV5:
				encodeOptions(e, snap.opts.get(p))
			}
			flush(false)
		}
	}
}

// writeTombstones and readTombstones are the deleted codes, sorted.
func writeTombstones(snap *snapshot, e *encoder, _ byte, flush func(bool)) {
	e.uvarint(uint64(len(snap.tombstones)))
	for _, t := range snap.tombstones {
		e.string(t)
		flush(false)
	}
}

func readTombstones(st *state, d *decoder, _ byte) error {
	for n := d.count(1); n > 0 && d.err == nil; n-- {
		st.tombstones.add(d.string())
	}
	return nil
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

// writeServers and readServers are the servers' HTTP addresses, by id.
func writeServers(snap *snapshot, e *encoder, _ byte, _ func(bool)) {
	e.uvarint(uint64(len(snap.servers)))
	for _, sv := range snap.servers {
		e.string(sv.id)
		e.string(sv.httpAddr)
	}
}

func readServers(st *state, d *decoder, _ byte) error {
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		st.servers.addrs[d.string()] = d.string()
	}
	return nil
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

// writeDomains writes the registered domains by name and, from version
// 10, the default domain's redirects.
func writeDomains(snap *snapshot, e *encoder, version byte, _ func(bool)) {
	e.uvarint(uint64(len(snap.domains)))
	for _, d := range snap.domains {
		e.string(d.Name)
		e.string(d.RootRedirect)
		e.string(d.NotFoundRedirect)
		if version >= snapshotV10 {
			e.string(d.InvalidRedirect)
		}
	}
	if version >= snapshotV10 {
		e.string(snap.defaultDomain.RootRedirect)
		e.string(snap.defaultDomain.NotFoundRedirect)
		e.string(snap.defaultDomain.InvalidRedirect)
	}
}

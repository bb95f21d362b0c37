package fsm

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// A feature is one part of the state as the log and the snapshot carry
// it: the entry types that change it, how each decodes and applies, and
// the sections it keeps in a snapshot. Adding a replicated write or a
// piece of state is a row in features, not a case in a switch elsewhere.
type feature struct {
	name     string
	entries  []entry
	sections []section
}

// entry is one or more entry types that decode to the same command type
// and apply alike. Newer types are older ones with more fields: decode
// learns which from typ.
type entry struct {
	types  []commandType
	decode func(d *decoder, typ commandType) Command
	apply  func(s *state, c Command) any
}

// section is one part of the snapshot stream (DESIGN.md, Snapshots). at
// orders the sections of every feature in the stream: it is fixed by the
// format, never by where a feature sits in the table.
type section struct {
	name  string
	at    int
	since byte // the first snapshot version that holds the section
	until byte // the last one; 0: every version from since on
	write writeFunc
	read  readFunc
	// memory: the state holds the section in memory, not in the engine,
	// so a kept state's file copies it (kept.go).
	memory bool
}

// writeFunc encodes a section of a snapshot in the given version; flush
// hands what is encoded to the writer once enough is buffered. Nil for a
// section that only older versions hold, which are read but never
// written.
type writeFunc func(snap *snapshot, e *encoder, version byte, flush func(bool))

// readFunc decodes a section into a state being rebuilt, checking what it
// reads; the sections before it are already in the state.
type readFunc func(st *state, d *decoder, version byte) error

// holds reports whether a snapshot of the given version has the section.
func (sec *section) holds(version byte) bool {
	return version >= sec.since && (sec.until == 0 || version <= sec.until)
}

// encodes and flushed adapt a section's encoder that needs no version;
// decodes a decoder that needs none.
func encodes(f func(*snapshot, *encoder)) writeFunc {
	return func(snap *snapshot, e *encoder, _ byte, _ func(bool)) { f(snap, e) }
}

func flushed(f func(*snapshot, *encoder, func(bool))) writeFunc {
	return func(snap *snapshot, e *encoder, _ byte, flush func(bool)) { f(snap, e, flush) }
}

func decodes(f func(*state, *decoder) error) readFunc {
	return func(st *state, d *decoder, _ byte) error { return f(st, d) }
}

// handles makes an entry of a command type C: decode returns a C for each
// of types, apply takes it back as a C, so neither asserts a type.
func handles[C Command, R any](decode func(*decoder, commandType) C, apply func(*state, C) R,
	types ...commandType) entry {
	return entry{
		types:  types,
		decode: func(d *decoder, typ commandType) Command { return decode(d, typ) },
		apply:  func(s *state, c Command) any { return apply(s, c.(C)) },
	}
}

// anyType adapts a decoder that reads one entry type's fields, whichever
// type byte came before them.
func anyType[C Command](decode func(*decoder) C) func(*decoder, commandType) C {
	return func(d *decoder, _ commandType) C { return decode(d) }
}

// orError adapts an apply that returns a value or an error: the result
// is the one that is set, as Raft hands it to the proposer.
func orError[C, R any](apply func(*state, C) (R, error)) func(*state, C) any {
	return func(s *state, c C) any {
		r, err := apply(s, c)
		if err != nil {
			return err
		}
		return r
	}
}

// features is every part of the replicated state, roughly in the order of
// its snapshot sections. It is a literal that newRegistry reads once, at
// init, and nothing changes after.
var features = []feature{
	{name: "raised level", entries: []entry{
		handles(anyType(decodeRaise), (*state).raise, cmdRaise),
	}, sections: []section{
		{name: "raised level", memory: true, at: 10, since: snapshotV8, write: writeRaised, read: readRaised},
	}},
	{name: "code key", entries: []entry{
		handles(anyType(decodeInit), (*state).init, cmdInit),
	}, sections: []section{
		{name: "key", memory: true, at: 20, since: snapshotV1, write: writeKey, read: readKey},
		{name: "counters", memory: true, at: 30, since: snapshotV1, write: writeCounters, read: readCounters},
	}},
	{name: "links", entries: []entry{
		handles(decodeCreate, (*state).createBatch,
			cmdCreate, cmdCreateKeyed, cmdCreateOptions, cmdCreateImported, cmdCreateExtended),
		handles(decodeDelete, (*state).delete, cmdDelete, cmdDeleteKeyed),
		handles(decodeEditEntry, orError((*state).edit), cmdEdit, cmdEditExtended),
		handles(anyType(decodePurge), (*state).purge, cmdPurge),
		handles(anyType(decodeTagsCommand), orError((*state).applyTags), cmdTags),
		handles(anyType(decodeRename), orError((*state).rename), cmdRename),
	}, sections: []section{
		{name: "links", at: 40, since: snapshotV1, write: writeLinks, read: readLinks},
		{name: "dedupe", at: 45, since: snapshotV1, until: snapshotV1,
			read: func(st *state, d *decoder, _ byte) error { return st.links.decodeDedupeV1(d) }},
	}},
	{name: "tombstones", sections: []section{
		{name: "tombstones", at: 50, since: snapshotV1, write: writeTombstones, read: readTombstones},
	}},
	{name: "clicks and visits", entries: []entry{
		handles(decodeClicks, (*state).addClicks, cmdClicks, cmdClicksVisitors),
		handles(decodeVisit, (*state).visit, cmdVisit, cmdVisitVisitor),
		handles(anyType(decodeVisitsDelete), (*state).deleteVisits, cmdVisitsDelete),
		handles(anyType(decodeOrphanVisitsDelete), (*state).deleteOrphanVisits, cmdOrphanVisitsDelete),
	}, sections: []section{
		{name: "click sequences", memory: true, at: 60, since: snapshotV1, write: writeClickSeqs, read: readClickSeqs},
		{name: "clicks per hour", at: 90, since: snapshotV3,
			write: flushed((*snapshot).encodeClickHours),
			read:  func(st *state, d *decoder, _ byte) error { return st.links.decodeClickHours(d) }},
		{name: "visitors", at: 130, since: snapshotV6,
			write: flushed((*snapshot).encodeVisits), read: decodes(readVisits)},
		{name: "tallies", at: 170, since: snapshotV10,
			write: flushed((*snapshot).encodeTallies), read: decodes(readTallies)},
		{name: "orphan visits", memory: true, at: 175, since: snapshotV10,
			write: flushed((*snapshot).encodeOrphans), read: decodes(readOrphans)},
	}},
	{name: "servers", entries: []entry{
		handles(anyType(decodeServer), func(s *state, c ServerCommand) error {
			return s.servers.set(c)
		}, cmdServer),
		handles(anyType(decodeServerRemoval), func(s *state, c ServerRemovalCommand) error {
			return s.servers.applyRemoval(c, s.raised)
		}, cmdServerRemoval),
	}, sections: []section{
		{name: "servers", memory: true, at: 70, since: snapshotV1, write: writeServers, read: readServers},
		{name: "removed servers", memory: true, at: 75, since: snapshotV11,
			write: encodes((*snapshot).encodeRemovals), read: decodes(readRemovals)},
	}},
	{name: "idempotency records", sections: []section{
		{name: "requests", at: 80, since: snapshotV1, write: writeRequests, read: readRequests},
	}},
	{name: "API keys", entries: []entry{
		handles(decodeKeyCreate, (*state).createKey, cmdKeyCreate, cmdKeyCreateDomains, cmdKeyCreateOwn),
		handles(anyType(decodeKeyRevoke), (*state).revokeKey, cmdKeyRevoke),
	}, sections: []section{
		{name: "keys", memory: true, at: 100, since: snapshotV4,
			write: encodes((*snapshot).encodeKeys), read: decodes(readKeys)},
		{name: "key domains", memory: true, at: 125, since: snapshotV5,
			write: encodes((*snapshot).encodeKeyDomains), read: decodes(readKeyDomains)},
		{name: "authors", at: 127, since: snapshotV12, write: writeAuthors, read: readAuthors},
	}},
	{name: "audit log", entries: []entry{
		handles(anyType(decodeAuditNote), func(s *state, c AuditNoteCommand) error {
			return s.audit.note(c, s.bounded())
		}, cmdAuditNote),
	}, sections: []section{
		{name: "audit", memory: true, at: 110, since: snapshotV4,
			write: func(snap *snapshot, e *encoder, _ byte, flush func(bool)) { encodeAudit(e, snap.audit, flush) },
			read:  func(st *state, d *decoder, version byte) error { return st.audit.decode(d, version, false) }},
		{name: "security audit", memory: true, at: 150, since: snapshotV8,
			write: func(snap *snapshot, e *encoder, _ byte, flush func(bool)) { encodeAudit(e, snap.security, flush) },
			read:  func(st *state, d *decoder, version byte) error { return st.audit.decode(d, version, true) }},
	}},
	{name: "domains", entries: []entry{
		handles(decodeDomain, (*state).setDomain, cmdDomain, cmdDomainExtended),
	}, sections: []section{
		{name: "domains", memory: true, at: 120, since: snapshotV5, write: writeDomains, read: readDomains},
	}},
	{name: "webhooks", entries: []entry{
		handles(anyType(decodeWebhookSet), (*state).setWebhook, cmdWebhookSet),
		handles(anyType(decodeWebhookDelete), (*state).deleteWebhook, cmdWebhookDelete),
		handles(anyType(decodeWebhookAck), (*state).ackWebhook, cmdWebhookAck),
	}, sections: []section{
		{name: "webhooks", memory: true, at: 140, since: snapshotV6,
			write: flushed((*snapshot).encodeWebhooks), read: decodes(readWebhooks)},
	}},
	{name: "certificates", entries: []entry{
		handles(anyType(decodeCertCommand), func(s *state, c CertCommand) error {
			return s.certs.apply(c, s.raised)
		}, cmdCert),
	}, sections: []section{
		{name: "certificates", memory: true, at: 160, since: snapshotV9,
			write: encodes((*snapshot).encodeCerts),
			read:  func(st *state, d *decoder, _ byte) error { return st.certs.decode(d) }},
	}},
}

// registry is features indexed for use: entry types by type byte,
// sections in stream order. It is built once, at init, from the literal
// and never changed after, so it is package state in name only.
var registry = newRegistry(features)

type registryIndex struct {
	// entries is indexed by the type byte: the apply loop finds an
	// entry's row without hashing.
	entries  [256]*entry
	sections []*section
}

// newRegistry indexes the features. Two features claiming one entry type
// or one place in the stream are a programming error, found when the
// package loads.
func newRegistry(fs []feature) registryIndex {
	var r registryIndex
	for _, f := range fs {
		for i := range f.entries {
			e := &f.entries[i]
			for _, typ := range e.types {
				if r.entries[typ] != nil {
					panic(fmt.Sprintf("fsm: entry type %d registered twice (%s)", typ, f.name))
				}
				r.entries[typ] = e
			}
		}
		for i := range f.sections {
			r.sections = append(r.sections, &f.sections[i])
		}
	}
	slices.SortFunc(r.sections, func(a, b *section) int { return cmp.Compare(a.at, b.at) })
	for i := 1; i < len(r.sections); i++ {
		if r.sections[i].at == r.sections[i-1].at {
			panic(fmt.Sprintf("fsm: sections %s and %s share place %d",
				r.sections[i-1].name, r.sections[i].name, r.sections[i].at))
		}
	}
	return r
}

// DecodeCommand parses a log entry into the command that encoded it, as
// the entry's row in features decodes it.
func DecodeCommand(data []byte) (Command, error) {
	_, cmd, err := decodeEntry(data)
	return cmd, err
}

// decodeEntry parses a log entry and returns it with the entry that
// applies it. Decoding is strict: unknown types and trailing bytes are
// errors.
func decodeEntry(data []byte) (*entry, Command, error) {
	if len(data) == 0 {
		return nil, nil, errors.New("decode command: empty entry")
	}
	typ, fields, err := unseal(data)
	if err != nil {
		return nil, nil, err
	}
	h := registry.entries[typ]
	if h == nil {
		return nil, nil, fmt.Errorf("decode command: unknown type %d", typ)
	}
	d := decoder{buf: fields}
	cmd := h.decode(&d, typ)
	if d.err == nil && len(d.buf) != 0 {
		d.fail(fmt.Errorf("%d trailing bytes", len(d.buf)))
	}
	if d.err != nil {
		return nil, nil, fmt.Errorf("decode command type %d: %w", typ, d.err)
	}
	return h, cmd, nil
}

// apply decodes and applies one log entry and returns its result.
func (s *state) apply(data []byte) any {
	h, cmd, err := decodeEntry(data)
	if err != nil {
		return err
	}
	return h.apply(s, cmd)
}

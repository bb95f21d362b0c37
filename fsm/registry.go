package fsm

import (
	"errors"
	"fmt"
)

// A feature is one part of the state as the log and the snapshot carry
// it: the entry types that change it, how each decodes and applies, and
// the sections it keeps in a snapshot. Adding a replicated write or a
// piece of state is a row in features, not a case in a switch elsewhere.
type feature struct {
	name    string
	entries []entry
}

// entry is one or more entry types that decode to the same command type
// and apply alike. Newer types are older ones with more fields: decode
// learns which from typ.
type entry struct {
	types  []commandType
	decode func(d *decoder, typ commandType) Command
	apply  func(s *state, c Command) any
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

// features is every part of the replicated state. It is a literal, read
// only by newRegistry at init and never changed.
var features = []feature{
	{name: "code key", entries: []entry{
		handles(anyType(decodeInit), (*state).init, cmdInit),
	}},
	{name: "links", entries: []entry{
		handles(decodeCreate, (*state).createBatch,
			cmdCreate, cmdCreateKeyed, cmdCreateOptions, cmdCreateImported, cmdCreateExtended),
		handles(decodeDelete, (*state).delete, cmdDelete, cmdDeleteKeyed),
		handles(decodeEditEntry, orError((*state).edit), cmdEdit, cmdEditExtended),
		handles(anyType(decodePurge), (*state).purge, cmdPurge),
		handles(anyType(decodeTagsCommand), orError((*state).applyTags), cmdTags),
	}},
	{name: "clicks and visits", entries: []entry{
		handles(decodeClicks, (*state).addClicks, cmdClicks, cmdClicksVisitors),
		handles(decodeVisit, (*state).visit, cmdVisit, cmdVisitVisitor),
		handles(anyType(decodeVisitsDelete), (*state).deleteVisits, cmdVisitsDelete),
		handles(anyType(decodeOrphanVisitsDelete), (*state).deleteOrphanVisits, cmdOrphanVisitsDelete),
	}},
	{name: "servers", entries: []entry{
		handles(anyType(decodeServer), (*state).setServer, cmdServer),
		handles(anyType(decodeServerRemoval), (*state).applyRemoval, cmdServerRemoval),
	}},
	{name: "API keys", entries: []entry{
		handles(decodeKeyCreate, (*state).createKey, cmdKeyCreate, cmdKeyCreateDomains),
		handles(anyType(decodeKeyRevoke), (*state).revokeKey, cmdKeyRevoke),
	}},
	{name: "audit log", entries: []entry{
		handles(anyType(decodeAuditNote), (*state).note, cmdAuditNote),
	}},
	{name: "domains", entries: []entry{
		handles(decodeDomain, (*state).setDomain, cmdDomain, cmdDomainExtended),
	}},
	{name: "webhooks", entries: []entry{
		handles(anyType(decodeWebhookSet), (*state).setWebhook, cmdWebhookSet),
		handles(anyType(decodeWebhookDelete), (*state).deleteWebhook, cmdWebhookDelete),
		handles(anyType(decodeWebhookAck), (*state).ackWebhook, cmdWebhookAck),
	}},
	{name: "raised level", entries: []entry{
		handles(anyType(decodeRaise), (*state).raise, cmdRaise),
	}},
	{name: "certificates", entries: []entry{
		handles(anyType(decodeCertCommand), (*state).applyCert, cmdCert),
	}},
}

// registry is features indexed for use. Built once at init from the
// literal and never changed after, so it is shared state in name only.
var registry = newRegistry(features)

type registryIndex struct {
	entries map[commandType]*entry
}

// newRegistry indexes the features. Two features claiming one entry type
// are a programming error, found when the package loads.
func newRegistry(fs []feature) registryIndex {
	r := registryIndex{entries: map[commandType]*entry{}}
	for _, f := range fs {
		for i := range f.entries {
			e := &f.entries[i]
			for _, typ := range e.types {
				if _, dup := r.entries[typ]; dup {
					panic(fmt.Sprintf("fsm: entry type %d registered twice (%s)", typ, f.name))
				}
				r.entries[typ] = e
			}
		}
	}
	return r
}

// DecodeCommand parses a log entry into the command that encoded it.
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
	h, ok := registry.entries[typ]
	if !ok {
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

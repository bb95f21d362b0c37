package fsm

import (
	"fmt"
	"slices"
)

// AuditAction is what a recorded write did.
type AuditAction byte

// The audit actions: the kinds of write the audit log records.
const (
	AuditLinkCreate AuditAction = iota + 1
	AuditLinkDelete
	AuditKeyCreate
	AuditKeyRevoke
	AuditLinkEdit
	AuditDomainSet
	AuditDomainRemove
	// AuditBackupRestore is a restore: no entry makes it, the leader
	// writes it into the state it installs (RecordRestore). Snapshots of
	// version 7 on hold it, so only builds of LevelRestoreAudit read it.
	AuditBackupRestore
	// The actions recorded once the cluster is raised to LevelBounds:
	// webhooks registered and removed, and servers joining, leaving or
	// promoted (AuditNoteCommand).
	AuditWebhookSet
	AuditWebhookDelete
	AuditMemberJoin
	AuditMemberLeave
	AuditMemberPromote

	lastAuditAction = AuditMemberPromote
)

var auditActionNames = [...]string{"", "link.create", "link.delete", "key.create", "key.revoke",
	"link.edit", "domain.set", "domain.remove", "backup.restore",
	"webhook.set", "webhook.delete", "member.join", "member.leave", "member.promote"}

// String is the action's name as the audit log's API answer shows it
// ("link.create"); "unknown" for an action this build does not know.
func (a AuditAction) String() string {
	if int(a) < len(auditActionNames) {
		return auditActionNames[a]
	}
	return "unknown"
}

// Security reports whether the action changes who may do what or where
// the data goes (keys, domains, webhooks, restores, membership): what an
// operator needs after an intrusion. Once the cluster is raised to
// LevelBounds these are kept apart from link writes, which can never
// evict them.
func (a AuditAction) Security() bool {
	switch a {
	case AuditLinkCreate, AuditLinkDelete, AuditLinkEdit:
		return false
	}
	return true
}

func (a AuditAction) membership() bool { return a >= AuditMemberJoin && a <= AuditMemberPromote }

// AuditEntry is one write as the audit log keeps it.
type AuditEntry struct {
	At        int64 // unix milliseconds: the clock the write's entry carried
	KeyID     string
	Action    AuditAction
	Workspace string // of the link written; empty for other actions
	Subject   string // the link's code, the key's id, the domain, the webhook's or server's id, or what a restore restored
}

// AuditRetention is how many entries each of the audit log's two rings
// keeps: the newest ones. A count, not an age, so the log's memory is
// bounded whatever the write rate; at 80 bytes or so an entry a ring stays
// under a megabyte.
const AuditRetention = 10_000

// auditRing is a ring of the newest AuditRetention entries.
type auditRing struct {
	entries []AuditEntry
	next    int // where the next entry goes once the ring is full
}

func (r *auditRing) add(e AuditEntry) {
	if len(r.entries) < AuditRetention {
		r.entries = append(r.entries, e)
		return
	}
	r.entries[r.next] = e
	r.next = (r.next + 1) % AuditRetention
}

// oldestFirst returns a copy of the entries in the order they were applied.
func (r *auditRing) oldestFirst() []AuditEntry {
	out := make([]AuditEntry, 0, len(r.entries))
	out = append(out, r.entries[r.next:]...)
	return append(out, r.entries[:r.next]...)
}

// newest returns the i-th newest entry (0 the newest).
func (r *auditRing) newest(i int) AuditEntry {
	return r.entries[(r.next+len(r.entries)-1-i)%len(r.entries)]
}

func ringOf(entries []AuditEntry) auditRing { return auditRing{entries: entries} }

// auditLog is what the cluster's writes left to read after them. Until
// the cluster is raised to LevelBounds it is one ring, as older builds
// keep it (writes holds everything); from then on security actions go to
// a ring of their own, so a flood of link writes evicts only link writes.
type auditLog struct {
	writes   auditRing
	security auditRing
	apart    bool // security actions are kept in security
}

func (a *auditLog) add(e AuditEntry) {
	if a.apart && e.Action.Security() {
		a.security.add(e)
		return
	}
	a.writes.add(e)
}

// keepApart moves the security entries out of the one ring into their
// own, in order, and keeps them there from then on.
func (a *auditLog) keepApart() {
	if a.apart {
		return
	}
	all := a.writes.oldestFirst()
	a.writes, a.apart = auditRing{}, true
	for _, e := range all {
		a.add(e)
	}
}

// holdsRestore reports whether the log holds a restore's entry: while it
// does, the state needs LevelRestoreAudit (state.level). A scan: it is
// asked for each snapshot and join, never on a write.
func (a *auditLog) holdsRestore() bool {
	isRestore := func(e AuditEntry) bool { return e.Action == AuditBackupRestore }
	return slices.ContainsFunc(a.writes.entries, isRestore) || slices.ContainsFunc(a.security.entries, isRestore)
}

// clone is a copy that shares nothing with a.
func (a *auditLog) clone() auditLog {
	return auditLog{writes: ringOf(a.writes.oldestFirst()), security: ringOf(a.security.oldestFirst()), apart: a.apart}
}

// AuditKind selects the entries Audit lists.
type AuditKind byte

// The kinds of audit entry: all of them, only security actions
// (AuditAction.Security), or only link writes.
const (
	AuditAll AuditKind = iota
	AuditSecurity
	AuditLinks
)

// ParseAuditKind reads the kind the API names: "" or "all", "security",
// "links".
func ParseAuditKind(s string) (AuditKind, error) {
	switch s {
	case "", "all":
		return AuditAll, nil
	case "security":
		return AuditSecurity, nil
	case "links":
		return AuditLinks, nil
	}
	return 0, fmt.Errorf("%w: kind must be all, security or links, not %q", ErrInvalidRequest, s)
}

func (k AuditKind) has(a AuditAction) bool {
	return k == AuditAll || (k == AuditSecurity) == a.Security()
}

// AuditQuery selects what Audit returns: entries of one kind, optionally
// only those made with one key, at most Limit of them, newest first.
type AuditQuery struct {
	KeyID string
	Kind  AuditKind
	Limit int
}

// Audit returns the recorded writes the query selects, newest first: the
// two rings merged by time, a security entry first at equal times.
func (f *FSM) Audit(q AuditQuery) []AuditEntry {
	f.mu.RLock()
	defer f.mu.RUnlock()
	a := &f.s.audit
	var out []AuditEntry
	w, s := 0, 0
	for len(out) < q.Limit && (w < len(a.writes.entries) || s < len(a.security.entries)) {
		var e AuditEntry
		if s < len(a.security.entries) && (w == len(a.writes.entries) || a.security.newest(s).At >= a.writes.newest(w).At) {
			e, s = a.security.newest(s), s+1
		} else {
			e, w = a.writes.newest(w), w+1
		}
		if q.Kind.has(e.Action) && (q.KeyID == "" || e.KeyID == q.KeyID) {
			out = append(out, e)
		}
	}
	return out
}

// AuditNoteCommand records a change the state machine does not make
// itself: a server joining, leaving or promoted (the leader changes the
// Raft configuration, then writes this). Apply takes only membership
// actions, so a note can never pass for a key or link write.
type AuditNoteCommand struct {
	Entry AuditEntry
}

// Encode is the note's log entry (Command).
func (c AuditNoteCommand) Encode() []byte {
	var e encoder
	e.byte(byte(cmdAuditNote))
	e.varint(c.Entry.At)
	e.string(c.Entry.KeyID)
	e.byte(byte(c.Entry.Action))
	e.string(c.Entry.Subject)
	return seal(e.buf)
}

// Level is LevelBounds, which brought membership to the audit log
// (Command).
func (AuditNoteCommand) Level() int { return LevelBounds }

func decodeAuditNote(d *decoder) AuditNoteCommand {
	return AuditNoteCommand{Entry: AuditEntry{At: d.varint(), KeyID: d.string(), Action: AuditAction(d.byte()), Subject: d.string()}}
}

// maxAuditSubject bounds a note's subject: a server id.
const maxAuditSubject = 255

func (a *auditLog) note(c AuditNoteCommand, bounded bool) error {
	e := c.Entry
	if !bounded {
		// Only a raised state holds these actions: older builds read
		// none of them (state.level).
		return fmt.Errorf("%w: audit notes need the cluster raised to level %d", ErrInvalidRequest, LevelBounds)
	}
	if !e.Action.membership() || e.Workspace != "" || e.Subject == "" || len(e.Subject) > maxAuditSubject || len(e.KeyID) > maxAuditSubject {
		return fmt.Errorf("%w: an audit note records a membership change of a named server", ErrInvalidRequest)
	}
	a.add(e)
	return nil
}

// encodeAudit writes one ring of the audit log, oldest first.
func encodeAudit(e *encoder, entries []AuditEntry, flush func(bool)) {
	e.uvarint(uint64(len(entries)))
	for _, a := range entries {
		e.varint(a.At)
		e.string(a.KeyID)
		e.byte(byte(a.Action))
		e.string(a.Workspace)
		e.string(a.Subject)
		flush(false)
	}
}

// decode reads one ring of the audit log, oldest first, at most
// AuditRetention entries of actions the version knows: restores from
// version 7 on, the others of LevelBounds in version 8. Once security
// actions are kept apart (version 8), each ring holds only its own.
func (a *auditLog) decode(d *decoder, version byte, security bool) error {
	n := d.count(5)
	if n > AuditRetention {
		return fmt.Errorf("%d audit entries, more than the %d kept", n, AuditRetention)
	}
	last := AuditDomainRemove
	switch {
	case version >= snapshotV8:
		last = lastAuditAction
	case version >= snapshotV7:
		last = AuditBackupRestore
	}
	for ; n > 0 && d.err == nil; n-- {
		e := AuditEntry{At: d.varint(), KeyID: d.string(), Action: AuditAction(d.byte()), Workspace: d.string(), Subject: d.string()}
		if d.err == nil && (e.Action == 0 || e.Action > last || a.apart && e.Action.Security() != security) {
			return fmt.Errorf("audit action %d in the wrong place", e.Action)
		}
		a.add(e)
	}
	return d.err
}

package fsm

import "slices"

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
)

var auditActionNames = [...]string{"", "link.create", "link.delete", "key.create", "key.revoke",
	"link.edit", "domain.set", "domain.remove", "backup.restore"}

// String is the action's name as the audit log's API answer shows it
// ("link.create"); "unknown" for an action this build does not know.
func (a AuditAction) String() string {
	if int(a) < len(auditActionNames) {
		return auditActionNames[a]
	}
	return "unknown"
}

// AuditEntry is one write as the audit log keeps it.
type AuditEntry struct {
	At        int64 // unix milliseconds: the clock the write's entry carried
	KeyID     string
	Action    AuditAction
	Workspace string // of the link written; empty for key actions
	Subject   string // the link's code, the key's id, the domain, or what a restore restored
}

// AuditRetention is how many writes the audit log keeps: the newest ones.
// A count, not an age, so the log's memory is bounded whatever the write
// rate; at 80 bytes or so an entry it stays under a megabyte.
const AuditRetention = 10_000

// auditLog is a ring of the newest AuditRetention entries.
type auditLog struct {
	entries []AuditEntry
	next    int // where the next entry goes once the ring is full
}

func (a *auditLog) add(e AuditEntry) {
	if len(a.entries) < AuditRetention {
		a.entries = append(a.entries, e)
		return
	}
	a.entries[a.next] = e
	a.next = (a.next + 1) % AuditRetention
}

// holdsRestore reports whether the ring holds a restore's entry: while it
// does, the state needs LevelRestoreAudit (state.level). A scan of the
// ring: it is asked for each snapshot and join, never on a write.
func (a *auditLog) holdsRestore() bool {
	return slices.ContainsFunc(a.entries, func(e AuditEntry) bool { return e.Action == AuditBackupRestore })
}

// oldestFirst returns a copy of the entries in the order they were applied.
func (a *auditLog) oldestFirst() []AuditEntry {
	out := make([]AuditEntry, 0, len(a.entries))
	out = append(out, a.entries[a.next:]...)
	return append(out, a.entries[:a.next]...)
}

// Audit returns up to limit recorded writes, newest first, optionally only
// those made with one key.
func (f *FSM) Audit(keyID string, limit int) []AuditEntry {
	f.mu.RLock()
	defer f.mu.RUnlock()
	a := &f.s.audit
	var out []AuditEntry
	for i := len(a.entries) - 1; i >= 0 && len(out) < limit; i-- {
		e := a.entries[(a.next+i)%len(a.entries)]
		if keyID == "" || e.KeyID == keyID {
			out = append(out, e)
		}
	}
	return out
}

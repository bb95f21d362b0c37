package fsm

import "fmt"

// A cluster is raised to a level once every server applies it: the
// leader writes a RaiseCommand (cluster package), and from that entry on
// Apply follows the rules that level brought. Rules that change what an
// existing entry does cannot start with a build: while old and new builds
// run together, both apply the same entries and must come out the same.
// So a build carries the new rule from the start, and applies it only
// once the log says every server does (etcd keeps its cluster version in
// the store for the same reason). A state raised to a level needs that
// level of any server that joins it (state.level).
//
// LevelBounds brought:
//   - a link's history keeps its newest MaxHistory versions;
//   - a webhook's outbox keeps at most MaxWebhookOutboxBytes of events;
//   - at most MaxKeys live keys and MaxDomains registered domains;
//   - the audit log keeps security actions apart from link writes, records
//     webhooks registered and removed, and no longer records anonymous
//     creates (they have no key to hold to account, and would only flush
//     the log).

// RaiseCommand raises the cluster to level To. A raise never lowers it.
type RaiseCommand struct {
	To int
}

// Encode is the raise's log entry (Command).
func (c RaiseCommand) Encode() []byte {
	var e encoder
	e.byte(byte(cmdRaise))
	e.uvarint(uint64(c.To))
	return seal(e.buf)
}

// Level is the level it raises to: only servers that apply it may hold
// the entry (Command).
func (c RaiseCommand) Level() int { return max(c.To, LevelBounds) }

func decodeRaise(d *decoder) RaiseCommand {
	return RaiseCommand{To: int(min(d.uvarint(), 1<<16))}
}

func (s *state) raise(c RaiseCommand) error {
	if c.To < LevelBounds || c.To > EntryLevel {
		return fmt.Errorf("%w: raise to level %d: this build raises to %d to %d", ErrInvalidRequest, c.To, LevelBounds, EntryLevel)
	}
	if c.To <= s.raised {
		return nil
	}
	s.raised = c.To
	s.audit.keepApart()
	return nil
}

// bounded reports whether the state follows LevelBounds's rules.
func (s *state) bounded() bool { return s.raised >= LevelBounds }

// Raised is the level the cluster was raised to; 0 before any raise.
func (f *FSM) Raised() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.raised
}

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

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

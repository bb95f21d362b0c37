package fsm

import (
	"cmp"
	"fmt"
	"slices"
)

// Removal records: which servers an operator removed from the cluster,
// each with the incarnation of the data dir it ran on. Membership is Raft's
// configuration, which says who is in, not who was put out; so a leader
// that did not make a removal itself would add a removed server that still
// runs back as soon as gossip showed it. The record is replicated, so every
// leader reads it before it adds a server (cluster package), and the
// removed server reads it too. A new data dir (a new incarnation) under the
// same id comes back only through an operator's join, which forgets the
// record (ServerRemovalCommand.Forget).

// maxServerField bounds a removal record's id and incarnation: the cluster
// package's are tens of bytes; a longer one is no server's.
const maxServerField = 255

// removedEntry is one removal record in a snapshot.
type removedEntry struct{ id, incarnation string }

func (t *serverTable) applyRemoval(c ServerRemovalCommand, raised int) error {
	if raised < LevelRemovals {
		return fmt.Errorf("%w: removal records need the cluster raised to level %d", ErrInvalidRequest, LevelRemovals)
	}
	if c.ID == "" || len(c.ID) > maxServerField || len(c.Incarnation) > maxServerField {
		return fmt.Errorf("%w: a removal record names a server id of 1 to %d bytes and an incarnation of at most %d", ErrInvalidRequest, maxServerField, maxServerField)
	}
	if c.Forget {
		delete(t.removed, c.ID)
		return nil
	}
	t.removed[c.ID] = c.Incarnation
	delete(t.addrs, c.ID) // no view lists a removed server's HTTP address
	return nil
}

// Removed reports whether an operator removed server id from the cluster,
// and the incarnation of the data dir it was removed with ("" when the
// leader that removed it could not learn it).
func (f *FSM) Removed(id string) (incarnation string, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	incarnation, ok = f.s.servers.removed[id]
	return incarnation, ok
}

// encodeRemovals writes the removal records, by id (snapshot version 11).
func (snap *snapshot) encodeRemovals(e *encoder) {
	e.uvarint(uint64(len(snap.removed)))
	for _, r := range snap.removed {
		e.string(r.id)
		e.string(r.incarnation)
	}
}

// sortRemovals orders the records by id, as a snapshot holds them.
func sortRemovals(rs []removedEntry) {
	slices.SortFunc(rs, func(a, b removedEntry) int { return cmp.Compare(a.id, b.id) })
}

// readRemovals reads what encodeRemovals wrote: ids unique and in
// order, both fields as Apply bounds them.
func readRemovals(st *state, d *decoder) error {
	prev := ""
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		id, incarnation := d.string(), d.string()
		if d.err != nil {
			return d.err
		}
		if id == "" || id <= prev || len(id) > maxServerField || len(incarnation) > maxServerField {
			return fmt.Errorf("removal record %.64q: empty, too long or out of order", id)
		}
		st.servers.removed[id], prev = incarnation, id
	}
	return nil
}

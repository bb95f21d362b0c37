package fsm

import (
	"fmt"
	"strings"

	"github.com/linkraft/linkraft/fsm/codes"
)

// RenameCommand gives a live link a new code in its own domain. The link
// keeps everything else (id, target, options, clicks, visitors, tags);
// its old code is retired as a deleted link's is: a tombstone, never
// handed out again by a create, a hash or the counter, and answered as a
// deleted link from the moment the entry applies.
//
// Edit carries the link's current code, the time and the key, and any
// other fields the same request changes: they apply first, in the same
// entry, so a rename with other changes is one write that happens whole
// or not at all.
type RenameCommand struct {
	NewCode string // qualified (QualifiedCode), in Edit.Code's domain
	Edit    EditCommand
}

// Level is LevelRename, the level that brought renames (Command).
func (RenameCommand) Level() int { return LevelRename }

// Encode is the rename's log entry (Command): the new code, then the
// edit as cmdEditExtended carries it.
func (c RenameCommand) Encode() []byte {
	e := encoder{buf: make([]byte, 0, 64)}
	e.byte(byte(cmdRename))
	e.string(c.NewCode)
	encodeEdit(&e, c.Edit)
	encodeEditExtension(&e, c.Edit)
	return seal(e.buf)
}

func decodeRename(d *decoder) RenameCommand {
	c := RenameCommand{NewCode: d.string()}
	c.Edit = decodeEdit(d, editKnownExtended)
	decodeEditExtension(d, &c.Edit)
	return c
}

// rename applies a RenameCommand and returns the link under its new code.
// Every check comes before any change, and the edit, which checks all of
// its fields before it changes one, comes before the code moves: a
// refused rename leaves the state as it was.
func (s *state) rename(c RenameCommand) (Link, error) {
	if s.raised < LevelRename {
		return Link{}, ErrNotRaised
	}
	e := &c.Edit
	p, ws, err := s.writableLink(e.Code, e.KeyID, e.Now)
	if err != nil {
		return Link{}, err
	}
	if err := s.links.renameRefusal(e.Code, c.NewCode, &s.tombstones); err != nil {
		return Link{}, err
	}
	if e.Fields != 0 {
		if _, err := s.edit(*e); err != nil {
			return Link{}, err
		}
	}
	old := s.links.rename(p, c.NewCode)
	s.tombstones.add(old)
	s.audit.add(AuditEntry{At: e.Now, KeyID: e.KeyID, Action: AuditLinkEdit, Workspace: ws, Subject: c.NewCode})
	l := s.link(p)
	s.hooks.renamed(e.Now, s.bounded(), l, old)
	return l, nil
}

// renameRefusal is why a link of code old may not take code next, nil
// when it may, deleted codes being tombstones. It is Apply's floor, as
// checkCreate is a custom code's: the HTTP layer checks the code's syntax
// in full (fsm/input) first.
func (lt *linkTable) renameRefusal(old, next string, tombstones *tombstoneSet) error {
	domain, code := SplitCode(next)
	oldDomain, _ := SplitCode(old)
	switch {
	case domain != oldDomain:
		return fmt.Errorf("%w: a link keeps its domain when its code changes", ErrInvalidRequest)
	case code == "" || len(next) > maxCodeLen || strings.IndexByte(code, '/') >= 0:
		return fmt.Errorf("%w: the new code must be 1 to %d bytes without '/'", ErrInvalidRequest, maxCodeLen)
	case tombstones.has(next):
		return ErrCodeDeleted
	case codes.IsReserved(code):
		return ErrReserved
	}
	if _, live := lt.lookup(next); live {
		return ErrCodeTaken
	}
	return nil
}

// rename moves the live link at p to code, in the same domain, and
// returns its old code. The code index moves; the workspace list, the
// dedupe index (keyed by workspace, domain and canonical URL) and every
// piece kept by position or link id (options, clicks per hour, visitors,
// tallies) stay as they are. The texts are written anew, as retarget does: the
// old ones stay where readers may still hold them.
func (lt *linkTable) rename(p uint64, code string) string {
	r := lt.recs.mutable(p)
	old := r.code
	lt.codes.remove(old)
	r.setTexts(code, r.url, r.canon)
	lt.codes.insert(r.code, p)
	return old
}

package fsm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrNotRaised refuses a write that uses what LevelVisitRows added
// (tags renamed or deleted, crawlable links, rules on browser or
// address, invalid-link and default-domain redirects) before the
// cluster is raised to it: every server runs a build that knows it,
// and the leader is about to raise the cluster.
var ErrNotRaised = errors.New("the cluster is still being upgraded and cannot store this yet: try again in a few seconds")

// Errors of a TagsCommand.
var (
	// ErrTagNotFound: no link the key may write carries the tag.
	ErrTagNotFound = errors.New("no link carries this tag")
	// ErrTagConflict: a rename to a tag that links the key may write
	// already carry.
	ErrTagConflict = errors.New("a tag with the new name exists")
	// ErrTagTooWide: the tag is on more than MaxTagLinks links.
	ErrTagTooWide = fmt.Errorf("%w: the tag is on more than %d links", ErrInvalidRequest, MaxTagLinks)
)

// MaxTagLinks bounds the links one TagsCommand changes, so that one
// entry never stalls the log: each changed link gets a new Options
// value, and an entry that changed a million would hold every node's
// apply loop for seconds. A larger tag is refused whole (ErrTagTooWide),
// never half renamed.
const MaxTagLinks = 10_000

// TagsCommand renames a tag, or deletes it (NewName ""), on every link
// that KeyID may write (its workspaces and domains, checked here at the
// entry's time), within Workspaces when that is not nil. Tags compare
// case-insensitively; a rename to the same tag in other letter case
// changes its spelling. Entry level LevelVisitRows.
type TagsCommand struct {
	Tag        string
	NewName    string
	Workspaces []string // nil: every workspace the key may write
	KeyID      string
	Now        int64
}

// Level is LevelVisitRows (Command).
func (TagsCommand) Level() int { return LevelVisitRows }

// Encode is the rename's or deletion's log entry (Command).
func (c TagsCommand) Encode() []byte {
	var e encoder
	e.byte(byte(cmdTags))
	e.string(c.Tag)
	e.string(c.NewName)
	e.bool(c.Workspaces != nil)
	encodeStrings(&e, c.Workspaces)
	e.string(c.KeyID)
	e.varint(c.Now)
	return seal(e.buf)
}

func decodeTagsCommand(d *decoder) TagsCommand {
	c := TagsCommand{Tag: d.string(), NewName: d.string()}
	if limited := d.bool(); limited {
		c.Workspaces = decodeStrings(d)
		if c.Workspaces == nil {
			c.Workspaces = []string{}
		}
	} else if n := d.count(1); n != 0 {
		d.fail(fmt.Errorf("%d workspaces in a command for all", n))
	}
	c.KeyID, c.Now = d.string(), d.varint()
	return c
}

// TagsResult is what a TagsCommand changed.
type TagsResult struct {
	Links int // how many links it changed
}

// applyTags renames or deletes a tag on the links the command's key may
// write. It refuses before changing anything: an unknown tag, a rename
// onto an existing tag, more than MaxTagLinks links.
func (s *state) applyTags(c TagsCommand) (TagsResult, error) {
	if s.raised < LevelVisitRows {
		return TagsResult{}, ErrNotRaised
	}
	if c.KeyID == "" { // never anonymous: a key's workspaces bound the change
		return TagsResult{}, ErrUnauthorized
	}
	if err := checkTagName(c.Tag); err != nil {
		return TagsResult{}, err
	}
	if c.NewName != "" {
		if err := checkTagName(c.NewName); err != nil {
			return TagsResult{}, err
		}
	}
	matched, conflict := s.taggedLinks(c)
	switch {
	case len(matched) == 0:
		return TagsResult{}, ErrTagNotFound
	case conflict:
		return TagsResult{}, ErrTagConflict
	case len(matched) > MaxTagLinks:
		return TagsResult{}, ErrTagTooWide
	}
	for _, p := range matched {
		o := *s.opts.get(p) // a new value: readers may hold the old one
		o.Tags = retag(o.Tags, c.Tag, c.NewName)
		s.setOptions(p, &o)
	}
	subject := "tag " + c.Tag + " deleted"
	if c.NewName != "" {
		subject = "tag " + c.Tag + " renamed to " + c.NewName
	}
	s.audit.add(AuditEntry{At: c.Now, KeyID: c.KeyID, Action: AuditLinkEdit, Subject: subject})
	return TagsResult{Links: len(matched)}, nil
}

func checkTagName(t string) error {
	if t == "" || len(t) > MaxTagLen {
		return fmt.Errorf("%w: tag %q", ErrInvalidRequest, t)
	}
	return nil
}

// taggedLinks is the positions, in ascending order, of the links c may
// change that carry c.Tag (at most one past MaxTagLinks, enough to refuse),
// and whether one it may change carries c.NewName as another tag. It reads
// the links the tag index holds under either tag (tagindex.go), each
// checked against its Options.
func (s *state) taggedLinks(c TagsCommand) (matched []uint64, conflict bool) {
	mayChange := func(p uint64) bool {
		r := s.links.recs.walked(p)
		ws := s.links.workspaces.names[r.workspace]
		return (c.Workspaces == nil || slices.Contains(c.Workspaces, ws)) &&
			s.keys.mayWrite(c.KeyID, ws, s.links.domainIndex(r.code), c.Now) &&
			s.keys.seesAuthor(c.KeyID, s.links.authors.ids[r.author])
	}
	for p := range s.opts.tagged(c.Tag) {
		if len(matched) > MaxTagLinks {
			break
		}
		if s.opts.walked(p).HasTag(c.Tag) && mayChange(p) {
			matched = append(matched, p)
		}
	}
	if c.NewName == "" || strings.EqualFold(c.NewName, c.Tag) {
		return matched, false
	}
	for p := range s.opts.tagged(c.NewName) {
		if s.opts.walked(p).HasTag(c.NewName) && mayChange(p) {
			return matched, true
		}
	}
	return matched, false
}

// retag is tags with tag (in any letter case) renamed to newName, or
// removed when newName is "", as a new slice.
func retag(tags []string, tag, newName string) []string {
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		switch {
		case !strings.EqualFold(t, tag):
			out = append(out, t)
		case newName != "":
			out = append(out, newName)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

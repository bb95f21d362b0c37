package fsm

import (
	"strings"
	"sync/atomic"
)

// record is one link as readers get it: its fixed fields and its texts.
// A record a reader holds is never changed: the writer changes a copy
// (recordTable.mutable) and puts it in place at the end of the apply
// batch, so its strings are safe to keep and to use as map keys.
type record struct {
	id         uint64
	createdAt  int64
	expiresAt  int64 // 0: never
	clicks     uint64
	lastAccess int64  // 0: never clicked
	code       string // qualified
	url        string
	canon      string // "": the canonical URL is the URL, or there is none
	workspace  uint32 // index into workspaceTable.names
	pos        uint32 // its position in the table
	flags      uint8
	author     uint16 // the key that created it: index into authorTable.ids; 0: none
}

const (
	flagLive    = 1 << iota // cleared when the link is deleted or purged
	flagDedupe              // the link takes part in dedupe: it has a canonical URL
	flagIndexed             // the dedupe index points to this link
	flagOptions             // the link has Options (state.opts)
	// flagDisabled: the entry that last set the link's expiry was at or
	// after it, so the link was disabled on purpose and the purge keeps
	// it (LevelDisabled).
	flagDisabled
)

func (r *record) live() bool   { return r.flags&flagLive != 0 }
func (r *record) dedupe() bool { return r.flags&flagDedupe != 0 }

// expired reports whether the link is past its expiry at time now.
func (r *record) expired(now int64) bool { return r.expiresAt != 0 && now >= r.expiresAt }

// canonical is the canonical URL a dedupe link was stored with; "" for a
// link that does not take part in dedupe.
func (r *record) canonical() string {
	switch {
	case !r.dedupe():
		return ""
	case r.canon == "":
		return r.url
	}
	return r.canon
}

// setTexts gives r its code, URL and stored canonical URL, copied into
// one string: the arguments may be views of a buffer.
func (r *record) setTexts(code, url, canon string) {
	var b strings.Builder
	b.Grow(len(code) + len(url) + len(canon))
	b.WriteString(code)
	b.WriteString(url)
	b.WriteString(canon)
	s := b.String()
	r.code, r.url, r.canon = s[:len(code)], s[len(code):len(code)+len(url)], s[len(code)+len(url):]
}

// recordTexts reads a record's strings as the text arena once did; the
// strings are the record's own now. Kept for the files that still name
// it (visitors and their rows).
type recordTexts struct{}

func (recordTexts) code(r *record) string      { return r.code }
func (recordTexts) url(r *record) string       { return r.url }
func (recordTexts) canonical(r *record) string { return r.canonical() }

const pageSize = 1024

// page holds pageSize records.
type page [pageSize]*record

// recordTable is every link ever created since the state was built, dead
// ones included, in id order: a link's position never changes, and deleted
// links keep their slot until the state is rebuilt from a snapshot.
//
// The writer changes records through dirty: at(p) of a changed record is
// its copy there, and writeBack puts the copies in place once the apply
// batch is done. Changing a record in place would change it under a
// reader that holds it; a copy per change and per batch, not per field,
// is what a click batch that counts one link many times costs once.
//
// Snapshots share pages with the live table instead of copying them. While
// a snapshot is being written (sharing > 0), the first change to a page it
// may be reading copies the page; pages copied after the snapshot was taken
// (gen == the current generation) are the table's own and change in place.
// Visitors share their pages by the same generation (visitors.go).
type recordTable struct {
	pages   []*page
	gens    []uint64 // per page: the generation it was last copied in
	n       uint32   // records in use
	gen     uint64
	sharing *atomic.Int32 // snapshots still being written
	text    recordTexts
	dirty   map[uint32]*record // the writer's changed records, by position
}

func newRecordTable() recordTable {
	return recordTable{sharing: new(atomic.Int32), dirty: map[uint32]*record{}}
}

// at is the record at p: the writer's own change of it if it has one.
// It is never changed once returned.
func (t *recordTable) at(p uint32) *record {
	if len(t.dirty) > 0 {
		if r, ok := t.dirty[p]; ok {
			return r
		}
	}
	return t.pages[p/pageSize][p%pageSize]
}

// mutable returns the record at p for changing: a copy, which writeBack
// puts in place.
func (t *recordTable) mutable(p uint32) *record {
	if r, ok := t.dirty[p]; ok {
		return r
	}
	cp := *t.pages[p/pageSize][p%pageSize]
	t.dirty[p] = &cp
	return &cp
}

// append adds a record and returns its position.
func (t *recordTable) append(r record) uint32 {
	p := t.n
	if p%pageSize == 0 {
		t.pages = append(t.pages, new(page))
		t.gens = append(t.gens, t.gen)
	}
	t.n++
	r.pos = p
	t.dirty[p] = &r
	return p
}

// writeBack puts the changed records in place, first copying a page a
// snapshot being written may be reading.
func (t *recordTable) writeBack() {
	for p, r := range t.dirty {
		i := p / pageSize
		if t.gens[i] != t.gen && t.sharing.Load() > 0 {
			cp := *t.pages[i]
			t.pages[i], t.gens[i] = &cp, t.gen
		}
		t.pages[i][p%pageSize] = r
	}
	clear(t.dirty)
}

// share returns a view of the table for a snapshot and marks every current
// page shared. release must be called once the snapshot is written.
func (t *recordTable) share() (view recordView, release func()) {
	t.writeBack()
	t.gen++
	t.sharing.Add(1)
	var once atomic.Bool
	release = func() {
		if once.CompareAndSwap(false, true) {
			t.sharing.Add(-1)
		}
	}
	return recordView{pages: append([]*page(nil), t.pages...), n: t.n}, release
}

// recordView is a read-only view of a record table at one point in time.
type recordView struct {
	pages []*page
	n     uint32
}

func (v *recordView) at(p uint32) *record { return v.pages[p/pageSize][p%pageSize] }

package fsm

import (
	"sync/atomic"
	"unsafe"
)

// The links are kept in a form the garbage collector need not look into:
// fixed-size records without pointers, in pages, and every code, URL and
// canonical URL once, packed into large byte chunks (the text arena). A
// million links are then a few hundred chunks and pages instead of
// millions of small objects, and strings handed to readers point into the
// chunks instead of being copies.

// record is one link. Its code, URL and (when it differs from the URL) its
// canonical URL are stored back to back in the text arena at text.
type record struct {
	id         uint64
	createdAt  int64
	expiresAt  int64 // 0: never
	clicks     uint64
	lastAccess int64 // 0: never clicked
	text       textPos
	urlLen     uint32
	canonLen   uint32 // 0: the canonical URL is the URL, or there is none
	workspace  uint32 // index into workspaceTable.names
	codeLen    uint8
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

// textPos locates bytes in the text arena: chunk index and offset.
type textPos struct{ chunk, off uint32 }

const (
	chunkSize = 1 << 20
	// Texts longer than this get a chunk of their own, so a chunk is never
	// mostly wasted by one long URL arriving when it is nearly full.
	ownChunkAbove = chunkSize / 8
)

// textArena stores immutable bytes. Bytes once written are never changed
// or moved, which is what makes strings pointing into them safe to hand
// out and to use as map keys: a chunk stays alive as long as any string
// points into it.
type textArena struct {
	chunks [][]byte
	fill   int // the chunk new texts go to while they fit
}

// add appends the parts back to back and returns where they start.
func (a *textArena) add(parts ...string) textPos {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n > ownChunkAbove {
		a.chunks = append(a.chunks, make([]byte, 0, n))
		return a.write(len(a.chunks)-1, parts)
	}
	if a.fill >= len(a.chunks) || cap(a.chunks[a.fill])-len(a.chunks[a.fill]) < n {
		a.chunks = append(a.chunks, make([]byte, 0, chunkSize))
		a.fill = len(a.chunks) - 1
	}
	return a.write(a.fill, parts)
}

func (a *textArena) write(chunk int, parts []string) textPos {
	pos := textPos{chunk: uint32(chunk), off: uint32(len(a.chunks[chunk]))}
	for _, p := range parts {
		a.chunks[chunk] = append(a.chunks[chunk], p...)
	}
	return pos
}

// str returns n bytes at skip bytes past pos as a string, without copying.
func (a *textArena) str(pos textPos, skip, n int) string {
	if n == 0 {
		return ""
	}
	c := a.chunks[pos.chunk]
	return unsafe.String(&c[int(pos.off)+skip], n)
}

const pageSize = 1024

// page holds pageSize records: exactly 64 KiB, a size the allocator
// wastes nothing on.
type page [pageSize]record

// recordTable is every link ever created since the state was built, dead
// ones included, in id order: a link's position never changes, and deleted
// links keep their slot until the state is rebuilt from a snapshot.
//
// Snapshots share pages with the live table instead of copying them. While
// a snapshot is being written (sharing > 0), the first change to a page it
// may be reading copies the page; pages copied after the snapshot was taken
// (gen == the current generation) are the table's own and change in place.
type recordTable struct {
	pages   []*page
	gens    []uint64 // per page: the generation it was last copied in
	n       uint32   // records in use
	gen     uint64
	sharing *atomic.Int32 // snapshots still being written
	text    textArena
}

func newRecordTable() recordTable { return recordTable{sharing: new(atomic.Int32)} }

func (t *recordTable) at(p uint32) *record { return &t.pages[p/pageSize][p%pageSize] }

// mutable returns the record at p for changing, first copying its page if
// a snapshot being written may be reading it.
func (t *recordTable) mutable(p uint32) *record {
	i := p / pageSize
	if t.gens[i] != t.gen && t.sharing.Load() > 0 {
		cp := *t.pages[i]
		t.pages[i], t.gens[i] = &cp, t.gen
	}
	return &t.pages[i][p%pageSize]
}

// append adds a record and returns its position.
func (t *recordTable) append(r record) uint32 {
	p := t.n
	if p%pageSize == 0 {
		t.pages = append(t.pages, new(page))
		t.gens = append(t.gens, t.gen)
	}
	t.n++
	*t.mutable(p) = r
	return p
}

// share returns a view of the table for a snapshot and marks every current
// page shared. release must be called once the snapshot is written.
func (t *recordTable) share() (view recordView, release func()) {
	t.gen++
	t.sharing.Add(1)
	var once atomic.Bool
	release = func() {
		if once.CompareAndSwap(false, true) {
			t.sharing.Add(-1)
		}
	}
	view = recordView{
		pages: append([]*page(nil), t.pages...),
		n:     t.n,
		text:  textArena{chunks: append([][]byte(nil), t.text.chunks...), fill: t.text.fill},
	}
	return view, release
}

// recordView is a read-only view of a record table at one point in time.
type recordView struct {
	pages []*page
	n     uint32
	text  textArena
}

func (v *recordView) at(p uint32) *record { return &v.pages[p/pageSize][p%pageSize] }

// Strings of a record, pointing into the arena.
func (a *textArena) code(r *record) string { return a.str(r.text, 0, int(r.codeLen)) }
func (a *textArena) url(r *record) string  { return a.str(r.text, int(r.codeLen), int(r.urlLen)) }

// canonical is the canonical URL a dedupe link was stored with; "" for a
// link that does not take part in dedupe.
func (a *textArena) canonical(r *record) string {
	switch {
	case !r.dedupe():
		return ""
	case r.canonLen == 0:
		return a.url(r)
	}
	return a.str(r.text, int(r.codeLen)+int(r.urlLen), int(r.canonLen))
}

package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"iter"
	"strings"

	"github.com/linkraft/linkraft/fsm/codes"
)

// targetIndex finds every live link of a target: the links that share a
// workspace, a domain and a canonical target URL. It is what lets a
// dedupe create find a link whatever made it (DESIGN.md, "Dedupe").
//
// It is the engine's `t` table (store/DESIGN.md, "Keys"): one key per
// live link, the target's prefix (targetPrefixKey) and the link's
// position, big-endian; the value is empty but for the target's dedupe
// link marked indexed (flagIndexed, the rule before LevelTargets), whose
// value is the byte indexedMark, so that rule's lookup and a restore's
// check of it read the keys alone, no record. A target's links are the
// keys of its prefix, in position (= id) order, so the oldest is the
// first key: dedupe's scan
// stops at the first link that redirects, and nothing per link or per
// target is in memory. A create is a set and a removal a delete through
// the apply batch, whatever the number of links of the target; the
// entries after it in the same batch read them (the batch is indexed).
// The key holds the canonical URL's exact bytes, not a hash of them: a
// hash with a seed of each node's own would tie the keys to this node's
// state (as positions and workspace numbers are tied to its records), and
// one without a secret would let chosen URLs collide.
//
// Nothing here is written to a snapshot: a restore writes the keys as it
// inserts the links, so snapshots of every version restore with it.
type targetIndex struct {
	eng    *engine
	key    []byte // reused by the writer's sets, deletes and lookups
	marked []byte // the value of an indexed link's key: indexedMark
	memo   indexedMemo
}

// indexedMemo is the last answer of indexedOf (or of a walk that noted
// it): a new dedupe link's create looks up its target's indexed link
// before the link is made (to return it) and again after (to take its
// mark), with nothing in between that can change it but what add and
// remove see. It saves the second scan.
type indexedMemo struct {
	valid  bool
	target []byte // the target's prefix
	p      uint64
	ok     bool
}

// targetPrefix is the engine's table of links by target.
const targetPrefix = 't'

func newTargetIndex(eng *engine) targetIndex {
	return targetIndex{eng: eng, marked: []byte{indexedMark}}
}

// targetPrefixKey appends the prefix of a target's keys: the table byte,
// the workspace (4 bytes, big-endian), then the domain and the canonical
// URL, each after its length (uvarint), so that no target's prefix is
// the start of another's.
func targetPrefixKey(dst []byte, workspace uint32, domain, canonical string) []byte {
	dst = binary.BigEndian.AppendUint32(append(dst, targetPrefix), workspace)
	dst = append(binary.AppendUvarint(dst, uint64(len(domain))), domain...)
	return append(binary.AppendUvarint(dst, uint64(len(canonical))), canonical...)
}

func (t *targetIndex) keyOf(p uint64, workspace uint32, domain, canonical string) []byte {
	t.key = appendPosition(targetPrefixKey(t.key[:0], workspace, domain, canonical), p)
	return t.key
}

// indexedMark is the value of the key of a target's indexed link.
const indexedMark = 1

// add puts the live link at p under its target, marked indexed or not;
// for a link already there, it sets the mark.
func (t *targetIndex) add(p uint64, workspace uint32, domain, canonical string, indexed bool) {
	var v []byte
	if indexed {
		v = t.marked
	}
	if indexed || t.memo.ok && t.memo.p == p {
		t.memo.valid = false
	}
	t.eng.set(t.keyOf(p, workspace, domain, canonical), v)
}

// remove takes the link at p from under its target.
func (t *targetIndex) remove(p uint64, workspace uint32, domain, canonical string) {
	t.memo.valid = false
	t.eng.delete(t.keyOf(p, workspace, domain, canonical))
}

// links lists the live links of a target, oldest first, each with its
// mark: a scan of its prefix, through the writer's batch (only the writer
// looks targets up). The caller may read the state while it walks, but
// not change it.
func (t *targetIndex) links(workspace uint32, domain, canonical string) iter.Seq2[uint64, bool] {
	return func(yield func(uint64, bool) bool) {
		prefix := targetPrefixKey(nil, workspace, domain, canonical)
		t.eng.scan(prefix, nil, func(key, value []byte) bool {
			p, indexed := targetEntry(key, value, len(prefix))
			return yield(p, indexed)
		})
	}
}

// indexedOf is the target's link marked indexed, if any.
func (t *targetIndex) indexedOf(workspace uint32, domain, canonical string) (uint64, bool) {
	m := &t.memo
	if t.key = targetPrefixKey(t.key[:0], workspace, domain, canonical); m.valid && bytes.Equal(m.target, t.key) {
		return m.p, m.ok
	}
	for p, indexed := range t.links(workspace, domain, canonical) {
		if indexed {
			t.note(workspace, domain, canonical, p, true)
			return p, true
		}
	}
	t.note(workspace, domain, canonical, 0, false)
	return 0, false
}

// note records the target's indexed link, found by a walk of all its
// links (or none), for indexedOf.
func (t *targetIndex) note(workspace uint32, domain, canonical string, p uint64, ok bool) {
	t.memo = indexedMemo{valid: true, target: targetPrefixKey(t.memo.target[:0], workspace, domain, canonical), p: p, ok: ok}
}

// targetEntry is the position and the mark of a key of the table whose
// target prefix is n bytes long.
func targetEntry(key, value []byte, n int) (p uint64, indexed bool) {
	p, ok := positionAfter(key, n)
	if !ok || len(value) > 1 || len(value) == 1 && value[0] != indexedMark {
		panic(fmt.Sprintf("fsm: the engine holds a damaged target key %x (value %x)", key, value))
	}
	return p, len(value) == 1
}

// targetPrefixLen is the length of the target prefix of a key of the
// table, read from its lengths; -1 for a damaged key.
func targetPrefixLen(key []byte) int {
	n := 5        // the table and the workspace
	for range 2 { // the domain, the canonical URL
		if n > len(key) {
			return -1
		}
		size, read := binary.Uvarint(key[n:])
		if read <= 0 || size > uint64(len(key)-n-read) {
			return -1
		}
		n += read + int(size)
	}
	return n
}

// indexedTwice is the position of a link marked indexed under the same
// target as another, if any: a walk of the whole table, which a restore
// makes once instead of a lookup for each indexed link.
func (t *targetIndex) indexedTwice() (uint64, bool) {
	var prev []byte // the last indexed key's target prefix
	var twice uint64
	found := false
	t.eng.scan([]byte{targetPrefix}, nil, func(key, value []byte) bool {
		n := targetPrefixLen(key)
		if n < 0 {
			panic(fmt.Sprintf("fsm: the engine holds a damaged target key %x", key))
		}
		p, indexed := targetEntry(key, value, n)
		if !indexed {
			return true
		}
		target := key[:n]
		if bytes.Equal(target, prev) {
			twice, found = p, true
			return false
		}
		prev = append(prev[:0], target...)
		return true
	})
	return twice, found
}

// canonicalTarget is codes.Canonicalize of url, or url where that fails
// (no create can ask for such a URL: its proposer could not canonicalise
// it either). Most stored URLs are already canonical, and restore finds
// the target of every link: plainlyCanonical spares those the parse,
// which would make a restore several times slower.
func canonicalTarget(url string) string {
	if plainlyCanonical(url) {
		return url
	}
	canonical, err := codes.Canonicalize(url)
	if err != nil {
		return url
	}
	return canonical
}

// plainlyCanonical reports, for a narrow and common form, that
// codes.Canonicalize(url) is url itself: a lowercase http or https scheme
// and host of letters, digits, dots and hyphens (no port, user or IPv6);
// a path of unreserved characters and a few sub-delimiters (no escapes,
// no empty segment, no trailing '/' but the root); an optional query of
// such characters, no empty parameter, keys in order; no fragment. Any
// other URL takes the full canonicalisation (TestPlainlyCanonicalAgrees
// and FuzzPlainlyCanonical hold the two together).
func plainlyCanonical(url string) bool {
	rest, ok := strings.CutPrefix(url, "https://")
	if !ok {
		if rest, ok = strings.CutPrefix(url, "http://"); !ok {
			return false
		}
	}
	slash := strings.IndexByte(rest, '/')
	if slash <= 0 {
		return false
	}
	host, rest := rest[:slash], rest[slash:]
	for i := range len(host) {
		if c := host[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	path, query, hasQuery := strings.Cut(rest, "?")
	if !plainChars(path, false) || strings.Contains(path, "//") || len(path) > 1 && path[len(path)-1] == '/' {
		return false
	}
	return !hasQuery || plainQuery(query)
}

// plainQuery reports whether a raw query is one Canonicalize keeps as it
// is: plain characters, no empty parameter, keys in order.
func plainQuery(query string) bool {
	if !plainChars(query, true) {
		return false
	}
	for prev := ""; ; {
		param, rest, more := strings.Cut(query, "&")
		key, _, _ := strings.Cut(param, "=")
		if param == "" || key < prev {
			return false
		}
		if !more {
			return true
		}
		prev, query = key, rest
	}
}

// plainChars reports whether s holds only unreserved characters, '/',
// and the sub-delimiters "=+,:@" (none of which net/url escapes or
// Canonicalize rewrites), and, in a query, '?' and '&'.
func plainChars(s string, query bool) bool {
	for i := range len(s) {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '/', c == '=', c == '+', c == ',', c == ':', c == '@':
		case query && (c == '?' || c == '&'):
		default:
			return false
		}
	}
	return true
}

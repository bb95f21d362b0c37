package fsm

import (
	"iter"
	"strings"

	"github.com/linkraft/linkraft/fsm/codes"
)

// targetLinks finds every live link of a target: the links that share a
// workspace, a domain and a canonical target URL (a target key). It is
// what lets a dedupe create find a link whatever made it (DESIGN.md,
// "Dedupe").
//
// heads maps each target key to its oldest live link; the links of one
// key form a circular list in position (= id) order, kept per position
// in ring. So a key costs one index slot whatever its number of links, a
// new link joins its list at the tail in constant time (it has the
// highest position), and a removal unlinks in constant time: thousands
// of links to one URL never make a create or a purge walk them. Only an
// edit that moves an older link to another target walks that target's
// list to keep it in order.
//
// Nothing here is written to a snapshot: restore rebuilds it as it
// inserts the links, so snapshots of every version restore with it.
type targetLinks struct {
	heads hashIndex
	ring  []*ringPage // by record position; slots of dead links are unused
}

// ringLinks is a link's neighbours in its target's list; a link alone in
// its list is its own neighbour.
type ringLinks struct{ prev, next uint32 }

// ringPage holds the neighbours of pageSize positions: 8 KiB, no
// pointers.
type ringPage [pageSize]ringLinks

func (t *targetLinks) at(p uint32) *ringLinks {
	for int(p/pageSize) >= len(t.ring) {
		t.ring = append(t.ring, new(ringPage))
	}
	return &t.ring[p/pageSize][p%pageSize]
}

// head is the oldest link of the key with hash h that match confirms.
func (t *targetLinks) head(h uint32, match func(p uint32) bool) (uint32, bool) {
	return t.heads.lookup(h, match)
}

// add puts the live link at p in the list of its key (hash h; match
// confirms a position holds the key).
func (t *targetLinks) add(p, h uint32, match func(p uint32) bool) {
	head, ok := t.head(h, match)
	if !ok {
		*t.at(p) = ringLinks{prev: p, next: p}
		t.heads.insert(h, p)
		return
	}
	// The first link after p in position order, or head when p is the
	// newest (its place is then at the tail, before the head).
	after := head
	if tail := t.at(head).prev; p < tail {
		for after = head; after < p; after = t.at(after).next {
		}
	}
	before := t.at(after).prev
	*t.at(p) = ringLinks{prev: before, next: after}
	t.at(before).next, t.at(after).prev = p, p
	if p < head {
		t.heads.remove(h, head)
		t.heads.insert(h, p)
	}
}

// remove takes the link at p out of the list of its key (hash h).
func (t *targetLinks) remove(p, h uint32) {
	n := t.at(p)
	if n.next == p {
		t.heads.remove(h, p)
		return
	}
	t.at(n.prev).next, t.at(n.next).prev = n.next, n.prev
	// In a list in position order the head is the one link whose
	// predecessor (the tail) comes after it.
	if n.prev > p {
		t.heads.remove(h, p)
		t.heads.insert(h, n.next)
	}
}

// links lists the links of the key whose oldest link is head, oldest
// first.
func (t *targetLinks) links(head uint32) iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		for p := head; ; {
			if !yield(p) {
				return
			}
			if p = t.at(p).next; p == head {
				return
			}
		}
	}
}

// keys is the number of target keys held.
func (t *targetLinks) keys() int { return t.heads.len() }

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

package fsm

import "iter"

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

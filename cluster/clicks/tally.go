package clicks

import "github.com/linkraft/linkraft/fsm"

// tally holds one flush interval's clicks, by code and then by
// visitor. A map keyed by code and visitor together would do, but hashing
// two strings and a struct on every redirect costs twice what hashing the
// code alone does (about 37 against 20 ns); most codes see only a few
// kinds of visitor in an interval, so each code keeps a short list and
// sends any further kinds to overflow. Its slices are kept across reset,
// so that a node in a steady state counts without allocating.
type tally struct {
	byCode   map[string]int32 // index into codes
	codes    []codeClicks
	overflow map[codeVisitor]uint64
}

// listedVisitors is how many kinds of visitor a code keeps in its list
// before overflow: enough for one link's browsers and countries in a
// second of ordinary traffic, short enough to scan quickly.
const listedVisitors = 8

type codeClicks struct {
	code     string
	visitors []visitorClicks
}

type visitorClicks struct {
	visitor fsm.Visitor
	count   uint64
}

func newTally() *tally {
	return &tally{byCode: map[string]int32{}, overflow: map[codeVisitor]uint64{}}
}

// add counts n clicks of code by visitor.
func (t *tally) add(code string, visitor fsm.Visitor, n uint64) {
	i, ok := t.byCode[code]
	if !ok {
		i = int32(len(t.codes))
		if len(t.codes) < cap(t.codes) {
			t.codes = t.codes[:i+1] // reuse the entry and its visitor list
		} else {
			t.codes = append(t.codes, codeClicks{})
		}
		t.codes[i].code = code
		t.codes[i].visitors = t.codes[i].visitors[:0]
		t.byCode[code] = i
	}
	c := &t.codes[i]
	for k := range c.visitors {
		if c.visitors[k].visitor == visitor {
			c.visitors[k].count += n
			return
		}
	}
	if len(c.visitors) < listedVisitors {
		c.visitors = append(c.visitors, visitorClicks{visitor, n})
		return
	}
	t.overflow[codeVisitor{code, visitor}] += n
}

// len is the number of distinct code and visitor pairs counted.
func (t *tally) len() int {
	n := len(t.overflow)
	for i := range t.codes {
		n += len(t.codes[i].visitors)
	}
	return n
}

// total is the number of clicks counted.
func (t *tally) total() uint64 {
	var total uint64
	t.each(func(_ codeVisitor, n uint64) { total += n })
	return total
}

// each calls f with every pair and its count.
func (t *tally) each(f func(key codeVisitor, n uint64)) {
	for i := range t.codes {
		c := &t.codes[i]
		for _, v := range c.visitors {
			f(codeVisitor{c.code, v.visitor}, v.count)
		}
	}
	for key, n := range t.overflow {
		f(key, n)
	}
}

// counts copies the tally into a map, as the clicks file stores it.
func (t *tally) counts() map[codeVisitor]uint64 {
	m := make(map[codeVisitor]uint64, t.len())
	t.each(func(key codeVisitor, n uint64) { m[key] += n })
	return m
}

// reset empties the tally, keeping its memory for the next interval. The
// kept entries still refer to old codes until reused: at most the busiest
// interval's worth.
func (t *tally) reset() {
	clear(t.byCode)
	clear(t.overflow)
	t.codes = t.codes[:0]
}

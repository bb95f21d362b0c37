package main

import (
	"container/heap"
	"slices"
)

// resolve turns rows that may overlap into sorted, disjoint spans. The
// source lists a wide block and then, for parts of it, narrower rows with
// other countries (a provider's geofeed refining its registry entry), so
// where rows overlap the narrowest wins; between rows of equal width the
// later one in the file wins, which keeps the result deterministic.
func resolve(rows []span) []span {
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return rows[a].from.cmp(rows[b].from) })

	// Boundaries are where a row starts or where one ends; between two
	// neighbouring boundaries the set of covering rows does not change.
	var points []u128
	for _, r := range rows {
		points = append(points, r.from)
		if r.to != (u128{^uint64(0), ^uint64(0)}) {
			points = append(points, r.to.next())
		}
	}
	slices.SortFunc(points, u128.cmp)
	points = slices.Compact(points)

	var out []span
	active := &cover{rows: rows}
	next := 0
	for k, p := range points {
		for next < len(order) && rows[order[next]].from == p {
			heap.Push(active, order[next])
			next++
		}
		for active.Len() > 0 && rows[active.idx[0]].to.cmp(p) < 0 {
			heap.Pop(active)
		}
		if active.Len() == 0 {
			continue
		}
		top := rows[active.idx[0]]
		to := top.to
		if k+1 < len(points) {
			to = points[k+1].prev()
		}
		out = append(out, span{from: p, to: to, code: top.code})
	}
	return out
}

// cover is a heap of the rows covering the current boundary, narrowest (then
// latest in the file) on top. Rows that have ended are dropped lazily when
// they reach the top.
type cover struct {
	rows []span
	idx  []int
}

func (c *cover) Len() int { return len(c.idx) }

func (c *cover) Less(i, j int) bool {
	a, b := c.rows[c.idx[i]], c.rows[c.idx[j]]
	if w := width(a).cmp(width(b)); w != 0 {
		return w < 0
	}
	return c.idx[i] > c.idx[j]
}

func (c *cover) Swap(i, j int) { c.idx[i], c.idx[j] = c.idx[j], c.idx[i] }

func (c *cover) Push(x any) { c.idx = append(c.idx, x.(int)) }

func (c *cover) Pop() any {
	x := c.idx[len(c.idx)-1]
	c.idx = c.idx[:len(c.idx)-1]
	return x
}

// width is to-from of a span, a 128-bit subtraction.
func width(s span) u128 {
	lo := s.to.lo - s.from.lo
	hi := s.to.hi - s.from.hi
	if s.to.lo < s.from.lo {
		hi--
	}
	return u128{hi, lo}
}

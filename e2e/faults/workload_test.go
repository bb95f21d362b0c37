package faults

import (
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"
)

// workload runs concurrent clients against random nodes and records every
// operation in the cluster's history.
type workload struct {
	c       *cluster
	seed    uint64
	clients int

	mu    sync.Mutex
	known []string // every acknowledged code
	// deletable is the acknowledged unique and custom codes not yet
	// deleted; edits pick from it too (a dedupe link is not edited: its
	// new target would move it out of its URL's dedupe entry).
	deletable []string
	races     int // custom-code races started
}

// sharedURLs is how many URLs the dedupe creates share.
const sharedURLs = 5

// maxOpsPerClient bounds each client's loop besides the stop channel.
const maxOpsPerClient = 200000

// run starts the clients; they stop when stop is closed or at deadline.
// wait blocks until all of them returned.
func (w *workload) run(stop <-chan struct{}, deadline time.Time) (wait func()) {
	var wg sync.WaitGroup
	for i := range w.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := mrand.New(mrand.NewPCG(w.seed, uint64(i)))
			for n := 0; n < maxOpsPerClient && time.Now().Before(deadline); n++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(5+rng.IntN(10)) * time.Millisecond):
				}
				w.step(i, n, rng)
			}
		}()
	}
	return wg.Wait
}

// step performs one randomly chosen operation.
func (w *workload) step(proc, n int, rng *mrand.Rand) {
	nodes := w.c.nodes() // membership changes while the clients run
	node := nodes[rng.IntN(len(nodes))]
	switch r := rng.IntN(100); {
	case r < 30:
		op := w.c.cl.createOp(proc, Create, node, map[string]any{"url": fmt.Sprintf("https://example.com/u/%d/%d/%d", w.seed, proc, n)})
		w.learn(op, true)
		if op.Status == 201 && rng.IntN(5) == 0 {
			// Read-after-write through another node at once.
			w.c.cl.readOp(proc, Redirect, nodes[rng.IntN(len(nodes))], op.Code)
		}
	case r < 40:
		op := w.c.cl.createOp(proc, Dedupe, node, map[string]any{"url": fmt.Sprintf("https://example.com/d/%d/%d", w.seed, rng.IntN(sharedURLs)), "workspace": "w", "dedupe": true})
		w.learn(op, false)
	case r < 45:
		w.customRace(proc, rng)
	case r < 75:
		if code, ok := w.pick(rng); ok {
			w.c.cl.readOp(proc, Redirect, node, code)
		}
	case r < 85:
		if code, ok := w.pick(rng); ok {
			w.c.cl.readOp(proc, Read, node, code)
		}
	case r < 90:
		if code, ok := w.pickEditable(rng); ok {
			w.editThenRead(proc, n, node, code, rng)
		}
	default:
		if code, ok := w.takeDeletable(rng); ok {
			w.deleteThenRead(proc, node, code, rng)
		}
	}
}

// customRace sends one custom code from three clients at once, each with
// its own URL, to random nodes.
func (w *workload) customRace(proc int, rng *mrand.Rand) {
	w.mu.Lock()
	w.races++
	race := w.races
	w.mu.Unlock()
	code := fmt.Sprintf("c%d-%d", w.seed%100000, race)
	var wg sync.WaitGroup
	nodes := w.c.nodes()
	for j := range 3 {
		node := nodes[rng.IntN(len(nodes))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			op := w.c.cl.createOp(100+proc*3+j, Custom, node, map[string]any{"url": fmt.Sprintf("https://example.com/c/%s/%d", code, j), "custom_code": code})
			w.learn(op, true)
		}()
	}
	wg.Wait()
}

func (w *workload) learn(op Op, deletable bool) {
	if op.Status != 201 && op.Status != 200 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.known = append(w.known, op.Code)
	if deletable && op.Status == 201 {
		w.deletable = append(w.deletable, op.Code)
	}
}

// pick returns a known code: half of the time one of the newest.
func (w *workload) pick(rng *mrand.Rand) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.known) == 0 {
		return "", false
	}
	if rng.IntN(2) == 0 {
		return w.known[max(0, len(w.known)-1-rng.IntN(5))], true
	}
	return w.known[rng.IntN(len(w.known))], true
}

func (w *workload) takeDeletable(rng *mrand.Rand) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.deletable) < 10 {
		return "", false
	}
	i := rng.IntN(len(w.deletable))
	code := w.deletable[i]
	w.deletable = append(w.deletable[:i], w.deletable[i+1:]...)
	return code, true
}

// deleteThenRead deletes a code and, once the delete is acknowledged,
// reads it at once on the node that answered and on a random node.
func (w *workload) deleteThenRead(proc int, node *fnode, code string, rng *mrand.Rand) {
	if op := w.c.cl.deleteOp(proc, node, code); op.Status != 204 {
		return
	}
	w.c.cl.readOp(proc, Redirect, node, code)
	nodes := w.c.nodes()
	w.c.cl.readOp(proc, Redirect, nodes[rng.IntN(len(nodes))], code)
}

// pickEditable returns an acknowledged unique or custom code not taken for
// deletion: half of the time one of the newest.
func (w *workload) pickEditable(rng *mrand.Rand) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.deletable) == 0 {
		return "", false
	}
	if rng.IntN(2) == 0 {
		return w.deletable[max(0, len(w.deletable)-1-rng.IntN(5))], true
	}
	return w.deletable[rng.IntN(len(w.deletable))], true
}

// editThenRead points a code at a fresh unique URL and, once the edit is
// answered 200, sometimes reads it at once through another node.
func (w *workload) editThenRead(proc, n int, node *fnode, code string, rng *mrand.Rand) {
	url := fmt.Sprintf("https://example.com/e/%d/%d/%d", w.seed, proc, n)
	if op := w.c.cl.editOp(proc, node, code, url); op.Status != 200 || rng.IntN(5) != 0 {
		return
	}
	nodes := w.c.nodes()
	other := nodes[rng.IntN(len(nodes))]
	if i := indexOf(nodes, node); i >= 0 && len(nodes) > 1 {
		other = nodes[(i+1+rng.IntN(len(nodes)-1))%len(nodes)]
	}
	w.c.cl.readOp(proc, Redirect, other, code)
}

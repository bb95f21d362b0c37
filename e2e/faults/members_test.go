package faults

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// memberList is a run's nodes: every node the run ever started (cleanup
// kills them, their logs go to the artifacts, the process checker reads
// them) and the current members, which the workload, the final reads, the
// exports, the leader checks and the checkers use.
//
// The workload reads the members while the nemesis changes them. A change
// publishes a new slice and never writes into one it handed out, so a
// snapshot stays as it was for whoever holds it.
type memberList struct {
	mu      sync.Mutex
	all     []*fnode
	current []*fnode
}

// snapshot returns the current members (do not modify it).
func (l *memberList) snapshot() []*fnode {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clip(l.current)
}

// everyNode returns every node registered, members or not.
func (l *memberList) everyNode() []*fnode {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clip(l.all)
}

// register records a node the run started (or is about to); it is not a
// member until join.
func (l *memberList) register(n *fnode) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if slices.ContainsFunc(l.all, func(m *fnode) bool { return m.id == n.id }) {
		return fmt.Errorf("node %s registered twice", n.id)
	}
	l.all = append(slices.Clip(l.all), n)
	return nil
}

// join makes a registered node a member.
func (l *memberList) join(n *fnode) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !slices.Contains(l.all, n):
		return fmt.Errorf("node %s joins without being registered", n.id)
	case slices.Contains(l.current, n):
		return fmt.Errorf("node %s is already a member", n.id)
	}
	l.current = append(slices.Clip(l.current), n)
	return nil
}

// leave ends a node's membership; it stays registered.
func (l *memberList) leave(n *fnode) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.Index(l.current, n)
	if i < 0 {
		return fmt.Errorf("node %s is not a member", n.id)
	}
	l.current = slices.Concat(l.current[:i], l.current[i+1:])
	return nil
}

// isMember reports whether n is a current member.
func (l *memberList) isMember(n *fnode) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.current, n)
}

func TestMemberList(t *testing.T) {
	var l memberList
	nodes := make([]*fnode, 5)
	for i := range nodes {
		nodes[i] = &fnode{id: fmt.Sprintf("n%d", i+1)}
	}
	ids := func(ns []*fnode) string {
		var out []string
		for _, n := range ns {
			out = append(out, n.id)
		}
		return fmt.Sprint(out)
	}
	for _, n := range nodes[:3] {
		if err := l.register(n); err != nil {
			t.Fatal(err)
		}
		if err := l.join(n); err != nil {
			t.Fatal(err)
		}
	}
	before := l.snapshot()

	// Refusals.
	if err := l.register(&fnode{id: "n1"}); err == nil {
		t.Error("a second node n1 was registered")
	}
	if err := l.join(nodes[3]); err == nil {
		t.Error("an unregistered node joined")
	}
	if err := l.join(nodes[0]); err == nil {
		t.Error("a member joined twice")
	}
	if err := l.leave(nodes[4]); err == nil {
		t.Error("a node that is not a member left")
	}

	// Add n4, remove n2: a snapshot taken before is unchanged.
	if err := l.register(nodes[3]); err != nil {
		t.Fatal(err)
	}
	if got := ids(l.snapshot()); got != "[n1 n2 n3]" {
		t.Errorf("registered but not joined: members %s", got)
	}
	if err := l.join(nodes[3]); err != nil {
		t.Fatal(err)
	}
	if err := l.leave(nodes[1]); err != nil {
		t.Fatal(err)
	}
	if got := ids(before); got != "[n1 n2 n3]" {
		t.Errorf("an earlier snapshot changed to %s", got)
	}
	if got := ids(l.snapshot()); got != "[n1 n3 n4]" {
		t.Errorf("members %s, want [n1 n3 n4]", got)
	}
	if got := ids(l.everyNode()); got != "[n1 n2 n3 n4]" {
		t.Errorf("every node %s, want [n1 n2 n3 n4]", got)
	}
	if l.isMember(nodes[1]) || !l.isMember(nodes[3]) {
		t.Error("isMember disagrees with the snapshot")
	}
	// A caller appending to its snapshot must not reach the list's array.
	snap := l.snapshot()
	_ = append(snap, nodes[4])
	if got := ids(l.snapshot()); got != "[n1 n3 n4]" {
		t.Errorf("appending to a snapshot changed the members to %s", got)
	}

	// Readers and a writer at once (run with -race): every snapshot a
	// reader sees has 3 or 4 members, never a torn one.
	if err := l.register(nodes[4]); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	bad := make(chan string, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				s := l.snapshot()
				if len(s) < 3 || len(s) > 4 || slices.Contains(s, nil) {
					select {
					case bad <- ids(s):
					default:
					}
					return
				}
				_ = s[len(s)-1].id
			}
		}()
	}
	for range 200 {
		if err := l.join(nodes[4]); err != nil {
			t.Fatal(err)
		}
		if err := l.leave(nodes[4]); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(bad)
	for s := range bad {
		t.Errorf("a reader saw members %s", s)
	}
}

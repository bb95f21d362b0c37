package faults

import (
	"fmt"
	mrand "math/rand/v2"
	"syscall"
	"time"
)

// Nemesis kinds.
const (
	partLeader   = "partition-leader"   // the leader alone on one side
	partMajority = "partition-majority" // a random minority against the majority
	partBridge   = "partition-bridge"   // two halves that only one node sees both of
	killLeader   = "kill-leader"        // kill -9 the leader, restart it
	killFollower = "kill-follower"      // kill -9 a follower, restart it
	killAll      = "kill-all"           // kill -9 every node, restart them all
	pauseLeader  = "pause-leader"       // SIGSTOP the leader, SIGCONT it
)

var partitionKinds = []string{partLeader, partMajority, partBridge}

var processKinds = []string{killLeader, killFollower, killAll, pauseLeader}

// planned is one fault of the schedule: what, how long it holds, and the
// quiet time after it.
type planned struct {
	Kind string        `json:"kind"`
	Hold time.Duration `json:"hold"`
	Gap  time.Duration `json:"gap"`
}

// plan is the seeded schedule for a cluster of size voters: every kind
// once in random order, then random kinds until duration is used up.
// Membership changes keep the cluster between minVoters and maxVoters: a
// removal the size does not allow yet trades places with the addition
// that comes later in the first round, and in the random rounds an
// addition the size does not allow becomes a removal and the other way
// round. A membership change holds nothing (Hold 0): it lasts as long as
// it takes.
func plan(rng *mrand.Rand, duration time.Duration, soak, partitions bool, size int) []planned {
	kinds := append(append([]string(nil), processKinds...), memberKinds...)
	if partitions {
		kinds = append(kinds, partitionKinds...)
	}
	holdMax := 5 * time.Second
	if soak {
		holdMax = 12 * time.Second
	}
	one := func(kind string) planned {
		p := planned{Kind: kind, Hold: 3*time.Second + rand(rng, holdMax-3*time.Second), Gap: 4*time.Second + rand(rng, 2*time.Second)}
		if isMemberKind(kind) {
			p.Hold = 0
		}
		return p
	}
	var out []planned
	for _, i := range rng.Perm(len(kinds)) {
		out = append(out, one(kinds[i]))
	}
	out, size = feasibleOrder(out, size)
	var total time.Duration
	for _, p := range out {
		total += p.Hold + p.Gap
	}
	for total < duration {
		p := one(kinds[rng.IntN(len(kinds))])
		if !memberChangeFits(p.Kind, size) {
			p.Kind = map[string]string{memberAdd: memberRemove, memberRemove: memberAdd}[p.Kind]
		}
		size += memberDelta(p.Kind)
		out = append(out, p)
		total += p.Hold + p.Gap
	}
	return out
}

func rand(rng *mrand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(d)))
}

// fault is one applied fault, for the report and the checkers' windows.
type fault struct {
	Kind   string   `json:"kind"`
	Start  int64    `json:"start_ns"`
	Heal   int64    `json:"heal_ns"`
	Nodes  []string `json:"nodes"`  // whose reads are exempt while it lasts
	Detail string   `json:"detail"` // who was cut, killed or paused
	Err    string   `json:"error,omitempty"`
	Kills  []Kill   `json:"kills,omitempty"` // kill -9 victims, each when its kill returned
	// Settled is the time from the heal until every running node named one
	// leader, -1 when that did not happen within settleBound.
	Settled time.Duration `json:"settled_ns"`
}

// settleBound bounds the wait for one leader after a heal.
const settleBound = 10 * time.Second

// grace is how long after a heal a node may still be catching up (an
// election, a restarted node replaying its log). An operation that was
// running at the heal overlaps the window anyway.
const grace = 2 * time.Second

// windows turns applied faults into checker windows.
func windows(faults []fault) []Window {
	out := make([]Window, 0, len(faults))
	for _, f := range faults {
		out = append(out, Window{Kind: f.Kind, Start: f.Start, End: f.Heal + int64(grace), Nodes: f.Nodes})
	}
	return out
}

// nemesis applies faults to a cluster.
type nemesis struct {
	c   *cluster
	rng *mrand.Rand
}

// apply runs one planned fault to its heal, then waits its gap.
func (m *nemesis) apply(p planned) fault {
	f := fault{Kind: p.Kind, Start: m.c.cl.now()}
	var err error
	switch p.Kind {
	case partLeader, partMajority, partBridge:
		err = m.partition(&f, p.Hold)
	case killLeader, killFollower, killAll:
		err = m.kill(&f, p.Hold)
	case pauseLeader:
		err = m.pause(&f, p.Hold)
	case memberAdd, memberRemove, memberReplace:
		err = m.membership(&f)
	default:
		err = fmt.Errorf("unknown nemesis %q", p.Kind)
	}
	if err != nil {
		f.Err = err.Error()
	}
	f.Heal = m.c.cl.now()
	healed := time.Now()
	f.Settled = m.settle()
	time.Sleep(p.Gap - time.Since(healed))
	return f
}

// settle polls until every running member names one leader and returns
// how long that took, or -1 after settleBound.
func (m *nemesis) settle() time.Duration {
	start := time.Now()
	for time.Since(start) < settleBound {
		if l, _ := m.c.leaderNow(m.c.running()); l != nil {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return -1
}

// leader finds the current leader (bounded).
func (m *nemesis) leader() (*fnode, error) {
	return m.c.waitLeader(10 * time.Second)
}

func ids(nodes []*fnode) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.id
	}
	return out
}

// sides returns the two groups a partition kind cuts apart, and the
// bridge node for partBridge (nil otherwise).
func (m *nemesis) sides(kind string, nodes []*fnode) (a, b []*fnode, bridge *fnode, err error) {
	n := len(nodes)
	var perm []*fnode
	for _, i := range m.rng.Perm(n) {
		perm = append(perm, nodes[i])
	}
	switch kind {
	case partLeader:
		l, err := m.leader()
		if err != nil {
			return nil, nil, nil, err
		}
		for _, x := range nodes {
			if x != l {
				b = append(b, x)
			}
		}
		return []*fnode{l}, b, nil, nil
	case partMajority:
		k := 1 + m.rng.IntN((n-1)/2)
		return perm[:k], perm[k:], nil, nil
	default:
		rest := perm[1:]
		return rest[:len(rest)/2], rest[len(rest)/2:], perm[0], nil
	}
}

// partition cuts two groups apart with iptables and heals after hold.
func (m *nemesis) partition(f *fault, hold time.Duration) error {
	a, b, bridge, err := m.sides(f.Kind, m.c.nodes())
	if err != nil {
		return err
	}
	f.Nodes = ids(append(append([]*fnode(nil), a...), b...))
	if bridge != nil {
		f.Nodes = append(f.Nodes, bridge.id)
	}
	f.Detail = fmt.Sprintf("%v | %v", ids(a), ids(b))
	if bridge != nil {
		f.Detail += fmt.Sprintf(", bridge %s", bridge.id)
	}
	cut := map[int][]int{}
	for _, x := range a {
		for _, y := range b {
			cut[x.slot] = append(cut[x.slot], y.slot)
			cut[y.slot] = append(cut[y.slot], x.slot)
		}
	}
	f.Start = m.c.cl.now()
	err = m.c.env.partition(cut)
	time.Sleep(hold)
	if herr := m.c.env.heal(); herr != nil {
		return fmt.Errorf("%v; %w", err, herr)
	}
	return err
}

// victims picks the nodes a kill nemesis kills.
func (m *nemesis) victims(kind string) ([]*fnode, error) {
	nodes := m.c.nodes()
	if kind == killAll {
		var out []*fnode
		for _, i := range m.rng.Perm(len(nodes)) {
			out = append(out, nodes[i])
		}
		return out, nil
	}
	l, err := m.leader()
	if err != nil {
		return nil, err
	}
	if kind == killLeader {
		return []*fnode{l}, nil
	}
	i := indexOf(nodes, l)
	return []*fnode{nodes[(i+1+m.rng.IntN(len(nodes)-1))%len(nodes)]}, nil
}

// kill kills the victims with SIGKILL, waits hold, restarts them and waits
// (bounded) until they answer /health.
func (m *nemesis) kill(f *fault, hold time.Duration) error {
	v, err := m.victims(f.Kind)
	if err != nil {
		return err
	}
	f.Detail = fmt.Sprintf("killed %v", ids(v))
	f.Nodes = ids(v)
	if f.Kind != killFollower {
		f.Nodes = nil // every node loses its leader for a while
	}
	f.Start = m.c.cl.now()
	for _, n := range v {
		if err := n.kill(); err != nil {
			return err
		}
		f.Kills = append(f.Kills, Kill{Node: n.id, At: m.c.cl.now()})
	}
	time.Sleep(hold)
	for _, n := range v {
		if err := n.launch(); err != nil {
			return err
		}
	}
	_, err = m.c.waitLeader(formTimeout)
	return err
}

// pause stops the leader with SIGSTOP for hold, then SIGCONT.
func (m *nemesis) pause(f *fault, hold time.Duration) error {
	n, err := m.leader()
	if err != nil {
		return err
	}
	f.Detail = "paused " + n.id
	f.Start = m.c.cl.now()
	if err := n.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	time.Sleep(hold)
	return n.signal(syscall.SIGCONT)
}

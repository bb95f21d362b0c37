package faults

import (
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// Membership nemesis kinds: the cluster grows, shrinks or swaps a node
// while the workload runs.
const (
	memberAdd     = "member-add"     // start a new node with --join; the leader adds it
	memberRemove  = "member-remove"  // POST /admin/leave for a follower, then SIGTERM it
	memberReplace = "member-replace" // add a new node and remove a follower (at maxVoters: remove first)
)

var memberKinds = []string{memberAdd, memberRemove, memberReplace}

// The membership nemesis keeps the cluster between these sizes.
const minVoters, maxVoters = 3, 5

// adminTimeout bounds one admin call (a follower forwards it to the
// leader, which may take a while to be found).
const adminTimeout = 15 * time.Second

// stopTimeout bounds a removed node's exit after SIGTERM.
const stopTimeout = 15 * time.Second

func isMemberKind(kind string) bool { return slices.Contains(memberKinds, kind) }

// memberDelta is how a membership kind changes the number of voters.
func memberDelta(kind string) int {
	switch kind {
	case memberAdd:
		return 1
	case memberRemove:
		return -1
	}
	return 0
}

// memberChangeFits reports whether kind keeps a cluster of size voters
// within minVoters..maxVoters.
func memberChangeFits(kind string, size int) bool {
	s := size + memberDelta(kind)
	return s >= minVoters && s <= maxVoters
}

// feasibleOrder reorders a schedule so that every membership change fits
// the size it finds: a change that does not fit yet trades places with the
// first later one that goes the other way. It returns the schedule and the
// size at its end. A change that no later one makes fit stays (and fails
// when it is applied).
func feasibleOrder(ps []planned, size int) ([]planned, int) {
	out := append([]planned(nil), ps...)
	for i := range out {
		if !memberChangeFits(out[i].Kind, size) {
			for j := i + 1; j < len(out); j++ {
				if memberDelta(out[j].Kind) == -memberDelta(out[i].Kind) {
					out[i].Kind, out[j].Kind = out[j].Kind, out[i].Kind
					break
				}
			}
		}
		size += memberDelta(out[i].Kind)
	}
	return out, size
}

// membership applies a membership kind.
func (m *nemesis) membership(f *fault) error {
	switch f.Kind {
	case memberAdd:
		return m.addMember(f)
	case memberRemove:
		return m.removeMember(f)
	}
	// Replace: stay within the bounds while doing it.
	if len(m.c.nodes()) < maxVoters {
		if err := m.addMember(f); err != nil {
			return err
		}
		return m.removeMember(f)
	}
	if err := m.removeMember(f); err != nil {
		return err
	}
	return m.addMember(f)
}

// note appends to a fault's detail.
func note(f *fault, format string, args ...any) {
	if f.Detail != "" {
		f.Detail += "; "
	}
	f.Detail += fmt.Sprintf(format, args...)
}

// addMember starts a new node that joins the members over gossip, waits
// until the leader lists it as a voter and it names the leader, and makes
// it a member. Its reads are exempt while the fault lasts.
func (m *nemesis) addMember(f *fault) error {
	if n := len(m.c.nodes()); n >= maxVoters {
		return fmt.Errorf("add: already %d voters", n)
	}
	n, err := m.c.newNode()
	if err != nil {
		return err
	}
	f.Nodes = append(f.Nodes, n.id)
	began := time.Now()
	if err := n.launch(); err != nil {
		return err
	}
	leader, err := m.c.waitVoter(n, formTimeout)
	if err != nil {
		note(f, "started %s: not a voter naming the leader after %v", n.id, time.Since(began).Round(time.Millisecond))
		// Not a member: stop it, so it cannot hold a vote nobody counts
		// on; its log stays in the artifacts and the final membership
		// check reports it if it was added after all.
		if _, serr := n.stop(stopTimeout); serr != nil {
			err = fmt.Errorf("%w; %v", err, serr)
		}
		return fmt.Errorf("add %s: %w", n.id, err)
	}
	if err := m.c.members.join(n); err != nil {
		return err
	}
	note(f, "added %s (a voter naming leader %s %v after its start)", n.id, leader.id, time.Since(began).Round(time.Millisecond))
	return nil
}

// removeMember removes a random follower with POST /admin/leave through a
// random member, then stops it with SIGTERM. From the leave's answer on it
// is no longer a member.
func (m *nemesis) removeMember(f *fault) error {
	nodes := m.c.nodes()
	if len(nodes) <= minVoters {
		return fmt.Errorf("remove: only %d voters", len(nodes))
	}
	leader, err := m.leader()
	if err != nil {
		return err
	}
	var followers []*fnode
	for _, n := range nodes {
		if n != leader {
			followers = append(followers, n)
		}
	}
	victim := followers[m.rng.IntN(len(followers))]
	via := nodes[m.rng.IntN(len(nodes))]
	f.Nodes = append(f.Nodes, victim.id)
	body, _ := json.Marshal(map[string]string{"id": victim.id})
	began := time.Now()
	a := m.c.cl.do(fasthttp.MethodPost, via.httpAddr, "/admin/leave", body, adminTimeout)
	took := time.Since(began).Round(time.Millisecond)
	var leaveErr error
	if a.err != nil || a.status != 200 {
		leaveErr = fmt.Errorf("POST /admin/leave {id: %s} through %s: %d %v %.300s", victim.id, via.id, a.status, a.err, a.body)
		// Did it happen anyway? Then the node is gone all the same.
		if servers, _, err := m.c.configuration(); err != nil || slices.ContainsFunc(servers, func(s serverJSON) bool { return s.ID == victim.id }) {
			note(f, "%s not removed (leave through %s answered %d after %v)", victim.id, via.id, a.status, took)
			return leaveErr
		}
	}
	if err := m.c.members.leave(victim); err != nil {
		return err
	}
	exit, err := victim.stop(stopTimeout)
	note(f, "removed %s through %s (leader %s; leave answered %d after %v; SIGTERM: %s)", victim.id, via.id, leader.id, a.status, took, exit)
	if leaveErr != nil {
		return leaveErr
	}
	return err
}

// newNode prepares the next node (network, ports, command line) to join
// the current members; it is registered, not a member yet.
func (c *cluster) newNode() (*fnode, error) {
	slot := len(c.members.everyNode())
	if slot != len(c.env.ips) {
		return nil, fmt.Errorf("new node: %d nodes but %d addresses", slot, len(c.env.ips))
	}
	if err := c.env.grow(); err != nil {
		return nil, fmt.Errorf("new node's network: %w", err)
	}
	addrs, err := nodePorts(c.env, slot)
	if err != nil {
		return nil, err
	}
	var join []string
	for _, n := range c.nodes() {
		join = append(join, n.gossipAddr)
	}
	// No --bootstrap-expect: with --join and the default 1 a node without
	// state never bootstraps; it waits for the leader to add it.
	n := newFnode(c.dir, c.env, slot, addrs, c.cfg, 0, join)
	if err := c.members.register(n); err != nil {
		return nil, err
	}
	return n, nil
}

// serverJSON and clusterStatus are the parts of GET /admin/cluster the
// harness uses.
type serverJSON struct {
	ID       string `json:"id"`
	Suffrage string `json:"suffrage"`
}

type clusterStatus struct {
	ID      string       `json:"node_id"`
	Role    string       `json:"role"`
	Leader  string       `json:"leader"`
	Servers []serverJSON `json:"servers"`
}

// adminCluster reads GET /admin/cluster on n.
func (c *cluster) adminCluster(n *fnode) (clusterStatus, error) {
	var st clusterStatus
	a := c.cl.do(fasthttp.MethodGet, n.httpAddr, "/admin/cluster", nil, 5*time.Second)
	if a.err != nil || a.status != 200 {
		return st, fmt.Errorf("GET /admin/cluster on %s: %d %v %.200s", n.id, a.status, a.err, a.body)
	}
	if err := json.Unmarshal(a.body, &st); err != nil {
		return st, fmt.Errorf("GET /admin/cluster on %s: %w", n.id, err)
	}
	return st, nil
}

// configuration returns the Raft configuration as the leader reports it.
func (c *cluster) configuration() ([]serverJSON, *fnode, error) {
	l, err := c.waitLeader(10 * time.Second)
	if err != nil {
		return nil, nil, err
	}
	st, err := c.adminCluster(l)
	if err != nil {
		return nil, l, err
	}
	if st.Role != "leader" {
		return nil, l, fmt.Errorf("%s answered /admin/cluster as %s", l.id, st.Role)
	}
	return st.Servers, l, nil
}

// waitVoter polls until the leader's /admin/cluster lists n as a voter and
// n's /health names that leader; it returns the leader.
func (c *cluster) waitVoter(n *fnode, timeout time.Duration) (*fnode, error) {
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		servers, l, err := c.configuration()
		switch {
		case err != nil:
			last = err.Error()
		case !slices.Contains(servers, serverJSON{ID: n.id, Suffrage: "Voter"}):
			last = fmt.Sprintf("leader %s lists %v", l.id, servers)
		default:
			h, err := c.health(n)
			if err == nil && h.Leader == l.id {
				return l, nil
			}
			last = fmt.Sprintf("leader %s lists %s as a voter; %s: %+v %v", l.id, n.id, n.id, h, err)
		}
		if !n.running() {
			return nil, fmt.Errorf("%s exited; last: %s", n.id, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("not within %v; last: %s", timeout, last)
}

// membershipAnomalies compares the leader's Raft configuration at the end
// with the members: a removed node added back, an added node that is not
// a voter, or a node the harness never added all show here.
func (c *cluster) membershipAnomalies() []Anomaly {
	servers, l, err := c.configuration()
	if err != nil {
		return []Anomaly{{Checker: "membership", Detail: err.Error()}}
	}
	want := ids(c.nodes())
	var got []string
	for _, s := range servers {
		if s.Suffrage != "Voter" {
			got = append(got, s.ID+"("+s.Suffrage+")")
		} else {
			got = append(got, s.ID)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		return []Anomaly{{Checker: "membership", Node: l.id, Detail: fmt.Sprintf("configuration [%s], members [%s]", strings.Join(got, " "), strings.Join(want, " "))}}
	}
	return nil
}

// TestPlanKeepsVotersInBounds: for 3 and 5 nodes, with and without
// partitions, short and soak, every kind is planned at least once and no
// membership change takes the cluster out of minVoters..maxVoters.
func TestPlanKeepsVotersInBounds(t *testing.T) {
	for seed := range uint64(300) {
		for _, size := range []int{3, 5} {
			for _, partitions := range []bool{false, true} {
				soak := seed%10 == 0
				duration := 60 * time.Second
				if soak {
					duration = 10 * time.Minute
				}
				ps := plan(mrand.New(mrand.NewPCG(seed, 1)), duration, soak, partitions, size)
				kinds := append(append([]string(nil), processKinds...), memberKinds...)
				if partitions {
					kinds = append(kinds, partitionKinds...)
				}
				seen := map[string]bool{}
				s := size
				for i, p := range ps {
					seen[p.Kind] = true
					if !memberChangeFits(p.Kind, s) {
						t.Fatalf("seed %d size %d: fault %d %s at %d voters", seed, size, i, p.Kind, s)
					}
					if isMemberKind(p.Kind) && p.Hold != 0 {
						t.Fatalf("seed %d: %s holds %v", seed, p.Kind, p.Hold)
					}
					s += memberDelta(p.Kind)
				}
				for _, k := range kinds {
					if !seen[k] {
						t.Fatalf("seed %d size %d partitions %v: %s never planned: %v", seed, size, partitions, k, ps)
					}
				}
			}
		}
	}
}

func TestFeasibleOrder(t *testing.T) {
	kinds := func(ps []planned) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Kind)
		}
		return out
	}
	in := []planned{{Kind: memberRemove}, {Kind: killAll}, {Kind: memberReplace}, {Kind: memberAdd}}
	got, size := feasibleOrder(in, 3)
	if want := []string{memberAdd, killAll, memberReplace, memberRemove}; !slices.Equal(kinds(got), want) || size != 3 {
		t.Errorf("at 3: %v (size %d), want %v", kinds(got), size, want)
	}
	if kinds(in)[0] != memberRemove {
		t.Error("feasibleOrder changed its input")
	}
	in = []planned{{Kind: memberAdd}, {Kind: memberRemove}}
	if got, size := feasibleOrder(in, 5); !slices.Equal(kinds(got), []string{memberRemove, memberAdd}) || size != 5 {
		t.Errorf("at 5: %v (size %d)", kinds(got), size)
	}
	if got, size := feasibleOrder(in, 4); !slices.Equal(kinds(got), []string{memberAdd, memberRemove}) || size != 4 {
		t.Errorf("at 4: %v (size %d)", kinds(got), size)
	}
}

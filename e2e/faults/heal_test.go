package faults

import (
	"fmt"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestBridgePartitionHeals: the leader and one follower cannot reach each
// other while the third node reaches both (a "bridge"), for a few seconds
// under writes; then the network heals. Soon after the heal every node must
// name one leader again, and a read that misses on the cut-off follower
// must be answered within the same bound: a node that reaches the leader is
// not to wait out connections stuck from the partition.
func TestBridgePartitionHeals(t *testing.T) {
	if testing.Short() {
		t.Skip("fault-injection test: skipped in -short mode")
	}
	seed, c := startIsolated(t, 3)
	var settles, reads []time.Duration
	nodes := c.nodes()
	for round := range 3 {
		l, err := c.waitLeader(formTimeout)
		if err != nil {
			t.Fatal(err)
		}
		leader := indexOf(nodes, l)
		cut, bridge := (leader+1)%3, (leader+2)%3
		if err := c.env.partition(map[int][]int{leader: {cut}, cut: {leader}}); err != nil {
			t.Fatal(err)
		}
		for i := range 20 { // writes while the link is down, through the bridge
			c.cl.createOp(0, Create, nodes[bridge], map[string]any{"url": fmt.Sprintf("https://example.com/bridge/%d/%d/%d", seed, round, i)})
			time.Sleep(200 * time.Millisecond)
		}
		if err := c.env.heal(); err != nil {
			t.Fatal(err)
		}
		healed := time.Now()
		settled := time.Duration(-1)
		for time.Since(healed) < 10*time.Second {
			if l, _ := c.leaderNow(nodes); l != nil {
				settled = time.Since(healed)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		start := time.Now()
		miss := c.cl.do(fasthttp.MethodGet, nodes[cut].httpAddr, fmt.Sprintf("/zz%d%d", round, seed%1000), nil, 15*time.Second)
		read := time.Since(start)
		t.Logf("round %d: leader %s, cut %s, bridge %s: one leader known to all %v after the heal; a miss on %s answered %d in %v",
			round, nodes[leader].id, nodes[cut].id, nodes[bridge].id, settled.Round(time.Millisecond), nodes[cut].id, miss.status, read.Round(time.Millisecond))
		settles, reads = append(settles, settled), append(reads, read)
		time.Sleep(time.Second)
	}
	t.Logf("settle times %v, miss read times %v", settles, reads)
	for i := range settles {
		// The bound is the one the suite holds writes to after a fault: a
		// node still without a leader 2 s after a heal was waiting out a
		// connection stuck from the partition (it took 2.4-2.5 s when Raft
		// RPCs had a 10 s timeout).
		if settles[i] < 0 || settles[i] > 2*time.Second || reads[i] > 2*time.Second {
			t.Errorf("round %d: one leader known to all %v after the heal, a miss read took %v; want both within 2 s", i, settles[i], reads[i])
		}
	}
}

// TestWritesResumeWhenTheLeaderIsIsolated: the leader is cut off from both
// followers. A create sent through a follower at that moment, by a client
// that waits as long as it takes, must succeed: the follower's forward to
// the old leader hangs (its packets are dropped), and it must resend to the
// new leader once the followers elect one, within the nodes' write
// timeout.
func TestWritesResumeWhenTheLeaderIsIsolated(t *testing.T) {
	if testing.Short() {
		t.Skip("fault-injection test: skipped in -short mode")
	}
	seed, c := startIsolated(t, 4)
	nodes := c.nodes()
	for round := range 3 {
		l, err := c.waitLeader(formTimeout)
		if err != nil {
			t.Fatal(err)
		}
		leader := indexOf(nodes, l)
		a, b := (leader+1)%3, (leader+2)%3
		if err := c.env.partition(map[int][]int{leader: {a, b}, a: {leader}, b: {leader}}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		op := c.cl.createOp(0, Create, nodes[a], map[string]any{"url": fmt.Sprintf("https://example.com/isolated/%d/%d", seed, round)})
		took := time.Since(start)
		t.Logf("round %d: leader %s isolated; a create through %s answered %d after %v", round, nodes[leader].id, nodes[a].id, op.Status, took.Round(time.Millisecond))
		if err := c.env.heal(); err != nil {
			t.Fatal(err)
		}
		if op.Status != 201 {
			t.Errorf("round %d: create through a follower with the leader isolated: %d %s after %v, want 201 within the %v write timeout", round, op.Status, op.Err, took, writeTimeout)
		}
		if _, err := c.waitLeader(formTimeout); err != nil {
			t.Fatal(err)
		}
	}
}

// startIsolated starts three nodes in network namespaces, or skips the
// test where links cannot be cut; stream varies the random source per test.
func startIsolated(t *testing.T, stream uint64) (int64, *cluster) {
	t.Helper()
	seed := time.Now().UnixNano()
	c := startCluster(t, 3, mrand.New(mrand.NewPCG(uint64(seed), stream)))
	if !c.env.isolated {
		t.Skip("needs network namespaces to cut links")
	}
	return seed, c
}

package faults

import (
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// maxHistoryCodes bounds how many edited codes the final history check
// asks every node about.
const maxHistoryCodes = 20

// editedSample returns up to maxHistoryCodes codes that an edit answered
// 200 changed, that were acknowledged and that no delete touched: the most
// edited first.
func editedSample(ops []Op) []string {
	type edited struct {
		code  string
		edits int
	}
	var all []edited
	for code, cops := range codeIndex(ops) {
		_, _, acked := ackedTarget(cops)
		_, deleted := deletedBy(cops)
		if n := len(ackedEdits(cops)); acked && !deleted && n > 0 {
			all = append(all, edited{code, n})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].edits != all[j].edits {
			return all[i].edits > all[j].edits
		}
		return all[i].code < all[j].code
	})
	var out []string
	for _, e := range all[:min(len(all), maxHistoryCodes)] {
		out = append(out, e.code)
	}
	return out
}

// editHistoryAnomalies asks every member, after the final heal, for the
// history and the redirect of a sample of edited codes and checks that
// they agree (CheckEditHistories).
func (c *cluster) editHistoryAnomalies(ops []Op) []Anomaly {
	codes := editedSample(ops)
	views := map[string]map[string]EditedView{}
	for _, n := range c.nodes() {
		views[n.id] = map[string]EditedView{}
		for _, code := range codes {
			views[n.id][code] = c.editedView(n, code)
		}
	}
	c.t.Logf("edit histories: %d edited codes checked on %d nodes", len(codes), len(views))
	return CheckEditHistories(ops, views)
}

// editedView fetches one code's history and redirect from n; a request
// that got no answer is tried again (3 tries).
func (c *cluster) editedView(n *fnode, code string) EditedView {
	var v EditedView
	var a answer
	for try := 0; try < 3; try++ {
		if a = c.cl.do(fasthttp.MethodGet, n.httpAddr, "/api/v1/urls/"+code+"/history", nil, 5*time.Second); a.err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	v.Status = a.status
	switch {
	case a.err != nil:
		v.Err = a.err.Error()
	case a.status != 200:
		v.Err = fmt.Sprintf("%.200s", a.body)
	default:
		var err error
		if v.Versions, err = ParseVersions(a.body); err != nil {
			v.Status, v.Err = 0, err.Error()
		}
	}
	for try := 0; try < 3; try++ {
		if r := c.cl.do(fasthttp.MethodHead, n.httpAddr, "/"+code, nil, 5*time.Second); r.err == nil {
			v.Redirect, v.Location = r.status, r.location
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return v
}

// TestEditThroughCutOffFollower: a follower is cut off from the other two
// (its packets dropped) while a link is edited through the leader, which
// must answer 200. While cut off the follower may serve the old target;
// once the network heals it must redirect to the new one within 15 s, and
// never to the old one again over the next 2 s of repeated reads. Then,
// without faults, rounds of an edit sent through a follower followed at
// once by a read on that same follower (and on the other one) must see
// the new target every time. The history is checked by the suite's
// checkers, the cut-off node exempt from the cut until it first showed the
// new target.
func TestEditThroughCutOffFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("fault-injection test: skipped in -short mode")
	}
	seed, c := startIsolated(t, 6)
	var win []Window
	for round := range 3 {
		w, ok := editWhileCutOff(t, c, seed, round)
		win = append(win, w)
		if !ok {
			break
		}
	}
	found := editThroughFollower(t, c, seed, 30, win)
	t.Logf("edits through a follower: %v", found)
	if found.stale > 0 || found.anomalies > 0 || found.illegal > 0 {
		t.Errorf("%v; first: %v", found, head(found.first, 3))
	}
}

// TestBrokenEditWaitIsCaught shows that the edit rounds catch a build that
// acknowledges edits without waiting for them to be applied: the leader's
// wait for every server and the forwarding node's wait for the leader's
// index are cut out of a copy of the module.
func TestBrokenEditWaitIsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("fault-injection test: skipped in -short mode")
	}
	bin := buildMutant(t, []mutation{
		{"cluster/propose.go", "\tif opts.Visible {\n\t\tn.awaitServers(index)\n\t}\n", ""},
		{"cluster/forward.go", "\t\terr = awaitLeaderIndex(ctx, n.machine, resp)\n", ""},
	})
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	c := startClusterOf(t, bin, 3, mrand.New(mrand.NewPCG(uint64(seed), 7)))
	found := editThroughFollower(t, c, seed, 50, nil)
	t.Logf("broken build: %v", found)
	if found.anomalies == 0 || found.illegal == 0 {
		t.Errorf("the checkers did not catch edits acknowledged before they were applied: %v", found)
	}
}

// editWhileCutOff runs one round of the cut-off scenario and returns the
// window in which the cut-off node's reads are exempt: from the cut until
// it first redirected to the new target after the heal (to the end of the
// round if it never did). ok is false when the round failed.
func editWhileCutOff(t *testing.T, c *cluster, seed int64, round int) (win Window, ok bool) {
	t.Helper()
	l, err := c.waitLeader(formTimeout)
	if err != nil {
		t.Fatal(err)
	}
	nodes := c.nodes()
	leader := indexOf(nodes, l)
	cut := (leader + 1 + round%2) % 3
	other := 3 - leader - cut
	oldURL := fmt.Sprintf("https://example.com/cut/%d/%d/old", seed, round)
	newURL := fmt.Sprintf("https://example.com/cut/%d/%d/new", seed, round)
	create := c.cl.createOp(0, Create, l, map[string]any{"url": oldURL})
	if create.Status != 201 {
		t.Fatalf("round %d: create on the leader: %+v", round, create)
	}
	code := create.Code
	if !waitFound(c, nodes[cut], code) {
		t.Fatalf("round %d: %s never redirects %s", round, nodes[cut].id, code)
	}
	win = Window{Kind: "cut-off follower", Start: c.cl.now(), Nodes: []string{nodes[cut].id}}
	defer func() {
		if win.End == 0 {
			win.End = c.cl.now()
		}
	}()
	if err := c.env.partition(map[int][]int{cut: {leader, other}, leader: {cut}, other: {cut}}); err != nil {
		t.Fatal(err)
	}
	e := c.cl.editOp(0, l, code, newURL)
	cutRead := c.cl.readOp(0, Redirect, nodes[cut], code)
	otherRead := c.cl.readOp(0, Redirect, nodes[other], code)
	if err := c.env.heal(); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	t.Logf("round %d: leader %s, %s cut off: the edit of %s through the leader answered %d %q in %s; meanwhile %s redirected %d %q, %s %d %q",
		round, l.id, nodes[cut].id, code, e.Status, e.RespURL, ms(e.Complete-e.Invoke), nodes[cut].id, cutRead.Status, cutRead.RespURL, nodes[other].id, otherRead.Status, otherRead.RespURL)
	if e.Status != 200 || e.RespURL != newURL {
		t.Errorf("round %d: edit through the leader with %s cut off: %d %q %s, want 200 %q", round, nodes[cut].id, e.Status, e.RespURL, e.Err, newURL)
		return win, false
	}
	if otherRead.Status != 302 || otherRead.RespURL != newURL {
		t.Errorf("round %d: %s, which reaches the leader, redirected %d %q right after the edit, want %q", round, nodes[other].id, otherRead.Status, otherRead.RespURL, newURL)
	}

	// Bounded: at most 15 s (and 300 reads) for the healed node to show the
	// new target.
	var caughtUp time.Duration = -1
	for i := 0; i < 300 && time.Since(healed) < 15*time.Second; i++ {
		r := c.cl.readOp(0, Redirect, nodes[cut], code)
		if r.Status == 302 && r.RespURL == newURL {
			caughtUp = time.Since(healed)
			win.End = r.Invoke - 1 // its later reads are held to the guarantee
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if caughtUp < 0 {
		t.Errorf("round %d: %s does not redirect %s to the new target 15 s after the heal", round, nodes[cut].id, code)
		return win, false
	}
	// Then 2 s (at most 100 reads) of reads: never the old target again.
	reads, answered, old := 0, 0, 0
	for start := time.Now(); reads < 100 && time.Since(start) < 2*time.Second; reads++ {
		r := c.cl.readOp(0, Redirect, nodes[cut], code)
		switch {
		case r.Status == 302 && r.RespURL == newURL:
			answered++
		case r.Status == 302 || r.Status == 404:
			old++
			t.Errorf("round %d: %s redirected %s %d %q %s after the heal, after it had shown the new target", round, nodes[cut].id, code, r.Status, r.RespURL, time.Since(healed).Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("round %d: %s redirects to the new target %v after the heal; then %d of %d reads over 2 s answered it, %d an older one",
		round, nodes[cut].id, caughtUp.Round(time.Millisecond), answered, reads, old)
	if answered == 0 {
		t.Errorf("round %d: none of %d reads on %s answered after it caught up", round, reads, nodes[cut].id)
	}
	for _, n := range nodes { // the API read agrees everywhere
		if r := c.cl.readOp(0, Read, n, code); r.Status != 200 || r.RespURL != newURL {
			t.Errorf("round %d: API read of %s on %s after the heal: %d %q, want %q", round, code, n.id, r.Status, r.RespURL, newURL)
		}
	}
	return win, old == 0
}

// editFindings is what editThroughFollower saw.
type editFindings struct {
	rounds, stale, anomalies, illegal int
	first                             []string
}

func (f editFindings) String() string {
	return fmt.Sprintf("%d of %d reads right after a 200 edit through a follower (on it or the other follower) answered another target; older-target, two-target and read-after-delete anomalies %d, non-linearizable codes %d",
		f.stale, f.rounds, f.anomalies, f.illegal)
}

// editThroughFollower runs rounds of create on the leader, edit through a
// follower, read at once on that follower and then on the other one, and
// checks the whole history recorded so far (win: the exempt windows of
// earlier rounds).
func editThroughFollower(t *testing.T, c *cluster, seed int64, rounds int, win []Window) editFindings {
	t.Helper()
	l, err := c.waitLeader(formTimeout)
	if err != nil {
		t.Fatal(err)
	}
	nodes := c.nodes()
	found := editFindings{rounds: 2 * rounds}
	for i := range rounds {
		f := nodes[(indexOf(nodes, l)+1+i%2)%3]
		g := nodes[3-indexOf(nodes, l)-indexOf(nodes, f)]
		create := c.cl.createOp(0, Create, l, map[string]any{"url": fmt.Sprintf("https://example.com/ef/%d/%d/old", seed, i)})
		if create.Status != 201 {
			t.Fatalf("round %d: create on the leader: %+v", i, create)
		}
		// The follower has the link, with its old target, before the edit.
		if !waitFound(c, f, create.Code) {
			t.Fatalf("round %d: follower %s never redirects %s", i, f.id, create.Code)
		}
		newURL := fmt.Sprintf("https://example.com/ef/%d/%d/new", seed, i)
		e := c.cl.editOp(0, f, create.Code, newURL)
		if e.Status != 200 {
			t.Fatalf("round %d: edit through follower %s: %+v", i, f.id, e)
		}
		for _, n := range []*fnode{f, g} {
			if r := c.cl.readOp(0, Redirect, n, create.Code); r.Status != 302 || r.RespURL != newURL {
				found.stale++
				found.first = append(found.first, fmt.Sprintf("round %d: edit through %s answered 200, then %s redirected %d %q", i, f.id, n.id, r.Status, r.RespURL))
			}
		}
	}
	ops := c.cl.hist.Ops()
	anomalies := append(CheckNoOlderTargetAfterEdit(ops, win), CheckSingleTarget(ops)...)
	anomalies = append(anomalies, CheckNoReadAfterDelete(ops, win)...)
	found.anomalies = len(anomalies)
	found.first = append(found.first, anomalyStrings(anomalies)...)
	found.illegal = CheckLinearizable(ops, win, "", 10*time.Second).Illegal
	return found
}

package faults

import (
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDeleteThroughFollowerThenRead reproduces the read-after-delete
// anomaly on its own: a DELETE sent to a follower is answered 204, and a
// GET of the same code on the same follower right after must be 404. It
// repeats that 50 times and runs the read-after-delete and linearizability
// checkers over what it recorded.
func TestDeleteThroughFollowerThenRead(t *testing.T) {
	if testing.Short() {
		t.Skip("fault-injection test: skipped in -short mode")
	}
	found := deleteThroughFollower(t, buildBinary(t))
	if found.stale > 0 || found.anomalies > 0 || found.illegal > 0 {
		t.Errorf("a follower redirects a code after answering 204 to its delete: %v; first: %v", found, head(found.first, 3))
	}
}

// TestBrokenDeleteWaitIsCaught shows that the checkers catch a build that
// acknowledges deletes without waiting for them to be applied: the module
// is copied, both waits are cut out of the copy (the leader's wait for the
// voters, and the forwarding node's wait for the leader's index), and the
// same scenario runs against the result.
func TestBrokenDeleteWaitIsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("fault-injection test: skipped in -short mode")
	}
	bin := buildMutant(t, []mutation{
		{"cluster/propose.go", "\tif opts.Visible {\n\t\tn.awaitServers(index)\n\t}\n", ""},
		{"cluster/forward.go", "\t\terr = awaitLeaderIndex(ctx, n.machine, resp)\n", ""},
	})
	found := deleteThroughFollower(t, bin)
	t.Logf("broken build: %v", found)
	if found.anomalies == 0 || found.illegal == 0 {
		t.Errorf("the checkers did not catch deletes acknowledged before they were applied: %v", found)
	}
}

// deleteFindings is what deleteThroughFollower saw.
type deleteFindings struct {
	rounds, stale, anomalies, illegal int
	first                             []string
}

func (f deleteFindings) String() string {
	return fmt.Sprintf("%d of %d reads right after a 204 delete through a follower still redirected; read-after-delete anomalies %d, non-linearizable codes %d",
		f.stale, f.rounds, f.anomalies, f.illegal)
}

// deleteThroughFollower runs 50 rounds of create on the leader, delete
// through a follower, read on that follower at once, and checks them.
func deleteThroughFollower(t *testing.T, bin string) deleteFindings {
	t.Helper()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	c := startClusterOf(t, bin, 3, mrand.New(mrand.NewPCG(uint64(seed), 2)))
	leader, err := c.waitLeader(formTimeout)
	if err != nil {
		t.Fatal(err)
	}
	nodes := c.nodes()
	follower := nodes[(indexOf(nodes, leader)+1)%len(nodes)]
	found := deleteFindings{rounds: 50}
	for i := range found.rounds {
		create := c.cl.createOp(0, Create, leader, map[string]any{"url": fmt.Sprintf("https://example.com/del/%d/%d", seed, i)})
		if create.Status != 201 {
			t.Fatalf("round %d: create on the leader: %+v", i, create)
		}
		// The follower has the link before the delete.
		if !waitFound(c, follower, create.Code) {
			t.Fatalf("round %d: follower %s never redirects %s", i, follower.id, create.Code)
		}
		del := c.cl.deleteOp(0, follower, create.Code)
		if del.Status != 204 {
			t.Fatalf("round %d: delete through follower %s: %+v", i, follower.id, del)
		}
		if get := c.cl.readOp(0, Redirect, follower, create.Code); get.Status != 404 {
			found.stale++
		}
	}
	ops := c.cl.hist.Ops()
	anomalies := CheckNoReadAfterDelete(ops, nil)
	found.anomalies, found.first = len(anomalies), anomalyStrings(anomalies)
	found.illegal = CheckLinearizable(ops, nil, "", 10*time.Second).Illegal
	return found
}

// mutation replaces text that must occur exactly once in a file.
type mutation struct{ file, old, new string }

// buildMutant copies the module's Go packages, applies the mutations and
// builds linkraft from the copy. A mutation that no longer applies fails
// the test: the code it breaks has changed and the test must follow it.
func buildMutant(t *testing.T, muts []mutation) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("module root: %v", err)
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	// Everything but version control and a local data dir, so a package
	// added later is in the copy too.
	for _, e := range entries {
		if name := e.Name(); name != ".git" && name != "data" {
			if out, err := exec.Command("cp", "-r", filepath.Join(root, name), dir).CombinedOutput(); err != nil {
				t.Fatalf("copy %s: %v: %s", name, err, out)
			}
		}
	}
	for _, m := range muts {
		path := filepath.Join(dir, m.file)
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(src), m.old); n != 1 {
			t.Fatalf("mutation of %s: %q occurs %d times, want once", m.file, m.old, n)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(src), m.old, m.new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "linkraft-mutant")
	build := exec.Command("go", "build", "-o", bin, "./cmd/linkraft")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build mutant: %v\n%s", err, out)
	}
	return bin
}

// waitFound reads the code on n (GET, bounded) until it redirects.
func waitFound(c *cluster, n *fnode, code string) bool {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		a := c.cl.do("HEAD", n.httpAddr, "/"+code, nil, requestTimeout)
		if a.status == 302 {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func anomalyStrings(a []Anomaly) []string {
	out := make([]string, len(a))
	for i, x := range a {
		out[i] = x.String()
	}
	return out
}

package e2e

import (
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestWritesResumeWhenTheLeaderIsPaused: a create sent through a follower
// just after the leader froze (SIGSTOP: the process stays, its sockets stay
// open, nothing answers) must not wait on the frozen leader until its write
// timeout. The follower sends it again to the new leader as soon as one is
// elected, which its idempotency key makes safe, and the client gets 201.
// The write timeout is long (20 s) so that waiting it out cannot pass for a
// slow election: an election takes about a second. After SIGCONT the old
// leader catches up and redirects the new code too.
func TestWritesResumeWhenTheLeaderIsPaused(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	const writeTimeout = 20 * time.Second
	nodes := startCluster(t, 3, map[string]string{"write-timeout": writeTimeout.String()})
	leader, followers := waitOneLeader(t, formationBound, nodes...)
	before := followers[0].createURL(t, "https://example.com/paused/before")

	leader.signal(t, syscall.SIGSTOP)
	resumed := false
	resume := func() {
		if !resumed {
			leader.signal(t, syscall.SIGCONT)
			resumed = true
		}
	}
	t.Cleanup(resume)

	start := time.Now()
	l, status, err := followers[0].tryCreate("https://example.com/paused/during")
	elapsed := time.Since(start)
	t.Logf("create through %s with leader %s paused: %d after %v", followers[0].id, leader.id, status, elapsed.Round(time.Millisecond))
	if err != nil {
		t.Fatalf("create through a follower while the leader is paused: %v (after %v)", err, elapsed)
	}
	if elapsed > writeTimeout/2 {
		t.Fatalf("create through a follower took %v with the leader paused: it waited on the old leader instead of the new one", elapsed)
	}
	for _, n := range followers {
		n.requireRedirectHead(t, l.ShortCode, l.OriginalURL)
	}

	resume()
	if !eventually(10*time.Second, func() bool {
		r, err := leader.tryRequest(t, http.MethodHead, "/"+l.ShortCode, nil, nil)
		return err == nil && r.status == http.StatusFound
	}) {
		t.Fatalf("old leader %s does not redirect %s 10 s after SIGCONT", leader.id, l.ShortCode)
	}
	leader.requireRedirectHead(t, before.ShortCode, before.OriginalURL)
}

// signal sends sig to the node's process.
func (n *node) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to node %s: %v", sig, n.id, err)
	}
}

// TestCreatesSurviveTheLeaderFreezingMidRequest: creates with custom codes
// nobody else asks for stream through the followers while the leader is
// frozen (SIGSTOP) with some of them inside it. Those may have been
// applied before the freeze; the follower sends them again — to the new
// leader, or to itself when it wins the election — under the same
// idempotency key, and the answer must be the first outcome: never a 409
// for a code only one client asked for.
func TestCreatesSurviveTheLeaderFreezingMidRequest(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, map[string]string{"write-timeout": "5s"})
	for round := range 3 {
		leader, followers := waitOneLeader(t, 15*time.Second, nodes...)
		var mu sync.Mutex
		var wrong []string
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				via := followers[w%len(followers)]
				for i := 0; i < 400; i++ {
					select {
					case <-stop:
						return
					default:
					}
					code := "frz-" + itoa(round) + "-" + itoa(w) + "-" + itoa(i)
					body := []byte(`{"url":"https://example.com/` + code + `","custom_code":"` + code + `"}`)
					status, _, data, err := plainDo(via.client, http.MethodPost, "http://"+via.httpAddr+"/api/v1/urls", body)
					if err == nil && status != http.StatusCreated && status != http.StatusServiceUnavailable {
						mu.Lock()
						wrong = append(wrong, code+" via "+via.id+": "+itoa(status)+" "+string(data))
						mu.Unlock()
					}
				}
			}()
		}
		time.Sleep(300 * time.Millisecond)
		leader.signal(t, syscall.SIGSTOP)
		waitOneLeader(t, 15*time.Second, followers...)
		time.Sleep(500 * time.Millisecond)
		close(stop)
		wg.Wait()
		leader.signal(t, syscall.SIGCONT)
		if len(wrong) > 0 {
			t.Fatalf("round %d (leader %s frozen): %d creates of codes nobody else asked for were refused, first: %v", round, leader.id, len(wrong), wrong[:min(3, len(wrong))])
		}
	}
}

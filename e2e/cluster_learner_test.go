package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// What docs/API.md promises of a learner (POST /admin/join): it is
// promoted once it trails the leader by at most learnerMaxLag entries and
// answers. The leader looks every learnerLook.
const (
	learnerMaxLag = 256
	learnerLook   = 500 * time.Millisecond
)

// TestJoinAnswersBeforeTheState: a fourth node joins a three-node cluster
// holding 200 000 links through POST /admin/join. The join answers while
// the node is a learner (a non-voter catching up) that does not hold the
// links yet; while the state is on its way (held back on the link to the
// node) the node answers the leader but stays a learner, however long the
// leader looks; once the state arrives the leader promotes it to voter,
// never while it is far behind, and it serves every link from its own
// state.
func TestJoinAnswersBeforeTheState(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, _ := waitOneLeader(t, formationBound, nodes...)

	const links = 200_000
	target := func(i int) string { return fmt.Sprintf("https://example.com/learner/%d", i) }
	var b strings.Builder
	for i := range links {
		fmt.Fprintf(&b, `{"short_code":"ln%06d","original_url":"%s"}`+"\n", i, target(i))
	}
	r := leader.request(t, http.MethodPost, "/admin/import", http.Header{"Content-Type": {"application/x-ndjson"}}, []byte(b.String()))
	if r.status != http.StatusOK || !strings.Contains(string(r.body), fmt.Sprintf(`"created":%d,"skipped":0`, links)) {
		t.Fatalf("POST /admin/import: %v", r)
	}
	// An import ends with a snapshot that compacts the log: from then on
	// a new server gets the state as that one snapshot, a stream the link
	// below can hold back, and is the whole import behind until it lands.
	imported := leader.clusterView(t).AppliedIndex
	if !eventually(30*time.Second, func() bool { return snapshotAt(leader.dataDir) >= imported }) {
		t.Fatalf("%s took no snapshot of the import (index %d) in 30 s", leader.id, imported)
	}

	// node4 is reached, as its --advertise says, through a link that lets
	// the leader's questions through but holds back the state.
	link := newHeldLink(t, "127.0.0.1:0", heldAfter)
	joiner := startWaitingNode(t, "node4", leader.clusterKey, map[string]string{"advertise": link.addr()})
	link.serve(joiner.raftAddr)
	r = leader.postJSON(t, "/admin/join", map[string]any{"id": joiner.id, "raft_addr": link.addr(), "http_addr": joiner.httpAddr})
	if r.status != http.StatusOK {
		t.Fatalf("POST /admin/join: want 200, got %v", r)
	}
	var answer clusterView
	if err := json.Unmarshal(r.body, &answer); err != nil {
		t.Fatalf("join answer: %v", err)
	}
	if s, ok := answer.server("node4"); !ok || s.Suffrage != "Nonvoter" || !s.CatchingUp {
		t.Fatalf("the join answered with node4 as %+v (listed %v), want a non-voter catching up", s, ok)
	}
	// /health is 503 until node4 has the cluster's state; its links count
	// says how much of it arrived.
	var h health
	if r := joiner.get(t, "/health"); json.Unmarshal(r.body, &h) != nil || h.Links == links {
		t.Errorf("the join answered once node4 held every link (%v): it should not wait for the state", r)
	}

	// While the state is held back, node4 answers and is the whole import
	// behind: the leader, which looks every learnerLook, must leave it a
	// learner. Four looks from the first view that shows it so, then the
	// state goes through.
	var behindSince time.Time
	held := func() bool { return !behindSince.IsZero() && time.Since(behindSince) >= 4*learnerLook }
	deadline := time.Now().Add(20 * time.Second)
	for polls := 0; polls < 1000 && !held() && time.Now().Before(deadline); polls++ {
		s := learnerOf(t, leader)
		behind := s.ReplicationLag != nil && *s.ReplicationLag > learnerMaxLag
		switch {
		case s.Suffrage == "Voter":
			t.Fatalf("node4 was made a voter while its state was held back: %v", s)
		case !behind && s.ReplicationLag != nil && !behindSince.IsZero():
			t.Fatalf("node4 caught up while the link held its state back (a snapshot under %d bytes?): %v", heldAfter, s)
		case behind && behindSince.IsZero():
			behindSince = time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !held() {
		t.Fatalf("node4 did not show in GET /admin/cluster as answering and more than %d entries behind for %v: %v",
			learnerMaxLag, 4*learnerLook, learnerOf(t, leader))
	}
	link.let()

	if !eventually(membershipWait*4, func() bool {
		s := learnerOf(t, leader)
		if s.Suffrage == "Voter" && s.ReplicationLag != nil && *s.ReplicationLag > learnerMaxLag {
			t.Fatalf("node4 was made a voter far behind: %v; want at most %d entries behind", s, learnerMaxLag)
		}
		return s.Suffrage == "Voter" && !s.CatchingUp
	}) {
		t.Fatalf("node4 not promoted to voter: %+v", leader.clusterView(t))
	}
	if h := joiner.health(t); h.Links != links {
		t.Fatalf("node4 promoted holding %d links, want %d", h.Links, links)
	}
	for _, i := range []int{0, links / 2, links - 1} {
		joiner.requireRedirect(t, fmt.Sprintf("ln%06d", i), target(i))
	}
}

// learnerState is node4 as GET /admin/cluster shows it, with what the
// leader heard of its progress (absent when it did not answer).
type learnerState struct {
	ID             string  `json:"id"`
	Suffrage       string  `json:"suffrage"`
	CatchingUp     bool    `json:"catching_up"`
	AppliedIndex   *uint64 `json:"applied_index"`
	ReplicationLag *uint64 `json:"replication_lag"`
}

// String says what a failure needs of it.
func (s learnerState) String() string {
	known := func(v *uint64) string {
		if v == nil {
			return "unknown"
		}
		return strconv.FormatUint(*v, 10)
	}
	return fmt.Sprintf("%s %s (catching up %v, applied index %s, %s entries behind the leader)",
		s.ID, s.Suffrage, s.CatchingUp, known(s.AppliedIndex), known(s.ReplicationLag))
}

// learnerOf is node4 in leader's GET /admin/cluster; an empty state when
// the view could not be had or does not list it.
func learnerOf(t *testing.T, leader *node) learnerState {
	t.Helper()
	r, err := leader.tryRequest(t, http.MethodGet, "/admin/cluster", nil, nil)
	var v struct {
		Servers []learnerState `json:"servers"`
	}
	if err != nil || r.status != http.StatusOK || json.Unmarshal(r.body, &v) != nil {
		return learnerState{}
	}
	for _, s := range v.Servers {
		if s.ID == "node4" {
			return s
		}
	}
	return learnerState{}
}

// snapshotAt is the index of the newest snapshot in a node's data dir
// (snapshots/<term>-<index>-<time>), 0 when there is none.
func snapshotAt(dataDir string) uint64 {
	entries, err := os.ReadDir(filepath.Join(dataDir, "snapshots"))
	if err != nil {
		return 0
	}
	var newest uint64
	for _, e := range entries {
		parts := strings.Split(e.Name(), "-")
		if len(parts) != 3 || !e.IsDir() {
			continue // a snapshot being written ends in .tmp
		}
		if index, err := strconv.ParseUint(parts[1], 10, 64); err == nil {
			newest = max(newest, index)
		}
	}
	return newest
}

// heldLink is a TCP relay to a node. Until let, each connection carries
// at most after bytes towards the node and then waits. To a cluster port
// with heldAfter: questions and heartbeats, a few hundred bytes each,
// pass; a snapshot's stream stops (Raft gives a snapshot's stream a
// second per 256 KiB, so a hold of seconds does not fail it). With 0,
// nothing passes until let.
type heldLink struct {
	ln       net.Listener
	after    int
	released chan struct{}
	letOnce  sync.Once
	wg       sync.WaitGroup

	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

const heldAfter = 1 << 20

// newHeldLink listens on addr.
func newHeldLink(t *testing.T, addr string, after int) *heldLink {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	l := &heldLink{ln: ln, after: after, released: make(chan struct{})}
	t.Cleanup(l.close)
	return l
}

func (l *heldLink) addr() string { return l.ln.Addr().String() }

// let ends the hold.
func (l *heldLink) let() { l.letOnce.Do(func() { close(l.released) }) }

// serve relays what the link accepts to the node at to, until close.
func (l *heldLink) serve(to string) {
	l.wg.Go(func() {
		for {
			in, err := l.ln.Accept()
			if err != nil {
				return
			}
			out, err := net.DialTimeout("tcp", to, 5*time.Second)
			if err != nil || !l.track(in, out) {
				in.Close()
				if out != nil {
					out.Close()
				}
				continue
			}
			l.wg.Go(func() { l.towardsNode(in, out) })
			l.wg.Go(func() {
				io.Copy(in, out)
				in.Close()
			})
		}
	})
}

// track records a relayed connection's two ends for close; false once
// closed.
func (l *heldLink) track(in, out net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns = append(l.conns, in, out)
	return true
}

// relayed is the number of connections relayed so far.
func (l *heldLink) relayed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns) / 2
}

// towardsNode copies in to out, holding past l.after bytes until let.
func (l *heldLink) towardsNode(in, out net.Conn) {
	defer out.Close()
	buf := make([]byte, 32<<10)
	carried := 0
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if carried += n; carried > l.after {
				<-l.released // close lets it too
			}
			if _, werr := out.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// close stops the link, ends its connections and waits for its
// goroutines.
func (l *heldLink) close() {
	l.let()
	l.ln.Close()
	l.mu.Lock()
	l.closed = true
	for _, c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

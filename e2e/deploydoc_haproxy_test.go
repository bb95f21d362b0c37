package e2e

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestDeployDocHAProxy puts a real HAProxy in front of the first day's
// cluster, with the backend of docs/DEPLOY.md's recipe haproxy-health as
// rendered, and checks what section 5 promises of it: every node in while
// the cluster serves; a node that systemctl stops taken out while it still
// drains, so that no request through HAProxy fails, and back in once it
// has started; an election that takes no surviving node out.
func TestDeployDocHAProxy(t *testing.T) {
	skipIfShort(t)
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		// Debian installs it in /usr/sbin, which a user's PATH may lack.
		if bin = "/usr/sbin/haproxy"; exec.Command(bin, "-v").Run() != nil {
			realPartMissing(t, "haproxy is not installed", "the test runs docs/DEPLOY.md's HAProxy recipe with it: apt-get install haproxy (.ci/run and make deps do)")
		}
	}
	d := newDeployDoc(t)
	lb := &haproxyLB{d: d}
	d.runDay(t, append(d.firstDay(),
		// HAProxy lives as long as the day, not the step that starts it.
		docStep{"HAProxy with the doc's backend", func(st *testing.T) { lb.start(st, t, bin) }},
		docStep{"stop and start a follower behind HAProxy", lb.stopFollower},
		docStep{"an election behind HAProxy", lb.election},
	))
}

// haproxyLB is the HAProxy in front of lr1-lr3, on the workstation.
type haproxyLB struct {
	d     *deployDoc
	sock  string // its stats socket
	front string // its frontend, host:port
}

// start writes the operator's config, global and defaults around the
// recipe's backend, and runs HAProxy in the foreground until life ends.
func (lb *haproxyLB) start(t, life *testing.T, bin string) {
	d := lb.d
	dir := life.TempDir()
	lb.sock = filepath.Join(dir, "admin.sock")
	lb.front = net.JoinHostPort(d.ws.ip, itoa(freePortOn(t, d.ws.ip, false)))
	// No "timeout check" here: how long a check may take is the recipe's.
	cfg := "global\n    stats socket " + lb.sock + " mode 600 level admin\n" +
		"defaults\n    mode http\n    timeout connect 2s\n    timeout client 30s\n    timeout server 30s\n" +
		"frontend s\n    bind " + lb.front + "\n    default_backend linkraft\n" +
		d.render(t, d.ws, "haproxy-health", nil, nil)
	path := filepath.Join(dir, "haproxy.cfg")
	writeSimFile(t, path, cfg, 0o644)
	out := &lockedBuffer{}
	cmd := exec.Command(bin, "-f", path, "-db")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("haproxy -f %s -db: %v", path, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	life.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if life.Failed() {
			life.Logf("haproxy's output:\n%s\nits config:\n%s", lastLinesOf(out.String(), 30), cfg)
		}
	})
	t.Logf("HAProxy on %s has lr1-lr3 up %.1fs after it started", lb.front, lb.awaitUp(t, 15*time.Second).Seconds())
}

// lbServer is HAProxy's view of one server of the backend.
type lbServer struct {
	status  string // UP, DOWN, "UP 1/2" (one check failed), MAINT …
	check   string // the last check's result: L7OK, L7STS (wrong status), L4CON (refused) …
	chkfail int    // checks failed so far
}

// servers reads the backend's servers off the stats socket (show stat).
func (lb *haproxyLB) servers() (map[string]lbServer, error) {
	c, err := net.DialTimeout("unix", lb.sock, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	_, _ = io.WriteString(c, "show stat\n") // a failure shows as an empty answer
	b, err := io.ReadAll(c)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	col := map[string]int{}
	for i, name := range strings.Split(strings.TrimPrefix(lines[0], "# "), ",") {
		col[name] = i
	}
	got := map[string]lbServer{}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) < len(col) || f[col["pxname"]] != "linkraft" || f[col["svname"]] == "BACKEND" {
			continue
		}
		n, _ := strconv.Atoi(f[col["chkfail"]])
		got[f[col["svname"]]] = lbServer{f[col["status"]], strings.TrimPrefix(f[col["check_status"]], "* "), n}
	}
	return got, nil
}

// awaitUp waits until HAProxy has lr1-lr3 up, their last check passed,
// and returns how long that took.
func (lb *haproxyLB) awaitUp(t *testing.T, timeout time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	var s map[string]lbServer
	var err error
	if !eventuallyEvery(timeout, 100*time.Millisecond, func() bool {
		s, err = lb.servers()
		up := 0
		for _, v := range s {
			if v.status == "UP" && v.check == "L7OK" {
				up++
			}
		}
		return err == nil && up == 3
	}) {
		t.Fatalf("HAProxy does not have lr1-lr3 up with a passing check after %v: %+v (%v)", timeout, s, err)
	}
	return time.Since(began)
}

func (lb *haproxyLB) stopFollower(t *testing.T) {
	d := lb.d
	h, err := d.get("http://" + d.vm("lr1").ip + ":8080/health")
	if err != nil {
		t.Fatal(err)
	}
	m := d.vm("lr2")
	if h.Leader == "lr2" {
		m = d.vm("lr3")
	}
	const want = "https://example.com/behind-haproxy"
	code := d.shorten(t, d.vm("lr1"), want)
	for _, n := range d.first3() {
		if !eventually(5*time.Second, func() bool { return d.redirect(n, code) == want }) {
			t.Fatalf("the link %s made through lr1 does not redirect on %s within 5 s", code, n.name)
		}
	}

	// For 8 s from systemctl stop, past the drain's 5 s, visitors come
	// through HAProxy while the test watches HAProxy's verdict on m and
	// m's own /health: the doc promises m out before its listener closes.
	began := time.Now()
	var drainAfter, downAfter, closedAfter time.Duration
	var sent int
	var failed []string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ; sent < 1000 && time.Since(began) < 8*time.Second; sent++ {
			at := time.Since(began)
			if s, err := lb.servers(); err == nil && s[m.name].status == "DOWN" && downAfter == 0 {
				downAfter = at
			}
			if resp, err := d.client.Get("http://" + m.ip + ":8080/health"); err != nil && closedAfter == 0 {
				closedAfter = at
			} else if err == nil {
				if resp.StatusCode == 503 && drainAfter == 0 {
					drainAfter = at
				}
				resp.Body.Close()
			}
			// A visitor, through HAProxy's frontend.
			if resp, err := d.client.Get("http://" + lb.front + "/" + code); err != nil {
				failed = append(failed, fmt.Sprintf("%.2fs: %v", at.Seconds(), err))
			} else if resp.Body.Close(); resp.StatusCode != 302 || resp.Header.Get("Location") != want {
				failed = append(failed, fmt.Sprintf("%.2fs: %s to %q", at.Seconds(), resp.Status, resp.Header.Get("Location")))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	d.exec(t, m, "systemctl-stop", "", "systemctl stop linkraft\n", time.Minute)
	stopped := time.Since(began)
	wg.Wait()
	t.Logf("systemctl stop on %s: /health 503 after %.2fs, HAProxy has it DOWN after %.2fs, its listener closed after %.2fs, "+
		"the process gone after %.2fs; %d of %d requests through HAProxy failed",
		m.name, drainAfter.Seconds(), downAfter.Seconds(), closedAfter.Seconds(), stopped.Seconds(), len(failed), sent)
	switch {
	case drainAfter == 0 || closedAfter != 0 && drainAfter > closedAfter:
		t.Errorf("systemctl stop on %s: its /health never answered 503 before its listener closed (--shutdown-drain is 5 s)", m.name)
	case downAfter == 0:
		t.Errorf("systemctl stop on %s: HAProxy never took it out (inter 1s fall 2)", m.name)
	case closedAfter == 0 || downAfter > closedAfter:
		t.Errorf("systemctl stop on %s: HAProxy took it out %.2fs after the stop, but its listener closed after %.2fs: "+
			"HAProxy sent requests to a closed port", m.name, downAfter.Seconds(), closedAfter.Seconds())
	}
	if len(failed) > 0 || sent < 100 {
		t.Errorf("during systemctl stop on %s, %d of %d requests through HAProxy failed (the doc promises none with these settings): %s",
			m.name, len(failed), sent, firstFew(failed))
	}

	// Back in after two passing checks (rise 2).
	began = time.Now()
	d.exec(t, m, "systemctl-start", "", "systemctl start linkraft\n", time.Minute)
	started := time.Since(began)
	t.Logf("systemctl start on %s returned after %.2fs; HAProxy has it UP after %.2fs",
		m.name, started.Seconds(), (started + lb.awaitUp(t, 30*time.Second)).Seconds())
}

// election ends the leader as a crash would (SIGKILL: a systemctl stop
// hands leadership over first, so there would be no election) and checks
// that the survivors, without a leader until they elect one, stay in.
func (lb *haproxyLB) election(t *testing.T) {
	d := lb.d
	h, err := d.get("http://" + d.vm("lr1").ip + ":8080/health")
	if err != nil {
		t.Fatal(err)
	}
	leader, pid := d.vm(h.Leader), 0
	var survivors []*simHost
	for _, m := range d.first3() {
		if m == leader {
			pid = m.servicePID("linkraft")
		} else {
			survivors = append(survivors, m)
		}
	}
	before, err := lb.servers()
	if pid == 0 || err != nil {
		t.Fatalf("before the election: leader %q (pid %d), HAProxy %+v (%v)", h.Leader, pid, before, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	var problems []string
	leaderless, newLeader := 0, ""
	// At least 6 s: several checks of each survivor, the election included;
	// HAProxy's verdict is its count of failed checks, compared after.
	for i := 0; i < 200 && time.Since(began) < 20*time.Second && (newLeader == "" || time.Since(began) < 6*time.Second); i++ {
		for _, m := range survivors {
			switch hh, err := d.get("http://" + m.ip + ":8080/health"); {
			case err != nil:
				problems = append(problems, fmt.Sprintf("%.2fs: /health on %s: %v", time.Since(began).Seconds(), m.name, err))
			case hh.WritesReason == "no_leader":
				leaderless++
			case hh.Leader != "" && hh.Leader != leader.name:
				newLeader = hh.Leader
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	after, err := lb.servers()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s killed: %s elected; /health answered 200 no_leader %d times meanwhile; HAProxy has %s %s",
		leader.name, newLeader, leaderless, leader.name, after[leader.name].status)
	for _, m := range survivors {
		if n := after[m.name].chkfail - before[m.name].chkfail; n > 0 || after[m.name].status != "UP" {
			problems = append(problems, fmt.Sprintf("HAProxy has %s %s, %d checks failed (last: %s)", m.name, after[m.name].status, n, after[m.name].check))
		}
	}
	if len(problems) > 0 {
		t.Errorf("while the survivors of %s's crash elected a leader, HAProxy should keep them in (/health 200 with or without a leader): %s",
			leader.name, firstFew(problems))
	}
	if newLeader == "" {
		t.Errorf("no survivor of %s's crash reports a new leader within 20 s", leader.name)
	}
	if after[leader.name].status != "DOWN" {
		t.Errorf("HAProxy has the crashed %s %s, want DOWN", leader.name, after[leader.name].status)
	}
	// Back to three, as the operator would.
	d.exec(t, leader, "systemctl-start", "", "systemctl start linkraft\n", time.Minute)
	lb.awaitUp(t, 30*time.Second)
}

// firstFew joins the first ten of what went wrong, for a message.
func firstFew(what []string) string { return strings.Join(what[:min(len(what), 10)], "; ") }

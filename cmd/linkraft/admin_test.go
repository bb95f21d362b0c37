package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// fakeNode is a fasthttp server answering canned documents, recording
// every request it gets.
type fakeNode struct {
	addr    string // host:port
	answers map[string]cannedAnswer

	mu   sync.Mutex
	reqs []seenRequest
}

type cannedAnswer struct {
	status int
	ctype  string
	body   string
}

type seenRequest struct {
	method, path, auth, ctype string
	body                      []byte
}

func startFakeNode(t *testing.T, answers map[string]cannedAnswer) *fakeNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &fakeNode{addr: ln.Addr().String(), answers: answers}
	srv := &fasthttp.Server{Handler: n.handle}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return n
}

func (n *fakeNode) handle(ctx *fasthttp.RequestCtx) {
	n.mu.Lock()
	n.reqs = append(n.reqs, seenRequest{
		method: string(ctx.Method()), path: string(ctx.RequestURI()),
		auth:  string(ctx.Request.Header.Peek("Authorization")),
		ctype: string(ctx.Request.Header.ContentType()),
		body:  append([]byte(nil), ctx.PostBody()...),
	})
	n.mu.Unlock()
	a, ok := n.answers[string(ctx.Method())+" "+string(ctx.Path())]
	if !ok {
		a = problem(404, "no such page")
	}
	ctx.SetStatusCode(a.status)
	ctx.SetContentType(a.ctype)
	ctx.SetBodyString(a.body)
}

func (n *fakeNode) requests() []seenRequest {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]seenRequest(nil), n.reqs...)
}

// only returns the single request the node got.
func (n *fakeNode) only(t *testing.T) seenRequest {
	t.Helper()
	reqs := n.requests()
	if len(reqs) != 1 {
		t.Fatalf("node got %d requests, want 1: %+v", len(reqs), reqs)
	}
	return reqs[0]
}

// sent returns the single request the node got for method and path.
func (n *fakeNode) sent(t *testing.T, method, path string) seenRequest {
	t.Helper()
	var found []seenRequest
	for _, r := range n.requests() {
		if r.method == method && r.path == path {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("node got %d %s %s, want 1: %+v", len(found), method, path, n.requests())
	}
	return found[0]
}

func jsonAnswer(body string) cannedAnswer {
	return cannedAnswer{status: 200, ctype: "application/json", body: body}
}

func problem(status int, detail string) cannedAnswer {
	b, _ := json.Marshal(map[string]any{
		"type": "about:blank", "title": fasthttp.StatusMessage(status), "status": status, "detail": detail, "error": detail,
	})
	return cannedAnswer{status: status, ctype: "application/problem+json", body: string(b)}
}

// clusterJSON is a leader's answer as the server writes it today.
func clusterJSON(role string, lastContact time.Time) string {
	return `{"node_id":"n1","role":"` + role + `","leader":"n1","leader_raft_addr":"127.0.0.1:9001","term":7,` +
		`"commit_index":120,"applied_index":118,"servers":[` +
		`{"id":"n1","raft_addr":"127.0.0.1:9001","suffrage":"Voter","leader":true,"reachable":true,"last_contact":"` + lastContact.Format(time.RFC3339Nano) + `"},` +
		`{"id":"n2","raft_addr":"127.0.0.1:9002","http_addr":"127.0.0.1:8002","suffrage":"Voter","leader":false,"reachable":true,"last_contact":"` + lastContact.Add(-2*time.Second).Format(time.RFC3339Nano) + `","applied_index":118,"replication_lag":0},` +
		`{"id":"n3","raft_addr":"127.0.0.1:9003","suffrage":"Nonvoter","leader":false,"reachable":false,"future_field":{"x":1}},` +
		`{"id":"n4","raft_addr":"127.0.0.1:9004","suffrage":"Nonvoter","leader":false,"reachable":true,"last_contact":"` + lastContact.Format(time.RFC3339Nano) + `","applied_index":18,"replication_lag":100,"catching_up":true}` +
		`],"http_addr":"127.0.0.1:8001"}` + "\n"
}

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// rowFields returns the whitespace-separated fields of the output line
// starting with prefix.
func rowFields(t *testing.T, out, prefix string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, prefix) {
			return strings.Fields(line)
		}
	}
	t.Fatalf("no line starting with %q in:\n%s", prefix, out)
	return nil
}

func TestStatusPrintsTable(t *testing.T) {
	n := startFakeNode(t, map[string]cannedAnswer{"GET /admin/cluster": jsonAnswer(clusterJSON("leader", time.Now()))})
	// host:port without a scheme is accepted.
	code, out, errOut := runCmd(t, "status", "--addr", n.addr, "--admin-token", "s3cret")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	req := n.only(t)
	if req.method != "GET" || req.path != "/admin/cluster" || req.auth != "Bearer s3cret" {
		t.Fatalf("request = %+v", req)
	}
	for prefix, want := range map[string][]string{
		"answered by:":   {"answered", "by:", "n1", "(leader)", "http", "127.0.0.1:8001"},
		"leader:":        {"leader:", "n1", "at", "127.0.0.1:9001"},
		"term:":          {"term:", "7"},
		"commit index:":  {"commit", "index:", "120"},
		"applied index:": {"applied", "index:", "118"},
		"ID ":            {"ID", "RAFT", "ADDR", "HTTP", "ADDR", "SUFFRAGE", "LEADER", "REACHABLE", "APPLIED", "LAG", "LAST", "CONTACT"},
		"n1 ":            {"n1", "127.0.0.1:9001", "127.0.0.1:8001", "voter", "*", "yes", "-", "-", "now"},
		"n2 ":            {"n2", "127.0.0.1:9002", "127.0.0.1:8002", "voter", "-", "yes", "118", "0", "2s", "ago"},
		"n3 ":            {"n3", "127.0.0.1:9003", "-", "nonvoter", "-", "no", "-", "-", "-"},
		"n4 ":            {"n4", "127.0.0.1:9004", "-", "learner", "-", "yes", "18", "100", "now"},
	} {
		if got := rowFields(t, out, prefix); !reflect.DeepEqual(got, want) {
			t.Errorf("line %q = %q, want %q\nfull output:\n%s", prefix, got, want, out)
		}
	}
	if strings.Contains(out, "?") {
		t.Errorf("the leader's answer has no unknown reachability:\n%s", out)
	}
}

func TestStatusFromFollowerMarksUnknownReachability(t *testing.T) {
	doc := `{"node_id":"n2","role":"follower","leader":"","leader_raft_addr":"","term":3,"commit_index":5,"applied_index":5,` +
		`"servers":[{"id":"n1","raft_addr":"a:1","suffrage":"Voter","leader":false,"reachable":false},` +
		`{"id":"n2","raft_addr":"b:1","suffrage":"Voter","leader":false,"reachable":true}],"http_addr":"b:2"}`
	n := startFakeNode(t, map[string]cannedAnswer{"GET /admin/cluster": jsonAnswer(doc)})
	code, out, _ := runCmd(t, "status", "--addr", "http://"+n.addr+"/")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got := rowFields(t, out, "n1 "); got[5] != "?" {
		t.Errorf("n1 reachability = %q, want ?\n%s", got[5], out)
	}
	if got := rowFields(t, out, "n2 "); got[2] != "b:2" || got[5] != "yes" {
		t.Errorf("n2 row = %q\n%s", got, out)
	}
	if !strings.Contains(out, "leader:         none known") {
		t.Errorf("no leader not shown:\n%s", out)
	}
	if n.only(t).auth != "" {
		t.Error("Authorization sent without a token")
	}
}

func TestStatusJSONAndEnvironment(t *testing.T) {
	body := clusterJSON("leader", time.Now())
	n := startFakeNode(t, map[string]cannedAnswer{"GET /admin/cluster": jsonAnswer(body)})
	t.Setenv("LINKRAFT_ADDR", n.addr)
	t.Setenv("LINKRAFT_ADMIN_TOKEN", "from-env")
	code, out, _ := runCmd(t, "status", "--json")
	if code != 0 || out != body {
		t.Fatalf("exit %d, output %q, want the raw answer", code, out)
	}
	if got := n.only(t).auth; got != "Bearer from-env" {
		t.Fatalf("Authorization = %q", got)
	}
}

func TestJoin(t *testing.T) {
	n := startFakeNode(t, map[string]cannedAnswer{"POST /admin/join": jsonAnswer(clusterJSON("leader", time.Now()))})
	code, out, errOut := runCmd(t, "join", "--addr", n.addr, "--admin-token", "tok",
		"--id", "n4", "--raft-addr", "10.0.0.4:8081", "--http-addr", "10.0.0.4:8080")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	req := n.only(t)
	if req.method != "POST" || req.path != "/admin/join" || req.auth != "Bearer tok" || req.ctype != "application/json" {
		t.Fatalf("request = %+v", req)
	}
	var sent map[string]string
	if err := json.Unmarshal(req.body, &sent); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"id": "n4", "raft_addr": "10.0.0.4:8081", "http_addr": "10.0.0.4:8080"}; !reflect.DeepEqual(sent, want) {
		t.Fatalf("body = %v, want %v", sent, want)
	}
	if !strings.HasPrefix(out, "joined n4 (raft 10.0.0.4:8081)\n") || !strings.Contains(out, "RAFT ADDR") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestJoinConflict(t *testing.T) {
	n := startFakeNode(t, map[string]cannedAnswer{
		"POST /admin/join": problem(409, "id or address already belongs to another server: n2 at 127.0.0.1:9002"),
	})
	code, out, errOut := runCmd(t, "join", "--addr", n.addr, "--id", "n2", "--raft-addr", "127.0.0.1:9009")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	if want := "linkraft join: 409 id or address already belongs to another server: n2 at 127.0.0.1:9002\n"; errOut != want {
		t.Fatalf("stderr = %q, want %q", errOut, want)
	}
}

func TestLeave(t *testing.T) {
	n := startFakeNode(t, map[string]cannedAnswer{"POST /admin/leave": jsonAnswer(clusterJSON("leader", time.Now()))})
	code, out, _ := runCmd(t, "leave", "--id", "n3", "--addr", n.addr)
	if code != 0 || !strings.HasPrefix(out, "removed n3\n") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	// What the operator does next: n3 still runs, out of the cluster for
	// good on its data dir.
	next, _, _ := strings.Cut(strings.TrimPrefix(out, "removed n3\n"), "\n\n")
	for _, want := range []string{
		`n3 takes no further part in the cluster: its /health answers 503 "removed"`,
		"Stop it",
		"empty its data dir, start it again",
		"linkraft join --id n3 --raft-addr HOST:PORT --http-addr HOST:PORT",
	} {
		if !strings.Contains(next, want) {
			t.Errorf("after \"removed n3\", want %q; the advice is:\n%s", want, next)
		}
	}
	if !strings.Contains(out, "n1") {
		t.Errorf("the cluster's view after the removal is missing:\n%s", out)
	}
	req := n.only(t)
	if req.method != "POST" || req.path != "/admin/leave" || string(req.body) != `{"id":"n3"}` {
		t.Fatalf("request = %+v body %s", req, req.body)
	}
}

func TestJoinNonVoterAndPromote(t *testing.T) {
	n := startFakeNode(t, map[string]cannedAnswer{
		"POST /admin/join":    jsonAnswer(clusterJSON("leader", time.Now())),
		"POST /admin/promote": jsonAnswer(clusterJSON("leader", time.Now())),
	})
	code, out, errOut := runCmd(t, "join", "--addr", n.addr, "--id", "r1", "--raft-addr", "10.0.0.9:8081", "--non-voter")
	if code != 0 || !strings.HasPrefix(out, "joined r1") {
		t.Fatalf("join exit %d: %s", code, errOut)
	}
	if req := n.only(t); string(req.body) != `{"http_addr":"","id":"r1","non_voter":true,"raft_addr":"10.0.0.9:8081"}` {
		t.Fatalf("join body %s", req.body)
	}
	code, out, errOut = runCmd(t, "promote", "--addr", n.addr, "--id", "r1")
	if code != 0 || !strings.HasPrefix(out, "promoted r1\n") {
		t.Fatalf("promote exit %d: %s%s", code, out, errOut)
	}
	reqs := n.requests()
	if req := reqs[len(reqs)-1]; len(reqs) != 2 || req.path != "/admin/promote" || string(req.body) != `{"id":"r1"}` {
		t.Fatalf("requests %+v, want the join then one promote", reqs)
	}
}

func TestLeaveUnknownID(t *testing.T) {
	n := startFakeNode(t, map[string]cannedAnswer{"POST /admin/leave": problem(404, "no server with that id in the cluster")})
	code, out, errOut := runCmd(t, "leave", "--addr", n.addr, "--id", "nope")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	if want := "linkraft leave: 404 no server with that id in the cluster\n"; errOut != want {
		t.Fatalf("stderr = %q, want %q", errOut, want)
	}
}

func TestUnauthorizedHintsAtToken(t *testing.T) {
	n := startFakeNode(t, map[string]cannedAnswer{
		"GET /admin/cluster": problem(401, "admin endpoints need Authorization: Bearer <admin token>"),
	})
	t.Setenv("LINKRAFT_ADMIN_TOKEN", "")
	os.Unsetenv("LINKRAFT_ADMIN_TOKEN")
	code, _, errOut := runCmd(t, "status", "--addr", n.addr)
	if code != 1 || !strings.HasPrefix(errOut, "linkraft status: 401 admin endpoints need Authorization") ||
		!strings.Contains(errOut, "--admin-token") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestNonProblemErrorBody(t *testing.T) {
	n := startFakeNode(t, map[string]cannedAnswer{
		"GET /admin/cluster": {status: 502, ctype: "text/html", body: "<html>\n  bad   gateway\n</html>"},
	})
	code, _, errOut := runCmd(t, "status", "--addr", n.addr)
	if code != 1 || errOut != "linkraft status: 502 <html> bad gateway </html>\n" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestUsageErrors(t *testing.T) {
	n := startFakeNode(t, nil)
	for _, args := range [][]string{
		{"status", "--addr", n.addr, "extra"},
		{"status", "--addr", n.addr, "--no-such-flag"},
		{"status", "--addr", "ftp://" + n.addr},
		{"status", "--addr", n.addr, "--timeout", "0s"},
		{"join", "--addr", n.addr, "--raft-addr", "10.0.0.4:8081"},
		{"join", "--addr", n.addr, "--id", "n4"},
		{"leave", "--addr", n.addr},
		{"backup", "--addr", n.addr, "file"},
		{"restore", "--addr", n.addr},
		{"restore", "--addr", n.addr, "a", "b"},
		{"recover", "--data-dir", t.TempDir()},
		{"recover", "--peers", "p.json", "extra"},
	} {
		code, out, errOut := runCmd(t, args...)
		if code != 2 || out != "" || errOut == "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and a message", args, code, out, errOut)
		}
	}
	if reqs := n.requests(); len(reqs) != 0 {
		t.Errorf("usage errors sent requests: %+v", reqs)
	}
	for _, cmd := range []string{"status", "join", "leave", "promote", "backup", "restore", "recover", "health", "import", "serve", "bench", "keygen"} {
		if code, _, errOut := runCmd(t, cmd, "-h"); code != 0 || !strings.Contains(errOut, "Usage: linkraft "+cmd) {
			t.Errorf("%s -h: exit %d, stderr %q", cmd, code, errOut)
		}
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	start := time.Now()
	code, out, errOut := runCmd(t, "status", "--addr", closed, "--timeout", "2s")
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "linkraft status: cannot reach http://"+closed+": ") {
		t.Fatalf("refused: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("refused connection took %s", d)
	}

	// A node that accepts but never answers: bounded by --timeout.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	start = time.Now()
	code, _, errOut = runCmd(t, "leave", "--addr", silent.Addr().String(), "--timeout", "300ms", "--id", "n2")
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("silent node: took %s despite --timeout 300ms", d)
	}
	if code != 1 || !strings.HasPrefix(errOut, "linkraft leave: no answer from http://"+silent.Addr().String()+" within 300ms") {
		t.Fatalf("silent node: exit %d, stderr %q", code, errOut)
	}
}

func TestBackupToFile(t *testing.T) {
	backup := "LINKRAFT\x00\x01binary\xffbackup"
	n := startFakeNode(t, map[string]cannedAnswer{
		"GET /admin/backup": {status: 200, ctype: "application/octet-stream", body: backup},
	})
	dir := t.TempDir()
	out := filepath.Join(dir, "b.bak")
	code, stdout, errOut := runCmd(t, "backup", "--addr", n.addr, "--admin-token", "tok", "-o", out)
	if code != 0 || stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, errOut)
	}
	got, err := os.ReadFile(out)
	if err != nil || string(got) != backup {
		t.Fatalf("backup file = %q, %v", got, err)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Fatal("left a .tmp file behind")
	}
	req := n.only(t)
	if req.method != "GET" || req.path != "/admin/backup" || req.auth != "Bearer tok" {
		t.Fatalf("request = %+v", req)
	}

	// To standard output.
	code, stdout, _ = runCmd(t, "backup", "--addr", n.addr)
	if code != 0 || stdout != backup {
		t.Fatalf("stdout backup: exit %d, %q", code, stdout)
	}
}

func TestFailedBackupKeepsOldFile(t *testing.T) {
	n := startFakeNode(t, map[string]cannedAnswer{"GET /admin/backup": problem(500, "backup failed")})
	out := filepath.Join(t.TempDir(), "b.bak")
	if err := os.WriteFile(out, []byte("previous backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCmd(t, "backup", "--addr", n.addr, "-o", out)
	if code != 1 || errOut != "linkraft backup: 500 backup failed\n" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if got, _ := os.ReadFile(out); string(got) != "previous backup" {
		t.Fatalf("old backup overwritten: %q", got)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Fatal("left a .tmp file behind")
	}
}

func TestRestore(t *testing.T) {
	answer := `{"restored":true,"links":42}` + "\n"
	n := startFakeNode(t, map[string]cannedAnswer{"POST /admin/restore": jsonAnswer(answer)})
	backup := []byte("LINKRAFT\x00backup bytes\xff")
	file := filepath.Join(t.TempDir(), "b.bak")
	if err := os.WriteFile(file, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	// Flags after the file name work too.
	code, out, errOut := runCmd(t, "restore", file, "--addr", n.addr, "--admin-token", "tok")
	if code != 0 || out != answer {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	req := n.only(t)
	if req.method != "POST" || req.path != "/admin/restore" || req.auth != "Bearer tok" ||
		req.ctype != "application/octet-stream" || !bytes.Equal(req.body, backup) {
		t.Fatalf("request = %+v", req)
	}

	// From standard input.
	var stdout, stderr bytes.Buffer
	if code := adminRestore([]string{"--addr", n.addr, "-"}, bytes.NewReader(backup), &stdout, &stderr); code != 0 || stdout.String() != answer {
		t.Fatalf("stdin: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	if reqs := n.requests(); len(reqs) != 2 || !bytes.Equal(reqs[1].body, backup) {
		t.Fatalf("stdin restore sent %+v", reqs)
	}

	// An empty or missing file is refused before anything is sent.
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	for _, f := range []string{empty, filepath.Join(t.TempDir(), "missing")} {
		if code, _, errOut := runCmd(t, "restore", "--addr", n.addr, f); code != 1 || !strings.HasPrefix(errOut, "linkraft restore: ") {
			t.Fatalf("%s: exit %d, stderr %q", f, code, errOut)
		}
	}
	if len(n.requests()) != 2 {
		t.Fatal("a refused restore was sent")
	}
}

func TestRestoreRejected(t *testing.T) {
	n := startFakeNode(t, map[string]cannedAnswer{
		"POST /admin/restore": problem(400, "not a valid linkraft backup: bad magic"),
	})
	file := filepath.Join(t.TempDir(), "b.bak")
	os.WriteFile(file, []byte("garbage"), 0o600)
	code, out, errOut := runCmd(t, "restore", "--addr", n.addr, file)
	if code != 1 || out != "" || errOut != "linkraft restore: 400 not a valid linkraft backup: bad magic\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestRestoreForeign: --foreign asks the node, on purpose, to restore a
// backup the cluster cannot authenticate; without it nothing says so, and
// the node's refusal, which names the flag, is printed as it came.
func TestRestoreForeign(t *testing.T) {
	refusal := "backup authentication failed: the backup was not made by a cluster holding this cluster key; restore it with --foreign"
	n := startFakeNode(t, map[string]cannedAnswer{"POST /admin/restore": problem(400, refusal)})
	file := filepath.Join(t.TempDir(), "b.bak")
	os.WriteFile(file, []byte("LKRB backup bytes"), 0o600)
	if code, _, errOut := runCmd(t, "restore", "--addr", n.addr, file); code != 1 || errOut != "linkraft restore: 400 "+refusal+"\n" {
		t.Fatalf("without --foreign: exit %d, stderr %q", code, errOut)
	}
	runCmd(t, "restore", "--addr", n.addr, "--foreign", file)
	reqs := n.requests()
	if len(reqs) != 2 || reqs[0].path != "/admin/restore" || reqs[1].path != "/admin/restore?foreign=true" {
		t.Fatalf("requests %+v; want /admin/restore, then /admin/restore?foreign=true", reqs)
	}
}

func TestNormalizeAddr(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8080":          "http://127.0.0.1:8080",
		":8080":                   "http://127.0.0.1:8080",
		"node1:8080":              "http://node1:8080",
		"http://node1:8080/":      "http://node1:8080",
		"https://lr.example.com":  "https://lr.example.com",
		"http://[::1]:8080":       "http://[::1]:8080",
		" http://proxy/linkraft/": "http://proxy/linkraft",
	} {
		if got, err := normalizeAddr(in); err != nil || got != want {
			t.Errorf("normalizeAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "ftp://x", "http://", "http://x/?a=b", "http://u:p@x"} {
		if got, err := normalizeAddr(bad); err == nil {
			t.Errorf("normalizeAddr(%q) = %q, want an error", bad, got)
		}
	}
}

func TestRecoverCommandRefusals(t *testing.T) {
	peers := filepath.Join(t.TempDir(), "peers.json")
	os.WriteFile(peers, []byte(`[{"id":"n1","address":"127.0.0.1:8081"}]`), 0o600)
	code, out, errOut := runCmd(t, "recover", "--data-dir", t.TempDir(), "--peers", peers)
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "linkraft recover: no Raft state in ") {
		t.Fatalf("empty data dir: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	os.WriteFile(peers, []byte(`[{"id":"n1"`), 0o600)
	code, _, errOut = runCmd(t, "recover", "--data-dir", t.TempDir(), "--peers", peers)
	if code != 1 || !strings.Contains(errOut, "peers file") {
		t.Fatalf("bad peers: exit %d, stderr %q", code, errOut)
	}
}

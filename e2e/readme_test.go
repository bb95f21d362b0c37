package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readmeSkips are the lines of README's "Using it" that cannot run against
// one test node on loopback, each with why. Every entry must match exactly
// one line, so the list cannot outlive the README.
var readmeSkips = []struct{ line, why string }{
	{"open http://localhost:8080/ui/", "opens a browser; TestBrowserUI drives the web UI"},
	{"/admin/join -d", "joins n2 at 10.0.0.2, a machine that is not here (and a test stays on loopback)"},
	{"/admin/leave -d", "removes n2, which the skipped join never added"},
	{"/admin/leadership-transfer", "a single node has no other voter to hand leadership to (409)"},
	{"/admin/webhooks -d", "would POST every event to example.com, off this machine"},
}

// readmePrelude runs before the first line. The PATH line is the quick
// start's own; the curl function makes an HTTP error answer (>= 400) fail
// the line, as a reader sees it fail, unless README_ALLOW_4XX is set for a
// line whose comment expects one. -q and --noproxy keep a ~/.curlrc or a
// proxy setting from changing what the node is asked.
const readmePrelude = `export PATH="$PWD:$PATH"
curl() {
	if [ -n "${README_ALLOW_4XX-}" ]; then command curl -q --noproxy '*' --max-time 20 "$@"
	else command curl -q --noproxy '*' --max-time 20 --fail-with-body "$@"; fi
}
`

// TestReadmeWalkthrough runs README's "Using it" examples in order, as
// written, the way a reader does after the quick start: a node started as
// `./linkraft serve` in a fresh directory (its own ports on 127.0.0.1, so
// data/admin.key lies where README says), `linkraft` on PATH and
// LINKRAFT_ADDR naming the node. The only change to a line is the node's
// address for localhost:8080; readmeSkips lists what does not run.
//
// Every line runs in one bash, so the variables one line sets reach the
// next, and the run stops at the first line that fails: exit status not 0
// (linkraft exits 0 only on a 2xx, curl fails on >= 400; see
// readmePrelude). Then each line's output must hold what the line says:
// the status of its trailing comment ("# 302") in a -i/-I answer, the
// Location it names ("Location: URL" or "→ URL"), the keys a comment
// such as `# {"created","skipped","failed"}` lists; a `curl -s` answer is
// one JSON value in which nothing carries a status >= 400 (a problem, a
// bulk item refused), or Prometheus text where the comment says so; the
// file a -o names is not empty.
func TestReadmeWalkthrough(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	// The test plays the quick start itself: it must still be this one.
	for _, want := range []string{"    make build && ./linkraft serve\n", "`export PATH=$PWD:$PATH`"} {
		if !strings.Contains(text, want) {
			t.Fatalf("README's quick start no longer says %q: update how this test starts the node", want)
		}
	}
	steps := readmeSteps(t, text, "\n## Using it\n", "\n## A three-node cluster")

	n := newNode(t, "vm")
	n.bin = filepath.Join(n.dataDir, "linkraft") // the working dir is the reader's checkout
	if err := os.Symlink(binPath, n.bin); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		n.args = []string{"serve", "--http-addr=" + n.httpAddr, "--raft-addr=" + n.raftAddr, "--gossip-addr=" + n.gossipAddr}
		n.launch()
		err := n.waitLeader()
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(n.out.String(), "address already in use") {
			t.Fatalf("./linkraft serve did not become leader: %v", err)
		}
		n.kill()
		n.pickPorts(t)
	}
	keyFile := filepath.Join(n.dataDir, "data", "admin.key")
	if !eventually(10*time.Second, func() bool { _, err := os.Stat(keyFile); return err == nil }) {
		t.Fatalf("the quick start's node wrote no data/admin.key within 10 s")
	}

	var script strings.Builder
	script.WriteString(readmePrelude)
	skipped := 0
	for i, s := range steps {
		line := strings.ReplaceAll(s.text, "localhost:8080", n.httpAddr)
		if s.skip == "" && strings.Contains(line, ":8080") {
			t.Fatalf("README line %q names port 8080 in a form this test does not replace", s.text)
		}
		if s.skip != "" {
			t.Logf("skipped %q: %s", s.text, s.skip)
			skipped++
			continue
		}
		if s.status >= 400 {
			script.WriteString("README_ALLOW_4XX=1\n")
		}
		// eval: a line bash cannot parse fails alone, named, not the script.
		quoted := "'" + strings.ReplaceAll(line, "'", `'\''`) + "'"
		fmt.Fprintf(&script, "eval %s\n__rc=$?; unset README_ALLOW_4XX; printf '\\n@@readme %d rc=%%d\\n' $__rc; [ $__rc = 0 ] || exit 1\n", quoted, i)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = n.dataDir
	cmd.Env = hermeticEnv([]string{"LINKRAFT_ADDR=http://" + n.httpAddr})
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	runErr := cmd.Run()
	t.Logf("ran %d README lines (%d skipped) in %v", len(steps)-skipped, skipped, time.Since(start).Round(time.Millisecond))

	// Each marker closes the output of the line it names.
	rest := out.String()
	ran := 0
	for _, m := range readmeMarkerRE.FindAllStringSubmatchIndex(rest, -1) {
		i, _ := strconv.Atoi(rest[m[2]:m[3]])
		rc, _ := strconv.Atoi(rest[m[4]:m[5]])
		output := rest[ran:m[0]]
		ran = m[1]
		s := steps[i]
		if rc != 0 {
			t.Fatalf("README line\n%s\nexited %d; it printed:\n%s", s.text, rc, clipReadmeOutput(output))
		}
		for _, problem := range s.check(n.dataDir, output) {
			t.Errorf("README line\n%s\n%s; it printed:\n%s", s.text, problem, clipReadmeOutput(output))
		}
	}
	if runErr != nil {
		t.Fatalf("the walkthrough stopped (%v) after: %s", runErr, clipReadmeOutput(rest[ran:]))
	}
}

// readmeStep is one command of a README shell block.
type readmeStep struct {
	text    string // as README has it, continuation lines included
	comment string // its trailing comment, without "#"
	status  int    // the status the comment starts with, 0 if none
	skip    string // why it does not run, from readmeSkips
}

// readmeSteps splits the indented blocks between the headings from and to
// into commands: a line indented four spaces starts one, a deeper one
// continues it, a comment line alone is no command.
func readmeSteps(t *testing.T, text, from, to string) []readmeStep {
	t.Helper()
	start, end := strings.Index(text, from), strings.Index(text, to)
	if start < 0 || end < start {
		t.Fatalf("README has no section between %q and %q", from, to)
	}
	var steps []readmeStep
	for line := range strings.SplitSeq(text[start:end], "\n") {
		switch {
		case strings.HasPrefix(line, "     ") && len(steps) > 0:
			steps[len(steps)-1].text += "\n" + line
		case strings.HasPrefix(line, "    ") && !strings.HasPrefix(strings.TrimSpace(line), "#"):
			steps = append(steps, readmeStep{text: line})
		}
	}
	used := make([]int, len(readmeSkips))
	for i := range steps {
		s := &steps[i]
		if _, c, ok := strings.Cut(s.text, " # "); ok {
			s.comment = strings.TrimSpace(c)
			s.status, _ = strconv.Atoi(readmeStatusRE.FindString(s.comment))
		}
		for k, skip := range readmeSkips {
			if strings.Contains(s.text, skip.line) {
				s.skip = skip.why
				used[k]++
			}
		}
	}
	for k, u := range used {
		if u != 1 {
			t.Errorf("readmeSkips entry %q matches %d README lines, want 1", readmeSkips[k].line, u)
		}
	}
	return steps
}

var (
	readmeMarkerRE   = regexp.MustCompile(`\n@@readme (\d+) rc=(\d+)\n`)
	readmeStatusRE   = regexp.MustCompile(`^\d{3}\b`)
	readmeLocationRE = regexp.MustCompile(`(?:Location: |→ )(\S+)`)
	readmeKeysRE     = regexp.MustCompile(`[{,]\s*"(\w+)"`)
	readmeHeadersRE  = regexp.MustCompile(`\s-s?[iI]\s`)
	readmeOutputRE   = regexp.MustCompile(`\s-o (\S+)`)
)

// check returns what the output of s, run in dir, fails to hold of what
// the line says.
func (s readmeStep) check(dir, output string) []string {
	var problems []string
	curl := strings.HasPrefix(strings.TrimSpace(s.text), "curl ")
	headers := curl && readmeHeadersRE.MatchString(s.text)
	if headers {
		head, _, _ := strings.Cut(output, "\r\n\r\n")
		var status int
		fmt.Sscanf(head, "HTTP/1.1 %d", &status)
		if s.status != 0 && status != s.status {
			problems = append(problems, fmt.Sprintf("the comment says %d, the node answered %d", s.status, status))
		}
		if m := readmeLocationRE.FindStringSubmatch(s.comment); m != nil && !strings.Contains(head, "\r\nLocation: "+m[1]+"\r\n") {
			problems = append(problems, "the comment says the redirect goes to "+m[1])
		}
	}
	if m := readmeOutputRE.FindStringSubmatch(s.text); m != nil {
		if info, err := os.Stat(filepath.Join(dir, m[1])); err != nil || info.Size() == 0 {
			problems = append(problems, fmt.Sprintf("-o wrote no %s (%v)", m[1], err))
		}
		return problems
	}
	if !curl || headers {
		return problems
	}
	if strings.Contains(s.comment, "Prometheus") {
		if !strings.Contains(output, "# TYPE ") {
			problems = append(problems, "the comment says Prometheus metrics")
		}
		return problems
	}
	var v any
	if err := json.Unmarshal([]byte(output), &v); err != nil {
		return append(problems, fmt.Sprintf("the answer is not JSON: %v", err))
	}
	if status := refusedStatus(v); status != 0 && s.status < 400 {
		problems = append(problems, fmt.Sprintf("the answer holds a status %d", status))
	}
	if strings.HasPrefix(s.comment, "{") {
		obj, _ := v.(map[string]any)
		for _, m := range readmeKeysRE.FindAllStringSubmatch(s.comment, -1) {
			if _, ok := obj[m[1]]; !ok {
				problems = append(problems, fmt.Sprintf("the comment lists %q, the answer has no such key", m[1]))
			}
		}
	}
	return problems
}

// refusedStatus finds a "status" of 400 or more anywhere in a JSON value:
// a problem body, or one item of a bulk answer that was refused.
func refusedStatus(v any) int {
	var elems []any
	switch v := v.(type) {
	case map[string]any:
		if f, ok := v["status"].(float64); ok && f >= 400 {
			return int(f)
		}
		for _, e := range v {
			elems = append(elems, e)
		}
	case []any:
		elems = v
	}
	for _, e := range elems {
		if s := refusedStatus(e); s != 0 {
			return s
		}
	}
	return 0
}

// clipReadmeOutput shortens a long output (a web page, the metrics) for a failure
// message.
func clipReadmeOutput(s string) string {
	if len(s) <= 2000 {
		return s
	}
	return fmt.Sprintf("%s\n… (%d bytes more)", s[:2000], len(s)-2000)
}

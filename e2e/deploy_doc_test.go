package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestDeployDoc makes docs/DEPLOY.md a tested document: the operator's
// shell recipes run, as written, against VMs simulated on this machine (a
// directory and a loopback address each, systemd and ssh stood in for by
// the shims of deploydoc_shims_test.go), in the order of an operator's
// day, and the test checks what the doc says the operator will see. Only
// the doc's example paths and addresses are replaced (the table in
// deploydoc_recipes_test.go), so a recipe that drifts from the binary, the
// unit files or the backup script fails here.
//
// Each recipe is marked in DEPLOY.md with <!-- recipe: NAME --> on the line
// before its block. Every marked recipe is either run by one of the days
// (deployDocDays) or listed as pending with what it waits for
// (deployDocPending); a marker without either, or a name here without its
// marker, fails the test.
func TestDeployDoc(t *testing.T) {
	skipIfShort(t)
	d := newDeployDoc(t)
	t.Run("markers", d.checkMarkers)
	d.runDay(t, append(d.firstDay(),
		docStep{"status, try it, keys", d.firstUse},
		docStep{"backups by the timer's script", d.backups},
		docStep{"check a backup on the workstation", d.checkBackup},
		docStep{"restore a backup", d.restore},
		docStep{"add a node over gossip, remove it", d.joinAuto},
		docStep{"add a node by hand, remove it", d.joinByHand},
		docStep{"add a read replica, promote it, remove it", d.replica},
		docStep{"rolling upgrade", d.upgrade},
	))
}

// docStep is one step of an operator's day.
type docStep struct {
	name string
	run  func(*testing.T)
}

// firstDay are the steps every day begins with: the VMs built and the
// first cluster started, as sections 1-4 say.
func (d *deployDoc) firstDay() []docStep {
	return []docStep{
		{"copy the binary and the deploy files to the VMs", d.copyFiles},
		{"prepare each VM", d.prepareVMs},
		{"make the secrets and write the environment files", d.environment},
		{"first start", d.firstStart},
	}
}

// runDay runs the steps in order, stopping at one that stops, then checks
// that every recipe the day (deployDocDays[t.Name()]) lists was run.
func (d *deployDoc) runDay(t *testing.T, steps []docStep) {
	t.Helper()
	start := time.Now()
	for _, s := range steps {
		began := time.Now()
		// A step that fails but finishes (t.Errorf: a promise broken
		// that the operator can work around) leaves the cluster usable;
		// one that stops (t.Fatalf) stops the day.
		finished := false
		t.Run(s.name, func(t *testing.T) {
			s.run(t)
			finished = true
		})
		t.Logf("%-45s %5.1fs", s.name, time.Since(began).Seconds())
		if !finished {
			t.Fatalf("the day stops at %q: the steps after it build on it", s.name)
		}
	}
	for _, name := range deployDocDays[t.Name()] {
		if !d.ran[name] {
			t.Errorf("recipe %q is listed as run by %s, but no step ran it", name, t.Name())
		}
	}
	t.Logf("the operator's day took %.1fs", time.Since(start).Seconds())
}

// deployDocDays are the recipes each test runs, in the order of its day.
var deployDocDays = map[string][]string{
	"TestDeployDoc": {
		"copy-files", "prepare-vm", "firewall", "secrets", "env-file", "env-sed",
		"first-start", "bootstrap-log", "first-status", "try-it", "keys",
		"backup-install", "backup-keep", "check-backup", "restore",
		"join-auto", "leave", "adm", "join-by-hand", "replica-env", "promote",
		"wait-caught-up", "copy-new-binary", "upgrade-follower", "transfer", "upgrade-leader",
	},
	"TestDeployDocBucketS3": {
		"copy-files", "prepare-vm", "firewall", "secrets", "env-file", "env-sed",
		"first-start", "bootstrap-log", "first-status",
		"bucket-env", "restore-from-env", "disaster-recovery-log",
	},
	"TestDeployDocHAProxy": {
		"copy-files", "prepare-vm", "firewall", "secrets", "env-file", "env-sed",
		"first-start", "bootstrap-log", "first-status", "haproxy-health",
	},
	"TestDeployDocHTTPS": {
		"copy-files", "prepare-vm", "firewall", "secrets", "env-file", "env-sed",
		"first-start", "bootstrap-log", "first-status", "bind-low-ports", "https-env", "https-status",
	},
}

// runByADay reports whether some day runs recipe name.
func runByADay(name string) bool {
	for _, names := range deployDocDays {
		if slices.Contains(names, name) {
			return true
		}
	}
	return false
}

// deployDocPending are the marked recipes the test cannot run yet, each
// with what it waits for. Move a recipe to a day of deployDocDays with the step
// that runs it.
var deployDocPending = map[string]string{}

// deployDoc is the state of the operator's day.
type deployDoc struct {
	dir     string
	scripts string
	shims   string
	recipes map[string]docRecipe
	ws      *simHost
	vms     map[string]*simHost // lr1 … lr5
	ran     map[string]bool
	seq     int
	client  *http.Client

	version    string // what linkraft version says, e.g. "dev"
	key, token string // the secrets the secrets recipe made
	code       string // the short code the try-it recipe made
}

func newDeployDoc(t *testing.T) *deployDoc {
	t.Helper()
	// What the recipes and the shims run for real, and its Debian package.
	for tool, pkg := range map[string]string{"bash": "bash", "curl": "curl", "jq": "jq", "openssl": "openssl", "setsid": "util-linux", "install": "coreutils"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: the recipes of docs/DEPLOY.md need it (apt-get install -y --no-install-recommends %s; .ci/run)", tool, pkg)
		}
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "DEPLOY.md"))
	if err != nil {
		t.Fatal(err)
	}
	recipes, problems := parseRecipes(string(doc))
	for _, p := range problems {
		t.Error(p)
	}
	block, ok := deployDocNets[t.Name()]
	if !ok {
		t.Fatalf("%s has no loopback block in deployDocNets", t.Name())
	}
	endStaleServices(t)
	for i := 10; i <= 15; i++ {
		for _, port := range []string{"8080", "8081", "8082", "18080"} {
			if c, err := net.DialTimeout("tcp", block+itoa(i)+":"+port, time.Second); err == nil {
				c.Close()
				t.Fatalf("%s%d:%s is in use: the simulated VMs need the doc's fixed ports on this loopback block", block, i, port)
			}
		}
	}
	d := &deployDoc{
		dir:     t.TempDir(),
		recipes: recipes,
		vms:     map[string]*simHost{},
		ran:     map[string]bool{},
		client: &http.Client{
			Timeout:       5 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	d.scripts = filepath.Join(d.dir, "scripts")
	d.shims = filepath.Join(d.dir, "shims")
	writeShims(t, d.shims)
	d.ws = newMachine(t, d.dir, d.shims, "workstation", block+"10", false)
	for i := 1; i <= 5; i++ {
		name := "lr" + itoa(i)
		d.vms[name] = newMachine(t, d.dir, d.shims, name, block+"1"+itoa(i), true)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i := 1; i <= 5; i++ {
				m := d.vms["lr"+itoa(i)]
				if j := m.journal("linkraft"); j != "" {
					t.Logf("journalctl -u linkraft on %s (last lines):\n%s", m.name, lastLinesOf(j, 25))
				}
			}
		}
		for _, m := range d.vms {
			m.stopServices()
		}
	})
	// The workstation after "make build": the binary in the checkout and
	// on PATH (check-a-backup and the upgrade run linkraft there).
	for _, f := range []string{"linkraft.service", "linkraft.env", "linkraft-backup.service", "linkraft-backup.timer", "linkraft-backup.sh"} {
		copySimFile(t, filepath.Join(root, "deploy", f), filepath.Join(d.ws.home, "deploy", f), 0)
	}
	copySimFile(t, binPath, filepath.Join(d.ws.home, "linkraft"), 0o755)
	copySimFile(t, binPath, d.ws.path("usr/local/bin/linkraft"), 0o755)
	out, err := exec.Command(binPath, "version").Output()
	if err != nil {
		t.Fatalf("linkraft version: %v", err)
	}
	d.version = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "linkraft"))
	return d
}

// checkMarkers fails for a marked recipe that is neither run nor pending,
// and for a run or pending name whose marker is gone.
func (d *deployDoc) checkMarkers(t *testing.T) {
	for _, name := range markerNames(d.recipes) {
		r := d.recipes[name]
		run, pending := runByADay(name), deployDocPending[name] != ""
		switch {
		case run && pending:
			t.Errorf("recipe %q (DEPLOY.md:%d) is both run and pending", name, r.line)
		case !run && !pending:
			t.Errorf("recipe %q (DEPLOY.md:%d) is marked but neither run by a day nor listed as pending", name, r.line)
		}
	}
	for day, names := range deployDocDays {
		for _, name := range names {
			if _, ok := d.recipes[name]; !ok {
				t.Errorf("recipe %q is run by %s but no <!-- recipe: %s --> marks it in docs/DEPLOY.md", name, day, name)
			}
		}
	}
	pending := make([]string, 0, len(deployDocPending))
	for name := range deployDocPending {
		pending = append(pending, name)
	}
	sort.Strings(pending)
	for _, name := range pending {
		if _, ok := d.recipes[name]; !ok {
			t.Errorf("pending recipe %q has no <!-- recipe: %s --> marker in docs/DEPLOY.md", name, name)
			continue
		}
		t.Logf("pending: %s (DEPLOY.md:%d): %s", name, d.recipes[name].line, deployDocPending[name])
	}
}

// rootName is the name of the top-level test t belongs to: the day.
func rootName(t *testing.T) string {
	name, _, _ := strings.Cut(t.Name(), "/")
	return name
}

// render is recipe name for machine m: the doc's addresses and name
// (roles: which VM plays which of the doc's, nil for each itself), m's
// paths and own addresses, then the operator's fill-ins (a code the
// previous command printed). part, when given, is the part of the recipe
// before the first line holding a fill-in (part "before", fill-in) or
// from that line on ("from"): the operator runs the first part, reads
// the value off its output, then runs the rest.
func (d *deployDoc) render(t *testing.T, m *simHost, name string, roles map[string]*simHost, fill map[string]string, part ...string) string {
	t.Helper()
	r, ok := d.recipes[name]
	if !ok {
		t.Fatalf("recipe %q is not marked in docs/DEPLOY.md", name)
	}
	if !slices.Contains(deployDocDays[rootName(t)], name) {
		t.Fatalf("recipe %q runs but is not in deployDocDays[%q]", name, rootName(t))
	}
	d.ran[name] = true
	text := r.text
	if len(part) == 2 {
		i := strings.Index(text, part[1])
		if i < 0 {
			t.Fatalf("recipe %q (DEPLOY.md:%d) no longer holds %s: has it changed?\n%s", name, r.line, part[1], text)
		}
		cut := strings.LastIndex(text[:i], "\n") + 1
		if cut == 0 {
			t.Fatalf("recipe %q (DEPLOY.md:%d): %s is on its first line, with nothing to run before it", name, r.line, part[1])
		}
		if part[0] == "before" {
			text = text[:cut]
		} else {
			text = text[cut:]
		}
	}
	all := map[string]*simHost{}
	for k, v := range d.vms {
		all[k] = v
	}
	for k, v := range roles {
		all[k] = v
	}
	text = docSubst(text, all)
	for _, rule := range m.rules {
		text = rule.apply(text)
	}
	for k, v := range fill {
		text = strings.ReplaceAll(text, k, v)
	}
	if l := leftover.FindString(text); l != "" {
		t.Fatalf("recipe %q (DEPLOY.md:%d) still holds %q after substitution: add it to the table or fill it in:\n%s", name, r.line, l, text)
	}
	return text
}

// recipeSep separates what a recipe printed from what its prelude (the
// definitions an operator made before in the same shell) printed.
const recipeSep = "=== deploy-doc: the recipe begins ==="

// exec runs body on m after prelude and returns what body printed; a
// failure stops the step with the script and its output.
func (d *deployDoc) exec(t *testing.T, m *simHost, label, prelude, body string, timeout time.Duration) string {
	t.Helper()
	out, err := d.try(t, m, label, prelude, body, timeout)
	if err != nil {
		t.Fatalf("recipe %s on %s: %v\n--- as run ---\n%s--- output ---\n%s", label, m.name, err, body, out)
	}
	return out
}

// try is exec that returns the failure (for what the operator re-runs
// until it shows, like a log line that comes a moment later).
func (d *deployDoc) try(t *testing.T, m *simHost, label, prelude, body string, timeout time.Duration) (string, error) {
	t.Helper()
	d.seq++
	script := prelude + "echo " + simQuote(recipeSep) + "\n" + body
	out, err := m.runScript(t, d.scripts, fmt.Sprintf("%03d-%s-%s", d.seq, m.name, label), script, timeout)
	if i := strings.LastIndex(out, recipeSep+"\n"); i >= 0 {
		out = out[i+len(recipeSep)+1:]
	}
	return out, err
}

// run renders recipe name for m and runs it.
func (d *deployDoc) run(t *testing.T, m *simHost, name string) string {
	t.Helper()
	return d.exec(t, m, name, "", d.render(t, m, name, nil, nil), time.Minute)
}

// preludes renders recipes an operator ran earlier in the same shell.
func (d *deployDoc) preludes(t *testing.T, m *simHost, roles map[string]*simHost, names ...string) string {
	t.Helper()
	var b strings.Builder
	for _, n := range names {
		b.WriteString(d.render(t, m, n, roles, nil))
	}
	return b.String()
}

// --- the operator's day ---

var firstIDs = []string{"lr1", "lr2", "lr3"}

func (d *deployDoc) vm(name string) *simHost { return d.vms[name] }

// first3 are the VMs of the first cluster.
func (d *deployDoc) first3() []*simHost { return []*simHost{d.vm("lr1"), d.vm("lr2"), d.vm("lr3")} }

// docDeployFiles are what section 1 copies to every VM.
var docDeployFiles = []string{"linkraft", "linkraft.service", "linkraft.env", "linkraft-backup.service", "linkraft-backup.timer", "linkraft-backup.sh"}

func (d *deployDoc) copyFiles(t *testing.T) {
	d.run(t, d.ws, "copy-files")
	for _, m := range d.first3() {
		for _, f := range docDeployFiles {
			src := filepath.Join(d.ws.home, f)
			if f != "linkraft" {
				src = filepath.Join(d.ws.home, "deploy", f)
			}
			requireSameContent(t, src, m.path("root/"+f))
		}
	}
}

func (d *deployDoc) prepareVMs(t *testing.T) {
	for _, m := range d.first3() {
		d.prepare(t, m)
		out := d.run(t, m, "firewall")
		if strings.Count(out, "Rule added") != 10 {
			t.Errorf("ufw on %s: want 10 rules added, got:\n%s", m.name, out)
		}
		rules, _ := os.ReadFile(m.path(".deploydoc/ufw.rules"))
		for _, peer := range d.first3() {
			for _, want := range []string{
				"allow proto tcp from " + peer.ip + " to any port 8081",
				"allow proto tcp from " + peer.ip + " to any port 8082",
				"allow proto udp from " + peer.ip + " to any port 8082",
			} {
				if !strings.Contains(string(rules), want) {
					t.Errorf("ufw on %s: no rule %q (the nodes talk on 8081 and gossip on 8082, TCP and UDP); rules:\n%s", m.name, want, rules)
				}
			}
		}
		if !strings.Contains(string(rules), "allow 8080/tcp\n") {
			t.Errorf("ufw on %s: 8080/tcp not opened; rules:\n%s", m.name, rules)
		}
	}
}

// prepare runs section 2 on m and checks what it installed.
func (d *deployDoc) prepare(t *testing.T, m *simHost) {
	t.Helper()
	d.run(t, m, "prepare-vm")
	requireFileMode(t, m.path("usr/local/bin/linkraft"), 0o755)
	requireFileMode(t, m.path("etc/linkraft.env"), 0o600)
	requireSameContent(t, filepath.Join(d.ws.home, "deploy", "linkraft.service"), m.path("etc/systemd/system/linkraft.service"))
}

var (
	keygenOutput  = regexp.MustCompile(`^[A-Za-z0-9+/]{43}=$`)
	opensslOutput = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

func (d *deployDoc) environment(t *testing.T) {
	out := strings.Fields(d.run(t, d.vm("lr1"), "secrets"))
	if len(out) != 2 || !keygenOutput.MatchString(out[0]) || !opensslOutput.MatchString(out[1]) {
		t.Fatalf("secrets: want a cluster key (base64 of 32 bytes) and 64 hex digits, got %q", out)
	}
	d.key, d.token = out[0], out[1]
	for _, m := range d.first3() {
		d.writeEnv(t, m)
	}
}

// writeEnv writes section 3's file on m, then, unless m is lr1, runs the
// sed that makes it m's: the doc's recipe for lr2, with m playing lr2
// ("on lr2 and lr3 change only …").
func (d *deployDoc) writeEnv(t *testing.T, m *simHost) {
	t.Helper()
	fill := map[string]string{"<the keygen output>": d.key, "<the openssl output>": d.token}
	file := d.render(t, m, "env-file", nil, fill)
	// install made the file 0600; writing keeps its mode, as an editor does.
	if err := os.WriteFile(m.path("etc/linkraft.env"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	if m.name == "lr1" {
		return
	}
	d.exec(t, m, "env-sed", "", d.render(t, m, "env-sed", map[string]*simHost{"lr2": m}, nil), time.Minute)
	got, _ := os.ReadFile(m.path("etc/linkraft.env"))
	want := strings.NewReplacer(
		"LINKRAFT_ID=lr1\n", "LINKRAFT_ID="+m.name+"\n",
		"LINKRAFT_ADVERTISE="+d.vm("lr1").ip+"\n", "LINKRAFT_ADVERTISE="+m.ip+"\n",
	).Replace(file)
	if string(got) != want {
		t.Fatalf("env-sed on %s: the file should differ from lr1's only in LINKRAFT_ID and LINKRAFT_ADVERTISE; got:\n%s\nwant:\n%s", m.name, got, want)
	}
}

func (d *deployDoc) firstStart(t *testing.T) {
	for i, m := range d.first3() {
		began := time.Now()
		d.run(t, m, "first-start")
		// Type=notify: start returns once the node serves, without
		// waiting for the other two (the first returns alone).
		if _, err := d.get("http://" + m.ip + ":8080/health/live"); err != nil {
			t.Fatalf("systemctl enable --now linkraft on %s returned, but the node does not answer: %v", m.name, err)
		}
		t.Logf("%s started in %.1fs (%d of 3 up)", m.name, time.Since(began).Seconds(), i+1)
	}
	bootstrapped := 0
	for _, m := range d.first3() {
		var out string
		// "When the third node is up, each logs the bootstrap": the
		// operator runs the grep again until it shows.
		ok := rerunUntil(20*time.Second, func() bool {
			var err error
			out, err = d.try(t, m, "bootstrap-log", "", d.render(t, m, "bootstrap-log", nil, nil), 10*time.Second)
			return err == nil
		})
		if !ok {
			t.Fatalf("the bootstrap-log grep on %s: want the bootstrap of three servers, or the wait to be added, got:\n%s", m.name, out)
		}
		if strings.Contains(out, "servers=3") {
			bootstrapped++
		}
	}
	if bootstrapped == 0 {
		t.Fatal("no node logged the bootstrap of three servers")
	}
	d.requireVoters(t, d.vm("lr1"), firstIDs, 20*time.Second)
}

// docStatusRow is one server of linkraft status's table.
type docStatusRow struct{ id, suffrage, leader, reachable string }

var statusLeader = regexp.MustCompile(`(?m)^leader:\s+(\S+) at `)

// parseDocStatus reads linkraft status's output: the leader and the table.
func parseDocStatus(out string) (leader string, rows []docStatusRow) {
	if m := statusLeader.FindStringSubmatch(out); m != nil {
		leader = m[1]
	}
	table := false
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 0 && f[0] == "ID":
			table = true
		case table && len(f) >= 6:
			rows = append(rows, docStatusRow{id: f[0], suffrage: f[3], leader: f[4], reachable: f[5]})
		case table:
			table = false
		}
	}
	return leader, rows
}

// requireVoters runs the status recipe on m until it shows exactly ids as
// reachable voters and a leader among them (the operator looks again
// while a server is being added or removed), bounded by timeout.
func (d *deployDoc) requireVoters(t *testing.T, m *simHost, ids []string, timeout time.Duration) string {
	t.Helper()
	var out, why string
	ok := rerunUntil(timeout, func() bool {
		var err error
		out, err = d.try(t, m, "first-status", "", d.render(t, m, "first-status", nil, nil), 10*time.Second)
		if err != nil {
			why = err.Error()
			return false
		}
		why = votersMismatch(out, ids)
		return why == ""
	})
	if !ok {
		t.Fatalf("linkraft status on %s: %s; want %v voters, reachable, one of them leading:\n%s", m.name, why, ids, out)
	}
	return out
}

// votersMismatch says how status output differs from ids as voters.
func votersMismatch(out string, ids []string) string {
	leader, rows := parseDocStatus(out)
	var got []string
	leaders := 0
	for _, r := range rows {
		if r.suffrage != "voter" || r.reachable != "yes" {
			return fmt.Sprintf("server %s is %s, reachable %s", r.id, r.suffrage, r.reachable)
		}
		if r.leader == "*" {
			leaders++
		}
		got = append(got, r.id)
	}
	sort.Strings(got)
	want := slices.Clone(ids)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		return fmt.Sprintf("servers %v", got)
	}
	if leaders != 1 || !slices.Contains(ids, leader) {
		return fmt.Sprintf("leader %q, %d marked", leader, leaders)
	}
	return ""
}

// The fill-ins of try-it and keys: what the operator reads off the
// output of the lines before.
const (
	shortCodeFill = "<the short_code it printed>"
	keyIDFill     = "<id>"
)

var (
	createdKey = regexp.MustCompile(`created key (\S+) `)
	keySecret  = regexp.MustCompile(`(?m)^(lr_\S+)$`)
)

func (d *deployDoc) firstUse(t *testing.T) {
	// try-it on lr1: a link made through lr2, its short code, then the
	// redirect from lr3.
	lr1 := d.vm("lr1")
	pre := d.preludes(t, lr1, nil, "first-status")
	out := d.exec(t, lr1, "try-it", pre, d.render(t, lr1, "try-it", nil, nil, "before", shortCodeFill), time.Minute)
	var made struct {
		ShortCode string `json:"short_code"`
		ShortURL  string `json:"short_url"`
	}
	if err := json.Unmarshal([]byte(out), &made); err != nil || made.ShortCode == "" {
		t.Fatalf("try-it: the create should print the link with its short_code: %v\n%s", err, out)
	}
	if want := "https://" + deployDocHost + "/" + made.ShortCode; made.ShortURL != want {
		t.Errorf("try-it: short_url %q, want %q (LINKRAFT_BASE_URL)", made.ShortURL, want)
	}
	d.code = made.ShortCode
	fill := map[string]string{shortCodeFill: d.code}
	out = d.exec(t, lr1, "try-it", pre, d.render(t, lr1, "try-it", nil, fill, "from", shortCodeFill), time.Minute)
	if !strings.HasPrefix(out, "HTTP/1.1 302") || !regexp.MustCompile(`(?mi)^location: https://example\.com/hello\r?$`).MatchString(out) {
		t.Fatalf("try-it: want a 302 to https://example.com/hello from another node, got:\n%s", out)
	}

	// keys, on a third VM: make two, list them, revoke the first.
	lr3 := d.vm("lr3")
	pre = d.preludes(t, lr3, nil, "first-status")
	out = d.exec(t, lr3, "keys", pre, d.render(t, lr3, "keys", nil, nil, "before", keyIDFill), time.Minute)
	id, secret := createdKey.FindStringSubmatch(out), keySecret.FindStringSubmatch(out)
	if id == nil || secret == nil || !strings.Contains(out, "blog") || !strings.Contains(out, "grafana-backup") {
		t.Fatalf("keys: want two keys made, their secrets shown once, and both listed; got:\n%s", out)
	}
	for _, m := range d.first3() {
		if code := d.status(t, "GET", "http://"+m.ip+":8080/api/v1/urls?workspace=blog", secret[1]); code != 200 {
			t.Fatalf("keys: the new key blog lists its workspace on %s: %d, want 200", m.name, code)
		}
	}
	d.exec(t, lr3, "keys", pre, d.render(t, lr3, "keys", nil, map[string]string{keyIDFill: id[1]}, "from", keyIDFill), time.Minute)
	for _, m := range d.first3() {
		if code := d.status(t, "GET", "http://"+m.ip+":8080/api/v1/urls?workspace=blog", secret[1]); code != 401 {
			t.Errorf("keys: after linkraft keys revoke, %s answered the revoked key with %d, want 401 (no node accepts it from the answer on)", m.name, code)
		}
	}
}

var (
	backupSaved = regexp.MustCompile(`linkraft-backup: saved (\S+/linkraft-[0-9]{8}T[0-9]{6}Z\.backup) \(([0-9]+) bytes\) from (\S+)`)
	backupName  = regexp.MustCompile(`^linkraft-[0-9]{8}T[0-9]{6}Z\.backup$`)
)

func (d *deployDoc) backups(t *testing.T) {
	for _, m := range d.first3() {
		out := d.run(t, m, "backup-install")
		saved := backupSaved.FindStringSubmatch(out)
		if saved == nil {
			t.Fatalf("backup-install on %s: the journal should say where the backup went; got:\n%s", m.name, out)
		}
		if want := "http://" + m.ip + ":8080/admin/backup"; saved[3] != want {
			t.Errorf("backup on %s asked %s, want its own node %s (LINKRAFT_HTTP_ADDR)", m.name, saved[3], want)
		}
		if strings.Contains(out, "warning") {
			t.Errorf("backup on %s warned, with every node up:\n%s", m.name, out)
		}
		dir := m.path("var/lib/linkraft-backups")
		if filepath.Dir(saved[1]) != dir {
			t.Errorf("backup on %s went to %s, want %s", m.name, filepath.Dir(saved[1]), dir)
		}
		requireFileMode(t, dir, 0o700|os.ModeDir)
		names := scriptBackups(t, m)
		if len(names) != 1 || !strings.Contains(out, "-rw------- ") || !strings.Contains(out, names[0]) {
			t.Fatalf("ls -l /var/lib/linkraft-backups on %s: want the one backup, private (-rw-------); got %v:\n%s", m.name, names, out)
		}
		head := make([]byte, 4)
		if f, err := os.Open(filepath.Join(dir, names[0])); err != nil {
			t.Fatal(err)
		} else {
			_, _ = io.ReadFull(f, head)
			f.Close()
		}
		if string(head) != "LKRB" {
			t.Errorf("backup on %s starts %q, want a linkraft backup (LKRB)", m.name, head)
		}
	}

	// The timer fires (the shim runs no timers; the test starts the
	// service as the timer does) with more backups in the directory than
	// the script keeps: it keeps the newest 14, then, with the doc's
	// drop-in, 30.
	lr1 := d.vm("lr1")
	seed := func(year, n int) {
		for i := range n {
			name := time.Date(year, 1, 1, 0, 30, 12, 0, time.UTC).AddDate(0, 0, i).Format("linkraft-20060102T150405Z.backup")
			writeSimFile(t, lr1.path("var/lib/linkraft-backups/"+name), "an older backup\n", 0o600)
		}
	}
	timer := func(keep int) {
		t.Helper()
		before := scriptBackups(t, lr1)
		d.exec(t, lr1, "timer", "", "systemctl start linkraft-backup.service\n", time.Minute)
		after := scriptBackups(t, lr1)
		all := slices.Compact(slices.Sorted(slices.Values(append(before, after...))))
		if want := all[len(all)-keep:]; !slices.Equal(after, want) || after[keep-1] < before[len(before)-1] {
			t.Fatalf("after a timer run with LINKRAFT_BACKUP_KEEP=%d: kept %v, want the newest %d: %v", keep, after, keep, want)
		}
		if !strings.Contains(lr1.journal("linkraft-backup"), fmt.Sprintf("(keeping the newest %d)", keep)) {
			t.Errorf("the backup journal does not say it pruned, keeping %d:\n%s", keep, lastLinesOf(lr1.journal("linkraft-backup"), 10))
		}
	}
	seed(2024, 14)
	timer(14)
	// systemctl edit linkraft-backup.service writes the doc's lines as a
	// drop-in.
	writeSimFile(t, lr1.path("etc/systemd/system/linkraft-backup.service.d/override.conf"), d.render(t, lr1, "backup-keep", nil, nil), 0o644)
	seed(2023, 30)
	timer(30)
}

// scriptBackups lists the backups the script wrote on m, oldest first.
func scriptBackups(t *testing.T, m *simHost) []string {
	t.Helper()
	entries, err := os.ReadDir(m.path("var/lib/linkraft-backups"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if backupName.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// newestScriptBackup is the newest backup the script wrote on m.
func newestScriptBackup(t *testing.T, m *simHost) string {
	t.Helper()
	names := scriptBackups(t, m)
	if len(names) == 0 {
		t.Fatalf("no backup on %s", m.name)
	}
	return names[len(names)-1]
}

// docBackup is the backup file name the doc's examples use.
const docBackup = "linkraft-20250101T003012Z.backup"

func (d *deployDoc) checkBackup(t *testing.T) {
	// The operator copied a backup off the VMs and keeps the cluster key
	// apart from them; on the workstation:
	name := newestScriptBackup(t, d.vm("lr1"))
	copySimFile(t, d.vm("lr1").path("var/lib/linkraft-backups/"+name), filepath.Join(d.ws.home, name), 0o600)
	pre := "export LINKRAFT_CLUSTER_KEY=" + simQuote(d.key) + "\n"
	body := d.render(t, d.ws, "check-backup", nil, map[string]string{docBackup: name})
	out := d.exec(t, d.ws, "check-backup", pre, body, 2*time.Minute)
	if !strings.Contains(out, `"restored":true`) || !strings.Contains(out, `"links":1`) {
		t.Fatalf("check-backup: want {\"links\":1,\"restored\":true} (the one link made so far), got:\n%s", out)
	}
	if _, err := os.Stat(d.ws.path("tmp/check")); !os.IsNotExist(err) {
		t.Errorf("check-backup: /tmp/check is still there (%v)", err)
	}
	if c, err := net.DialTimeout("tcp", d.ws.ip+":18080", time.Second); err == nil {
		c.Close()
		t.Errorf("check-backup: the throw-away node still listens after kill %%1")
	}
}

func (d *deployDoc) restore(t *testing.T) {
	lr1, lr2 := d.vm("lr1"), d.vm("lr2")
	name := newestScriptBackup(t, lr2)
	// After the backup: one link made, the first one deleted.
	after := d.shorten(t, lr1, "https://example.com/after-the-backup")
	if code := d.status(t, "DELETE", "http://"+lr1.ip+":8080/api/v1/urls/"+d.code, d.token); code != 204 {
		t.Fatalf("delete %s: %d, want 204", d.code, code)
	}
	out := d.exec(t, lr2, "restore", "", d.render(t, lr2, "restore", nil, map[string]string{docBackup: name}), time.Minute)
	if !strings.Contains(out, `"restored":true`) {
		t.Fatalf("restore: want {\"restored\":true,...}, got:\n%s", out)
	}
	// Every node takes that state: the link made since is gone, the one
	// deleted since is back.
	for _, m := range d.first3() {
		ok := eventually(5*time.Second, func() bool {
			return d.redirect(m, d.code) == "https://example.com/hello" && d.redirect(m, after) == ""
		})
		if !ok {
			t.Errorf("after the restore, %s redirects %s to %q (want the backup's https://example.com/hello) and %s to %q (want none: made after the backup)",
				m.name, d.code, d.redirect(m, d.code), after, d.redirect(m, after))
		}
	}
}

// buildVM prepares the VM m as sections 2 and 3 say, its files copied over
// as section 1 does for the first three.
func (d *deployDoc) buildVM(t *testing.T, m *simHost) {
	t.Helper()
	for _, f := range docDeployFiles {
		src := filepath.Join(d.ws.home, "deploy", f)
		if f == "linkraft" {
			src = filepath.Join(d.ws.home, f)
		}
		copySimFile(t, src, m.path("root/"+f), 0)
	}
	d.prepare(t, m)
	d.writeEnv(t, m)
}

func (d *deployDoc) joinAuto(t *testing.T) {
	lr4 := d.vm("lr4")
	d.buildVM(t, lr4)
	d.run(t, lr4, "join-auto")
	const waiting = "a cluster already exists; waiting for its leader to add this node"
	if !eventually(20*time.Second, func() bool { return strings.Contains(lr4.journal("linkraft"), waiting) }) {
		t.Errorf("lr4 did not log %q", waiting)
	}
	d.requireVoters(t, lr4, []string{"lr1", "lr2", "lr3", "lr4"}, 30*time.Second)
	d.leave(t, lr4, nil)
}

// leave runs section 7's recipe on lr2 for the doc's lr4 (or the VM that
// plays it) and checks the server and its process are gone.
func (d *deployDoc) leave(t *testing.T, gone *simHost, roles map[string]*simHost) {
	t.Helper()
	lr2 := d.vm("lr2")
	pre := d.preludes(t, lr2, nil, "first-status")
	d.exec(t, lr2, "leave", pre, d.render(t, lr2, "leave", roles, nil), time.Minute)
	if pid := gone.servicePID("linkraft"); pid != 0 {
		t.Errorf("after systemctl disable --now linkraft, %s's node (pid %d) still runs", gone.name, pid)
	}
	if _, err := d.get("http://" + gone.ip + ":8080/health/live"); err == nil {
		t.Errorf("after systemctl disable --now linkraft, %s still answers", gone.name)
	}
	// A removed server must stay out ("the leader that removed it will
	// not add it back"): look again after a moment, as the operator does.
	time.Sleep(2 * time.Second)
	var out string
	if rerunUntil(5*time.Second, func() bool {
		var err error
		out, err = d.try(t, lr2, "first-status", "", d.render(t, lr2, "first-status", nil, nil), 10*time.Second)
		return err == nil && votersMismatch(out, firstIDs) == ""
	}) {
		return
	}
	t.Errorf("after linkraft leave --id %s and systemctl disable --now linkraft there, the cluster took %s back "+
		"(the leader that removed it re-added it while it drained, and promoted it: a voter that is down); status:\n%s\n"+
		"leader's log:\n%s", gone.name, gone.name, out, linesAbout(d.leaderJournal(), gone.name, 12))
	// The operator's remedy, now that the node is down, so that the rest
	// of the day runs on three voters.
	d.exec(t, lr2, "leave", pre, d.render(t, lr2, "leave", roles, nil), time.Minute)
	d.requireVoters(t, lr2, firstIDs, 10*time.Second)
}

// leaderJournal is the journal of the first VM that logged leading.
func (d *deployDoc) leaderJournal() string {
	for _, m := range d.first3() {
		if h, err := d.get("http://" + m.ip + ":8080/health"); err == nil && h.Role == "leader" {
			return m.journal("linkraft")
		}
	}
	return ""
}

// linesAbout is the last n lines of s that mention word, leaving out
// Raft's retries.
func linesAbout(s, word string, n int) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) && !strings.Contains(l, "heartbeat") && !strings.Contains(l, "appendEntries") && !strings.Contains(l, "failed to contact") {
			keep = append(keep, l)
		}
	}
	if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	return strings.Join(keep, "\n")
}

func (d *deployDoc) joinByHand(t *testing.T) {
	lr1, lr4 := d.vm("lr1"), d.vm("lr4")
	// lr4 comes back as a new VM whose node waits to be added by hand: an
	// empty data dir and an empty LINKRAFT_JOIN (section 6).
	if err := os.RemoveAll(lr4.path("var/lib/linkraft")); err != nil {
		t.Fatal(err)
	}
	env, _ := os.ReadFile(lr4.path("etc/linkraft.env"))
	env = regexp.MustCompile(`(?m)^LINKRAFT_JOIN=.*$`).ReplaceAll(env, []byte("LINKRAFT_JOIN="))
	writeSimFile(t, lr4.path("etc/linkraft.env"), string(env), 0o600)
	d.run(t, lr4, "join-auto")

	out := d.exec(t, lr1, "join-by-hand", d.preludes(t, lr1, nil, "adm"), d.render(t, lr1, "join-by-hand", nil, nil), time.Minute)
	var view struct {
		Servers []struct {
			ID         string `json:"id"`
			Suffrage   string `json:"suffrage"`
			CatchingUp bool   `json:"catching_up"`
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(out), &view); err != nil {
		t.Fatalf("join-by-hand: want the cluster view as JSON: %v\n%s", err, out)
	}
	// "The new node is in it as a learner catching up".
	if !slices.ContainsFunc(view.Servers, func(s struct {
		ID         string `json:"id"`
		Suffrage   string `json:"suffrage"`
		CatchingUp bool   `json:"catching_up"`
	}) bool {
		return s.ID == "lr4" && s.CatchingUp
	}) {
		t.Errorf("join-by-hand: want lr4 in the answer, catching up (lr4 was removed before and comes back on an empty data dir); got:\n%s", out)
		// The operator gives up on lr4 for now: the day goes on with
		// three voters.
		d.exec(t, lr4, "give-up", "", "systemctl disable --now linkraft\n", time.Minute)
		d.requireVoters(t, lr1, firstIDs, 10*time.Second)
		return
	}
	d.requireVoters(t, lr1, []string{"lr1", "lr2", "lr3", "lr4"}, 30*time.Second)
	d.leave(t, lr4, nil)
}

func (d *deployDoc) replica(t *testing.T) {
	lr1, lr5 := d.vm("lr1"), d.vm("lr5")
	d.buildVM(t, lr5)
	line := d.render(t, lr5, "replica-env", nil, nil)
	f, err := os.OpenFile(lr5.path("etc/linkraft.env"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(line)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	d.run(t, lr5, "join-auto")
	var out string
	ok := rerunUntil(30*time.Second, func() bool {
		out, _ = d.try(t, lr1, "first-status", "", d.render(t, lr1, "first-status", nil, nil), 10*time.Second)
		_, rows := parseDocStatus(out)
		return slices.Contains(rows, docStatusRow{id: "lr5", suffrage: "nonvoter", leader: "-", reachable: "yes"})
	})
	if !ok {
		t.Fatalf("linkraft status: want lr5 as a reachable nonvoter, got:\n%s", out)
	}
	d.exec(t, lr1, "promote", d.preludes(t, lr1, nil, "first-status"), d.render(t, lr1, "promote", nil, nil), time.Minute)
	d.requireVoters(t, lr1, []string{"lr1", "lr2", "lr3", "lr5"}, 10*time.Second)
	// Back to three: section 7 for lr5.
	d.leave(t, lr5, map[string]*simHost{"lr4": lr5})
}

func (d *deployDoc) upgrade(t *testing.T) {
	ws := d.ws
	// Run from the workstation, with T and adm as in section 4: the
	// operator keeps a copy of the environment file there.
	copySimFile(t, d.vm("lr1").path("etc/linkraft.env"), ws.path("etc/linkraft.env"), 0o600)
	d.run(t, ws, "copy-new-binary")
	for _, m := range d.first3() {
		requireSameContent(t, filepath.Join(ws.home, "linkraft"), m.path("usr/local/bin/linkraft.new"))
	}

	// Step 1, "say it is lr1": the doc's lr1 is whichever VM leads.
	h, err := d.get("http://" + d.vm("lr1").ip + ":8080/health")
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]*simHost{}
	var followers []*simHost
	for _, m := range d.first3() {
		if m.name == h.Leader {
			roles["lr1"] = m
		} else {
			followers = append(followers, m)
		}
	}
	if roles["lr1"] == nil || len(followers) != 2 {
		t.Fatalf("no leader among lr1-lr3: /health says %q", h.Leader)
	}
	roles["lr2"], roles["lr3"] = followers[0], followers[1]
	t.Logf("the doc's lr1 (the leader) is %s; lr2 is %s, lr3 is %s", roles["lr1"].name, roles["lr2"].name, roles["lr3"].name)

	stop := d.probeRedirects(t)
	pre := func(r map[string]*simHost) string { return d.preludes(t, ws, r, "adm", "wait-caught-up") }
	upgradeOne := func(name string, r map[string]*simHost, target *simHost, docID string) string {
		t.Helper()
		before := target.servicePID("linkraft")
		out := d.exec(t, ws, name, pre(r), d.render(t, ws, name, r, nil), 4*time.Minute)
		if !strings.Contains(out, target.name+" is up, ") {
			t.Fatalf("%s for the doc's %s (%s): want %q, got:\n%s", name, docID, target.name, target.name+" is up", out)
		}
		after := target.servicePID("linkraft")
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", after))
		if after == 0 || after == before || exe != target.path("usr/local/bin/linkraft") {
			t.Errorf("%s: %s runs pid %d (was %d) from %q: want a new process of /usr/local/bin/linkraft", name, target.name, after, before, exe)
		}
		if _, err := os.Stat(target.path("usr/local/bin/linkraft.new")); !os.IsNotExist(err) {
			t.Errorf("%s: linkraft.new is still on %s", name, target.name)
		}
		return out
	}
	// Step 2: each follower, lr2 then "the same for lr3".
	for _, r := range []map[string]*simHost{roles, {"lr1": roles["lr1"], "lr2": roles["lr3"], "lr3": roles["lr2"]}} {
		out := upgradeOne("upgrade-follower", r, r["lr2"], "lr2")
		if last := lastLinesOf(out, 1); last != d.version {
			t.Errorf("upgrade-follower: /health on %s says version %q, want %q", r["lr2"].name, last, d.version)
		}
	}
	// Step 3: hand leadership over.
	out := d.exec(t, ws, "transfer", d.preludes(t, ws, roles, "adm"), d.render(t, ws, "transfer", roles, nil), time.Minute)
	if got := lastLinesOf(out, 1); got != roles["lr2"].name && got != roles["lr3"].name {
		t.Fatalf("transfer: want lr2 or lr3 (%s or %s) leading, got:\n%s", roles["lr2"].name, roles["lr3"].name, out)
	}
	// Step 4: the old leader.
	upgradeOne("upgrade-leader", roles, roles["lr1"], "lr1")
	// Step 5: three voters, the new version everywhere.
	d.requireVoters(t, d.vm("lr1"), firstIDs, 10*time.Second)
	for _, m := range d.first3() {
		if h, err := d.get("http://" + m.ip + ":8080/health"); err != nil || h.Version != d.version {
			t.Errorf("/health on %s after the upgrade: version %q (%v), want %q", m.name, h.Version, err, d.version)
		}
	}
	stop()
}

// probeRedirects asks every node for the try-it code every 200 ms until
// the returned function is called, which fails the test for any round in
// which no node redirected: the doc promises that the cluster serves
// redirects throughout an upgrade.
func (d *deployDoc) probeRedirects(t *testing.T) func() {
	t.Helper()
	done := make(chan struct{})
	var mu sync.Mutex
	rounds, dark := 0, []string{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Bounded: the upgrade's recipes have their own timeouts, well
		// under this.
		for range 3000 {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			served := false
			for _, m := range d.first3() {
				if d.redirect(m, d.code) == "https://example.com/hello" {
					served = true
					break
				}
			}
			mu.Lock()
			rounds++
			if !served {
				dark = append(dark, time.Now().Format("15:04:05.000"))
			}
			mu.Unlock()
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(dark) > 0 || rounds < 10 {
			t.Errorf("during the upgrade, no node redirected %s at %v (%d rounds asked)", d.code, dark, rounds)
		}
	}
}

// rerunUntil runs cond every half second (a recipe the operator runs again
// until it shows what the doc says) until it returns true or timeout
// passes; it returns cond's last verdict.
func rerunUntil(timeout time.Duration, cond func() bool) bool {
	return eventuallyEvery(timeout, 500*time.Millisecond, cond)
}

// --- HTTP, as the operator's curl would ---

// get reads a health document.
func (d *deployDoc) get(url string) (health, error) {
	var h health
	resp, err := d.client.Get(url)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return h, fmt.Errorf("%s: %d %s", url, resp.StatusCode, body)
	}
	return h, json.Unmarshal(body, &h)
}

// status makes a request with a bearer credential and returns the status.
func (d *deployDoc) status(t *testing.T, method, url, credential string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+credential)
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// shorten makes a link through m with the admin token and returns its code.
func (d *deployDoc) shorten(t *testing.T, m *simHost, target string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+m.ip+":8080/shorten", strings.NewReader("url="+target))
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var made struct {
		ShortCode string `json:"short_code"`
	}
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &made); err != nil || made.ShortCode == "" {
		t.Fatalf("shorten %s: %d %s", target, resp.StatusCode, body)
	}
	return made.ShortCode
}

// redirect is where m sends code (empty when it does not redirect).
func (d *deployDoc) redirect(m *simHost, code string) string {
	resp, err := d.client.Get("http://" + m.ip + ":8080/" + code)
	if err != nil {
		return ""
	}
	resp.Body.Close()
	if resp.StatusCode != 302 {
		return ""
	}
	return resp.Header.Get("Location")
}

// --- files ---

// copySimFile copies src to dst with mode, or src's own mode when mode is 0
// (as scp makes a new file).
func copySimFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if mode == 0 {
		fi, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		mode = fi.Mode().Perm()
	}
	writeSimFile(t, dst, string(b), mode)
	if err := os.Chmod(dst, mode); err != nil {
		t.Fatal(err)
	}
}

func requireSameContent(t *testing.T, want, got string) {
	t.Helper()
	a, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("%s differs from %s", got, want)
	}
}

func requireFileMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&(os.ModePerm|os.ModeDir) != want {
		t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
	}
}

// lastLinesOf is the last n lines of s, without the final newline.
func lastLinesOf(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

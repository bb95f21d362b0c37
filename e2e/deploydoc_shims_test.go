package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The deploy-doc test (deploy_doc_test.go) simulates each VM of
// docs/DEPLOY.md as a directory (its own etc/, root/, usr/local/bin/,
// var/lib/) and a loopback address. What a recipe calls that a test cannot
// run for real (systemd, ssh, a package manager, a firewall) is a small sh
// script on PATH, written here; everything else (install, sed, curl, jq,
// openssl, linkraft itself) is the real program.

// deployDocServiceMark is the INVOCATION_ID the systemctl shim gives every
// service it starts (systemd gives each service run one too). A run that
// died without its cleanup (a -timeout panic) leaves nodes on the fixed
// addresses; the next run finds them by this and ends them. The mark is
// followed by the pid of the test process that started the service, so
// that the nodes of a run still going (another day, in another go test)
// are left alone.
const deployDocServiceMark = "deploydoc-"

// simHost is a simulated VM, or the operator's workstation.
type simHost struct {
	name string // lr1 … lr5, or "workstation"
	ip   string // the loopback address that stands for its network address
	root string // what / is on this machine: etc/, root/, usr/local/bin/, var/lib/
	home string // where a recipe runs: /root on a VM, the checkout on the workstation
	// rules map the doc's paths and this machine's own addresses (127.0.0.1,
	// 0.0.0.0) into the simulation; the shims use the same rules as a sed
	// script for unit files and ssh/scp paths.
	rules []substRule
}

// vmDirs are the directories a bare VM has that the recipes write into
// without creating them (install without -D, systemctl's unit directory).
var vmDirs = []string{"root", "etc/systemd/system", "usr/local/bin", "var/lib", "tmp"}

// newMachine lays out a machine under dir and writes its sed script and its
// shell launcher.
func newMachine(t *testing.T, dir, shims, name, ip string, vm bool) *simHost {
	t.Helper()
	m := &simHost{name: name, ip: ip, root: filepath.Join(dir, name)}
	// The workstation's checkout, where the operator ran make build.
	m.home = filepath.Join(m.root, "checkout")
	if vm {
		m.home = filepath.Join(m.root, "root")
		m.rules = vmRules(m.root, ip)
	} else {
		m.rules = workstationRules(m.root, ip)
	}
	for _, d := range append(vmDirs, ".deploydoc", strings.TrimPrefix(m.home, m.root+"/")) {
		if err := os.MkdirAll(filepath.Join(m.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeSimFile(t, filepath.Join(m.root, ".deploydoc", "paths.sed"), sedScript(m.rules), 0o644)
	// The shell an operator gets on this machine: a clean environment
	// (nothing of the test's LINKRAFT_* or PATH), the shims first on PATH,
	// then the machine's /usr/local/bin. LINKRAFT_ADDR stands for the
	// admin commands' default, http://127.0.0.1:8080: on a VM, that is the
	// VM's own node, whose loopback here is the VM's address; on the
	// workstation, its own address, where no node listens.
	path := shims + ":" + filepath.Join(m.root, "usr/local/bin") + ":/usr/sbin:/usr/bin:/sbin:/bin"
	shell := "#!/bin/sh\n# The login shell of " + name + " (deploy-doc test).\n" +
		"cd " + simQuote(m.home) + " || exit 1\n" +
		"exec env -i PATH=" + simQuote(path) + " HOME=" + simQuote(m.home) + " USER=root LOGNAME=root SHELL=/bin/bash LANG=C.UTF-8" +
		" LINKRAFT_ADDR=" + simQuote("http://"+ip+":8080") + " DEPLOYDOC_VM=" + simQuote(m.root) +
		" DEPLOYDOC_SHIMS=" + simQuote(shims) + " DEPLOYDOC_TEST=" + strconv.Itoa(os.Getpid()) + " bash \"$@\"\n"
	writeSimFile(t, m.shell(), shell, 0o755)
	if vm {
		writeSimFile(t, filepath.Join(shims, "vms", ip), m.root+"\n", 0o644)
	}
	return m
}

// shell is the machine's launcher: bash with the machine's environment.
func (m *simHost) shell() string { return filepath.Join(m.root, ".deploydoc", "shell") }

// path is where an absolute path of the doc lies on this machine.
func (m *simHost) path(p string) string { return filepath.Join(m.root, p) }

func writeSimFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func simQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// runScript runs script with bash on m and returns its output (stdout and
// stderr interleaved, as in a terminal). A recipe pasted into an
// interactive shell runs line by line and the operator sees the first
// command that fails; here the script stops at it (an ERR trap), and
// -u and pipefail make a missing variable or a failing curl in a pipe
// count as failing. set -e is not used: at a prompt the commands inside
// a function the doc defines (wait_caught_up's polling) may fail and be
// retried, and only the function's own result reaches the operator;
// the ERR trap, unlike -e, is not inherited by functions, so it stops
// exactly where the operator would notice.
func (m *simHost) runScript(t *testing.T, dir, label, script string, timeout time.Duration) (string, error) {
	t.Helper()
	file := filepath.Join(dir, label+".sh")
	out := filepath.Join(dir, label+".out")
	const trap = `trap 'rc=$?; echo "deploy-doc: stopped at a failing command (exit $rc): $BASH_COMMAND" >&2; exit $rc' ERR` + "\n"
	writeSimFile(t, file, trap+script, 0o644)
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(m.shell(), "-u", "-o", "pipefail", file)
	cmd.Stdin = nil
	// A file, not a pipe: a background process (the doc's "linkraft serve
	// … &") keeps a pipe open, and Wait would wait for it.
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group, so what it left running can be found and
	// ended; the kernel kills the shell if the test binary dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", label, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(timeout):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		runErr = fmt.Errorf("still running after %v: killed", timeout)
	}
	// A recipe may start something in the background and end it itself
	// (check-a-backup's "kill %1"); a node that was asked to stop drains
	// for a few seconds first. What is still there after that was left
	// behind: the operator's terminal would keep it running.
	if left := waitGroupGone(cmd.Process.Pid, 15*time.Second); len(left) > 0 {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if runErr == nil {
			runErr = fmt.Errorf("left processes running: %s", strings.Join(left, "; "))
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), runErr
}

// waitGroupGone waits (at most timeout) until no live process is in
// process group pgid and returns those still there.
func waitGroupGone(pgid int, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		left := groupMembers(pgid)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// groupMembers lists the live (not zombie) processes of group pgid as
// "pid command line".
func groupMembers(pgid int) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, pg, ok := procStat(pid)
		if !ok || pg != pgid || state == "Z" {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		found = append(found, fmt.Sprintf("%d %s", pid, strings.TrimSpace(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))))
	}
	return found
}

// procStat reads a process's state and process group from /proc.
func procStat(pid int) (state string, pgid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	// "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return "", 0, false
	}
	pg, err := strconv.Atoi(f[2])
	return f[0], pg, err == nil
}

// endStaleServices ends the nodes an earlier run of this test left behind
// (found by the INVOCATION_ID its systemctl shim gives them): they would
// hold the fixed addresses this run needs. Those of a test process that
// still runs are its own: left alone, they fail this run's check of the
// fixed addresses instead.
func endStaleServices(t *testing.T) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue
		}
		var id string
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("INVOCATION_ID="+deployDocServiceMark)); ok {
				id = string(v)
			}
		}
		if id == "" {
			continue
		}
		// TESTPID-SHELLPID; a mark without the test's pid is of an older run.
		owner, _, withOwner := strings.Cut(id, "-")
		if o, err := strconv.Atoi(owner); withOwner && err == nil && o > 1 && o != os.Getpid() {
			if state, _, ok := procStat(o); ok && state != "Z" {
				t.Logf("pid %d is a service of a deploy-doc run still going (test pid %d): left alone", pid, o)
				continue
			}
		}
		t.Logf("ending pid %d, a service an earlier run of this test left running", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// stopServices ends what the systemctl shim started on m (at the end of
// the test, or when it failed halfway).
func (m *simHost) stopServices() {
	pids, _ := filepath.Glob(filepath.Join(m.root, ".systemd", "*.pid"))
	for _, f := range pids {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// journal is what journalctl -u unit shows on m.
func (m *simHost) journal(unit string) string {
	b, _ := os.ReadFile(filepath.Join(m.root, ".systemd", unit+".log"))
	return string(b)
}

// servicePID is the pid of m's running unit (0 when none).
func (m *simHost) servicePID(unit string) int {
	b, err := os.ReadFile(filepath.Join(m.root, ".systemd", unit+".service.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if state, _, ok := procStat(pid); !ok || state == "Z" {
		return 0
	}
	return pid
}

// writeShims writes the stand-ins for systemd, ssh and the rest into dir.
func writeShims(t *testing.T, dir string) {
	t.Helper()
	for name, body := range deployDocShims {
		writeSimFile(t, filepath.Join(dir, name), body, 0o755)
	}
	if err := os.MkdirAll(filepath.Join(dir, "vms"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// deployDocShims are the scripts on PATH in every simulated machine's
// shell. Each says "(test shim)" in what it prints, so a failure's output
// shows what was simulated.
var deployDocShims = map[string]string{
	// systemctl runs what the installed unit files say (ExecStart,
	// EnvironmentFile, Environment, WorkingDirectory, StateDirectory,
	// UMask, Type, KillSignal, TimeoutStopSec, drop-ins in UNIT.d/*.conf),
	// with the VM's paths, so a unit that drifts from the binary or the
	// doc fails the test. Not simulated: User= (everything runs as the
	// caller; but a node of an unprivileged User= without
	// CAP_NET_BIND_SERVICE fails to bind a port below 1024, as it would),
	// the rest of the sandbox, Restart=, timers (the test starts the
	// service a timer would). A Type=notify unit counts as started once the node
	// answers /health/live: this linkraft sends READY=1 when its HTTP
	// listener answers.
	"systemctl": `#!/bin/sh
set -eu
vm=${DEPLOYDOC_VM:?systemctl (test shim): not on a simulated VM}
units=$vm/etc/systemd/system
state=$vm/.systemd
mkdir -p "$state"

note() { echo "systemctl (test shim): $*" >&2; }
die() { note "$*"; exit 1; }
full() { case $1 in *.service | *.timer) echo "$1" ;; *) echo "$1.service" ;; esac; }
jname() { n=$(full "$1"); echo "${n%.service}"; }
journal() { echo "$(date -u '+%b %d %H:%M:%S') ${vm##*/} systemd[1]: $2" >>"$state/$(jname "$1").log"; }
exists() { [ -f "$units/$1" ] || { echo "Failed to $2 $1: Unit $1 not found." >&2; exit 5; }; }

# text UNIT: the unit and its drop-ins, in order, with the VM's paths.
text() {
	{
		cat "$units/$1"
		for d in "$units/$1.d"/*.conf; do if [ -f "$d" ]; then cat "$d"; fi; done
	} | sed -E -f "$vm/.deploydoc/paths.sed"
}
# prop UNIT KEY: the last assignment wins, as in systemd.
prop() { text "$1" | sed -n "s/^$2=//p" | tail -n 1; }
desc() { d=$(prop "$1" Description); echo "${d:-$1}"; }

# envfile UNIT: the service's environment, one KEY=VALUE a line:
# Environment= first, then the EnvironmentFile= files, which override it.
envfile() {
	out=$state/$1.env
	: >"$out"
	text "$1" | sed -n 's/^Environment=//p' >"$out.tmp"
	while IFS= read -r kv; do
		case $kv in *'"'* | *"'"* | *' '*) die "cannot parse Environment=$kv (quotes, several assignments)" ;; esac
		echo "$kv" >>"$out"
	done <"$out.tmp"
	text "$1" | sed -n 's/^EnvironmentFile=//p' >"$out.tmp"
	while IFS= read -r f; do
		optional=
		case $f in -*) optional=1 f=${f#-} ;; esac
		if [ ! -f "$f" ]; then
			[ -n "$optional" ] && continue
			journal "$1" "$1: Failed to load environment files: No such file or directory"
			die "$1: Failed to load environment file $f: No such file or directory"
		fi
		while IFS= read -r line || [ -n "$line" ]; do
			case $line in '' | '#'* | ';'*) continue ;; esac
			case $line in [A-Za-z_]*=*) ;; *) die "cannot parse a line of $f: $line" ;; esac
			case ${line#*=} in '"'* | "'"*) die "quoted values are not parsed here: $line" ;; esac
			echo "$line" >>"$out"
		done <"$f"
	done <"$out.tmp"
	rm -f "$out.tmp"
}

# statedirs UNIT: StateDirectory= under /var/lib, with StateDirectoryMode=.
statedirs() {
	mode=$(prop "$1" StateDirectoryMode)
	for d in $(prop "$1" StateDirectory); do
		mkdir -p "$vm/var/lib/$d"
		chmod "${mode:-0755}" "$vm/var/lib/$d"
	done
}

# exec_line UNIT: ExecStart=, split on spaces (no quotes or variables here).
exec_line() {
	e=$(prop "$1" ExecStart)
	case $e in '' | *'"'* | *"'"* | *'$'* | *'%'*) die "cannot parse ExecStart=$e" ;; esac
	echo "$e"
}

alive() { [ -n "${1:-}" ] && [ -r "/proc/$1/stat" ] && ! sed 's/^.*) //' "/proc/$1/stat" | grep -q '^Z'; }
pidof_unit() { cat "$state/$1.pid" 2>/dev/null || true; }

# run UNIT: ExecStart in a clean environment (PATH, the unit's variables,
# an INVOCATION_ID), in the unit's directory with its umask; $detach
# (setsid) puts it in a session of its own.
run() {
	wd=$(prop "$1" WorkingDirectory)
	um=$(prop "$1" UMask)
	cmd=$(exec_line "$1")
	statedirs "$1"
	envfile "$1"
	cd "${wd:-$vm}"
	umask "${um:-0022}"
	exec ${detach:-} env -i PATH="$vm/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" INVOCATION_ID="` + deployDocServiceMark + `${DEPLOYDOC_TEST:-0}-$$" \
		sh -c 'echo $$ >"$1"; while IFS= read -r kv; do export "$kv"; done <"$2"; shift 2; exec "$@"' \
		sh "$state/$1.pid" "$state/$1.env" $cmd
}

# http_addr UNIT: where the node answers HTTP, from its LINKRAFT_HTTP_ADDR.
http_addr() {
	a=$(sed -n 's/^LINKRAFT_HTTP_ADDR=//p' "$state/$1.env" | tail -n 1)
	a=${a:-:8080}
	h=${a%:*}
	case $h in '' | 0.0.0.0 | '[::]') h=127.0.0.1 ;; esac
	echo "$h:${a##*:}"
}

# lowports UNIT: a node run as an unprivileged User= binds a port below
# 1024 only with CAP_NET_BIND_SERVICE both left in CapabilityBoundingSet=
# and granted by AmbientCapabilities= (DEPLOY.md's drop-in). The shim runs
# the node as the caller, so it fails the start here, as the node would.
lowports() {
	user=$(prop "$1" User)
	case ${user:-root} in root | 0) return 0 ;; esac
	for k in LINKRAFT_HTTP_ADDR LINKRAFT_HTTPS_ADDR; do
		a=$(sed -n "s/^$k=//p" "$state/$1.env" | tail -n 1)
		p=${a##*:}
		case $p in '' | *[!0-9]*) continue ;; esac
		[ "$p" -lt 1024 ] || continue
		for c in CapabilityBoundingSet AmbientCapabilities; do
			case " $(prop "$1" "$c") " in *' CAP_NET_BIND_SERVICE '*) continue ;; esac
			journal "$1" "linkraft (test shim): listen tcp $a: bind: permission denied (User=$user, no CAP_NET_BIND_SERVICE in $c=)"
			journal "$1" "$1: Main process exited, code=exited, status=1/FAILURE"
			echo "Job for $1 failed because the control process exited with error code." >&2
			echo "See \"systemctl status $1\" and \"journalctl -xeu $1\" for details." >&2
			exit 1
		done
	done
}

start() {
	u=$(full "$1")
	exists "$u" start
	case $u in *.timer)
		note "$u: timers are not simulated; the test starts the service it triggers"
		return 0 ;;
	esac
	typ=$(prop "$u" Type)
	if [ "${typ:-simple}" = oneshot ]; then
		journal "$u" "Starting $(desc "$u")..."
		rc=0
		( run "$u" ) >>"$state/$(jname "$u").log" 2>&1 </dev/null || rc=$?
		rm -f "$state/$u.pid"
		if [ "$rc" != 0 ]; then
			journal "$u" "$u: Main process exited, code=exited, status=$rc/FAILURE"
			journal "$u" "Failed to start $(desc "$u")."
			echo failed >"$state/$u.result"
			echo "Job for $u failed because the control process exited with error code." >&2
			echo "See \"systemctl status $u\" and \"journalctl -xeu $u\" for details." >&2
			exit 1
		fi
		journal "$u" "Finished $(desc "$u")."
		echo success >"$state/$u.result"
		return 0
	fi
	if alive "$(pidof_unit "$u")"; then return 0; fi
	rm -f "$state/$u.pid"
	journal "$u" "Starting $(desc "$u")..."
	envfile "$u"
	lowports "$u"
	# A session of its own, as a service has: what ends the caller's
	# terminal or process group leaves the node alone.
	(
		detach=setsid
		run "$u"
	) >>"$state/$(jname "$u").log" 2>&1 </dev/null &
	# The child writes its pid before it execs the node; then, for
	# Type=notify, wait for the node to answer as systemd waits for READY=1.
	deadline=$(($(date +%s) + 60))
	while :; do
		pid=$(pidof_unit "$u")
		if [ -n "$pid" ] && ! alive "$pid"; then
			journal "$u" "$u: Main process exited, code=exited, status=1/FAILURE"
			echo "Job for $u failed because the control process exited with error code." >&2
			echo "See \"systemctl status $u\" and \"journalctl -xeu $u\" for details." >&2
			exit 1
		fi
		if [ -n "$pid" ]; then
			[ "${typ:-simple}" = notify ] || break
			if curl -fs -m 1 -o /dev/null "http://$(http_addr "$u")/health/live"; then break; fi
		fi
		[ "$(date +%s)" -lt "$deadline" ] || die "$u did not answer /health/live within 60 s (the unit allows 20 min; these nodes are empty)"
		sleep 0.1
	done
	journal "$u" "Started $(desc "$u")."
}

stop() {
	u=$(full "$1")
	exists "$u" stop
	case $u in *.timer) return 0 ;; esac
	pid=$(pidof_unit "$u")
	if alive "$pid"; then
		journal "$u" "Stopping $(desc "$u")..."
		sig=$(prop "$u" KillSignal)
		sig=${sig:-SIGTERM}
		tmo=$(prop "$u" TimeoutStopSec)
		tmo=${tmo:-90}
		case $tmo in *[!0-9]*) die "cannot parse TimeoutStopSec=$tmo (seconds only here)" ;; esac
		kill -s "${sig#SIG}" "$pid"
		deadline=$(($(date +%s) + tmo))
		while alive "$pid"; do
			if [ "$(date +%s)" -ge "$deadline" ]; then
				journal "$u" "$u: State 'stop-sigterm' timed out. Killing."
				kill -s KILL "$pid" || true
				break
			fi
			sleep 0.1
		done
		journal "$u" "Stopped $(desc "$u")."
	fi
	rm -f "$state/$u.pid"
}

status() {
	u=$(full "$1")
	exists "$u" "get status of"
	echo "* $u - $(desc "$u")"
	echo "     Loaded: loaded ($units/$u)"
	pid=$(pidof_unit "$u")
	if alive "$pid"; then
		echo "     Active: active (running)"
		echo "   Main PID: $pid"
		return 0
	fi
	if [ "$(cat "$state/$u.result" 2>/dev/null)" = failed ]; then
		echo "     Active: failed (Result: exit-code)"
	else
		echo "     Active: inactive (dead)"
	fi
	return 3
}

now=
units_=
verb=
for a in "$@"; do
	case $a in
	--now) now=1 ;;
	--no-pager | --quiet | -q) ;;
	-*) die "unsupported option $a" ;;
	*) if [ -z "$verb" ]; then verb=$a; else units_="$units_ $a"; fi ;;
	esac
done
case $verb in
daemon-reload) ;; # the shim reads the unit files at every start
start) for u in $units_; do start "$u"; done ;;
stop) for u in $units_; do stop "$u"; done ;;
restart) for u in $units_; do stop "$u"; start "$u"; done ;;
enable)
	for u in $units_; do
		exists "$(full "$u")" enable
		touch "$state/$(full "$u").enabled"
		note "enabled $(full "$u") (the simulated VM does not boot)"
		if [ -n "$now" ]; then start "$u"; fi
	done ;;
disable)
	for u in $units_; do
		rm -f "$state/$(full "$u").enabled"
		if [ -n "$now" ]; then stop "$u"; fi
	done ;;
status) rc=0; for u in $units_; do status "$u" || rc=$?; done; exit "$rc" ;;
*) die "unsupported command: systemctl $*" ;;
esac
`,
	// journalctl shows what the systemctl shim's services printed.
	"journalctl": `#!/bin/sh
set -eu
vm=${DEPLOYDOC_VM:?journalctl (test shim): not on a simulated VM}
unit= n=
while [ $# -gt 0 ]; do
	case $1 in
	-u) unit=$2; shift 2 ;;
	-n) n=$2; shift 2 ;;
	--no-pager) shift ;;
	*) echo "journalctl (test shim): unsupported argument $1" >&2; exit 2 ;;
	esac
done
[ -n "$unit" ] || { echo "journalctl (test shim): only -u UNIT is simulated" >&2; exit 2; }
log=$vm/.systemd/${unit%.service}.log
if [ ! -s "$log" ]; then echo "-- No entries --"; exit 0; fi
if [ -n "$n" ]; then tail -n "$n" "$log"; else cat "$log"; fi
`,
	// ssh runs the command with bash on the VM whose address it names,
	// with that VM's paths, as root.
	"ssh": `#!/bin/sh
set -eu
case ${1:-} in -* | '') echo "ssh (test shim): only ssh [user@]HOST COMMAND is simulated" >&2; exit 255 ;; esac
host=${1#*@}
shift
vm=$(cat "$DEPLOYDOC_SHIMS/vms/$host" 2>/dev/null) || { echo "ssh: connect to host $host port 22: Connection refused" >&2; exit 255; }
[ $# -gt 0 ] || { echo "ssh (test shim): no command (a login shell is not simulated)" >&2; exit 255; }
case "$*" in *"${DEPLOYDOC_VM:-/nonexistent}/"*)
	echo "ssh (test shim): the command holds a path of the calling machine's; the substitution table mapped a remote path as a local one: $*" >&2
	exit 255 ;;
esac
cmd=$(printf '%s\n' "$*" | sed -E -f "$vm/.deploydoc/paths.sed")
exec "$vm/.deploydoc/shell" -c "$cmd"
`,
	// scp copies between the caller's files and a VM's, mapping the
	// remote path onto that VM.
	"scp": `#!/bin/sh
set -eu
rec=
while [ $# -gt 0 ]; do
	case $1 in
	-r) rec=-r; shift ;;
	-p | -q) shift ;;
	-*) echo "scp (test shim): unsupported option $1" >&2; exit 1 ;;
	*) break ;;
	esac
done
[ $# -ge 2 ] || { echo "usage: scp SRC... DEST" >&2; exit 1; }
resolve() {
	case $1 in
	/* | ./* | ../*) printf '%s\n' "$1" ;;
	*:*)
		h=${1%%:*}; h=${h#*@}
		vm=$(cat "$DEPLOYDOC_SHIMS/vms/$h" 2>/dev/null) || { echo "ssh: connect to host $h port 22: Connection refused" >&2; exit 1; }
		p=${1#*:}
		case $p in "${DEPLOYDOC_VM:-/nonexistent}/"*)
			echo "scp (test shim): $1 names a path of the calling machine's; the substitution table mapped a remote path as a local one" >&2
			exit 1 ;;
		esac
		case $p in /*) ;; *) p=/root/$p ;; esac
		printf '%s\n' "$p" | sed -E -f "$vm/.deploydoc/paths.sed" ;;
	*) printf '%s\n' "$1" ;;
	esac
}
n=$#
i=0
for a in "$@"; do
	i=$((i + 1))
	r=$(resolve "$a")
	if [ "$i" -eq "$n" ]; then dest=$r; else set -- "$@" "$r"; fi
done
shift "$n"
exec cp $rec -- "$@" "$dest"
`,
	// apt-get installs nothing: it checks that what the recipe asks for is
	// on this machine, and says how to get it for CI.
	"apt-get": `#!/bin/sh
set -eu
[ "${1:-}" = install ] || { echo "apt-get (test shim): only install is simulated" >&2; exit 100; }
shift
pkgs=
for p in "$@"; do
	case $p in
	-*) continue ;;
	curl | jq) command -v "$p" >/dev/null || { echo "apt-get (test shim): $p is not on this machine: install it on the test host (.ci/run)" >&2; exit 100; } ;;
	*) echo "apt-get (test shim): the test knows no command for package $p" >&2; exit 100 ;;
	esac
	pkgs="$pkgs $p"
done
echo "apt-get (test shim):$pkgs already on this machine"
`,
	// useradd creates no user: every simulated service runs as the
	// caller (root in CI).
	"useradd": `#!/bin/sh
echo "useradd (test shim): no user made; the simulated services run as $(id -un)" >&2
`,
	// ufw applies nothing (loopback addresses need no rules); it records
	// the rules so the test can check that the doc opens what the nodes use.
	"ufw": `#!/bin/sh
set -eu
echo "$*" >>"${DEPLOYDOC_VM:?ufw (test shim): not on a simulated VM}/.deploydoc/ufw.rules"
echo "Rule added (test shim: recorded, not applied)"
`,
}

#!/usr/bin/env bash
# Three linkraft nodes against three etcd members, loaded by the same tool at
# the same concurrency in the same run (ratios survive a noisy machine;
# absolutes do not). Every round measures, in a rotating order:
#   lk-leader    linkraft creates sent to the Raft leader only
#   lk-follower  linkraft creates sent to one follower only (forwarded)
#   lk-rr        linkraft creates spread round-robin over the 3 nodes
#   etcd-rr      etcd puts spread round-robin over the 3 members
#   etcd-leader  etcd puts sent to the etcd leader only
# with wrk -t3 -c$CONNS and bench/wrk/cluster.lua: thread i keeps all its
# connections on target i mod N (the lua setup() hook sets thread.addr), so a
# spread row has exactly CONNS/3 connections (rounded down: wrk gives each of
# its 3 threads CONNS/3, so -c256 opens 85 x 3 = 255) on each server for the
# whole run, and every request writes a distinct key/URL. One wrk process,
# so one clock and one summary; every row uses the same -t3 -c$CONNS. Only
# 2xx responses count as throughput; other statuses and socket errors are
# reported next to them.
# Each row also reports the servers' CPU per 2xx write: the user and system
# time (/proc/PID/stat) of the three servers of its kind over the wrk run,
# background work included, over its 2xx answers.
# Then, with "linkraft bench --scenario mixed" over the three nodes: a closed
# loop at CONNS connections (its peak), and an open loop at half that peak
# (its p99).
#
# linkraft: --create-rate 0, one cluster key (Raft over mutual TLS, as always),
# fsync on every Raft append. etcd: Debian's etcd-server, plain HTTP, default
# flags (fsync on every WAL write), puts through its JSON gRPC gateway. Both
# keep their data in one temp dir on the same file system.
#
# Credentials: the nodes get a random --admin-token (the admin credential),
# used only for the admin calls (POST /admin/keys, GET /admin/cluster). With
# it the script makes one API key with links:write on workspaces "default"
# (the wrk rows' creates, which name none) and "bench" (where linkraft bench
# seeds and creates, removing its seeds afterwards), and every linkraft
# create carries that key: the wrk rows (LINKRAFT_KEY,
# sent by bench/wrk/cluster.lua as "Authorization: Bearer"), the probes and
# "linkraft bench --key" (its creates and seeding; redirects carry none, as
# browsers send none). A key is checked against the replicated state, so this
# measures creates as clients with keys make them. etcd runs without auth.
#
# Needs wrk and etcd-server from Debian (installed with apt-get if missing),
# curl and jq. Usage: bench/cluster.sh [seconds per run] [rounds]
# (defaults 10 and 3; CONNS=256 in the environment sets the connections,
# LINKRAFT_BIN a prebuilt binary instead of building ./cmd/linkraft).
# Only 127.0.0.1 is used; every process it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${2:-3}
conns=${CONNS:-256}
usage="usage: bench/cluster.sh [seconds per run (10)] [rounds (3)]"
[[ $secs =~ ^[1-9][0-9]*$ && $rounds =~ ^[1-9][0-9]*$ && $conns =~ ^[1-9][0-9]*$ ]] || { echo "$usage" >&2; exit 2; }
(( conns >= 3 )) || { echo "CONNS must be at least 3" >&2; exit 2; }

die() { echo "bench/cluster.sh: $*" >&2; exit 1; }

# need installs a Debian package when its command is missing, or stops.
need() { # command, package
	command -v "$1" >/dev/null && return 0
	echo "$1 not found: installing Debian package $2 (apt-get install -y $2)" >&2
	command -v apt-get >/dev/null || die "$1 is missing and apt-get is not available: install $2 by hand"
	[ "$(id -u)" = 0 ] || die "$1 is missing and this is not root: run 'apt-get install -y $2' as root"
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y "$2" >&2; then
		DEBIAN_FRONTEND=noninteractive apt-get update >&2 &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y "$2" >&2 ||
			die "could not install $2 (see apt-get's error above); $1 is needed"
	fi
	command -v "$1" >/dev/null || die "$2 installed but $1 is still not on PATH"
}
need curl curl
need jq jq
need wrk wrk
need etcd etcd-server

# Ports (127.0.0.1 only): linkraft HTTP 2808i, Raft 2809i, gossip 2807i;
# etcd client 2837i, peer 2838i, for i = 1..3.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for i in 1 2 3; do
	for p in "2808$i" "2809$i" "2807$i" "2837$i" "2838$i"; do
		port_busy "$p" && die "port 127.0.0.1:$p is in use; stop what listens there first"
	done
done
lk=(127.0.0.1:28081 127.0.0.1:28082 127.0.0.1:28083)
ec=(127.0.0.1:28371 127.0.0.1:28372 127.0.0.1:28373)

tmp=$(mktemp -d)
pids=() lk_pids=() ec_pids=()
cleanup() {
	trap - EXIT INT TERM
	[ ${#pids[@]} -gt 0 ] || { rm -rf "$tmp"; return; }
	kill "${pids[@]}" 2>/dev/null || true
	for _ in $(seq 50); do # up to 5 s for a clean stop, then kill -9
		alive=0
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ "$alive" = 0 ] && break
		sleep 0.1
	done
	kill -9 "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "${LINKRAFT_BIN:-}" ]; then
	bin=$LINKRAFT_BIN
else
	go build -o "$tmp/linkraft" ./cmd/linkraft
	bin=$tmp/linkraft
fi
key=$("$bin" keygen)
# The admin credential, and the API key the creates carry (made below).
token=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
apikey=""

# --- linkraft: three nodes -------------------------------------------------
for i in 1 2 3; do
	LINKRAFT_CLUSTER_KEY=$key "$bin" serve --id "n$i" --data-dir "$tmp/lk/n$i" --http-addr "127.0.0.1:2808$i" \
		--raft-addr "127.0.0.1:2809$i" --gossip-addr "127.0.0.1:2807$i" \
		--join 127.0.0.1:28071,127.0.0.1:28072,127.0.0.1:28073 --bootstrap-expect 3 \
		--admin-token "$token" --create-rate 0 --log-level warn 2>>"$tmp/linkraft-n$i.log" &
	pids+=($!) lk_pids+=($!)
done

# lk_leader prints the index (0-2) of the node every node names as leader,
# or nothing.
lk_leader() {
	local ids=() i id
	for i in 0 1 2; do
		id=$(curl -s -m 2 "http://${lk[$i]}/health" | jq -r '.leader // empty' 2>/dev/null || true)
		ids+=("$id")
	done
	[ -n "${ids[0]}" ] && [ "${ids[0]}" = "${ids[1]}" ] && [ "${ids[1]}" = "${ids[2]}" ] || return 0
	for i in 0 1 2; do
		[ "$(curl -s -m 2 "http://${lk[$i]}/health" | jq -r .node_id 2>/dev/null)" = "${ids[0]}" ] && { echo "$i"; return 0; }
	done
}
lk_create() { # node index → HTTP status of a create with the API key
	curl -s -o /dev/null -w '%{http_code}' -m 10 -H 'Content-Type: application/json' \
		-H "Authorization: Bearer $apikey" \
		-d "{\"url\":\"https://example.com/probe/$RANDOM$RANDOM\"}" "http://${lk[$1]}/api/v1/urls" || true
}
# lk_make_key makes the API key on a node with the admin token (a Raft
# write, so it also proves the cluster takes writes); it prints the secret.
lk_make_key() { # node index
	curl -s -m 10 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
		-d '{"name":"bench/cluster.sh","scopes":["links:write"],"workspaces":["default","bench"]}' \
		"http://${lk[$1]}/admin/keys" | jq -r '.key // empty' 2>/dev/null || true
}
lead=""
for _ in $(seq 300); do # up to ~30 s
	lead=$(lk_leader)
	[ -n "$lead" ] && apikey=$(lk_make_key "$lead") && [ -n "$apikey" ] && break
	lead=""
	sleep 0.1
done
[ -n "$lead" ] || { tail -n 20 "$tmp"/linkraft-n*.log >&2; die "the linkraft cluster elected no leader (or made no API key) in 30 s"; }
# Every node must take a create with the key before any row starts.
for i in 0 1 2; do
	ok=""
	for _ in $(seq 100); do [ "$(lk_create "$i")" = 201 ] && { ok=1; break; }; sleep 0.1; done
	[ -n "$ok" ] || die "node n$((i + 1)) did not take a create with the API key in 10 s (last status $(lk_create "$i"))"
done

# --- etcd: three members ---------------------------------------------------
initial=e1=http://127.0.0.1:28381,e2=http://127.0.0.1:28382,e3=http://127.0.0.1:28383
for i in 1 2 3; do
	etcd --name "e$i" --data-dir "$tmp/etcd/e$i" \
		--listen-client-urls "http://127.0.0.1:2837$i" --advertise-client-urls "http://127.0.0.1:2837$i" \
		--listen-peer-urls "http://127.0.0.1:2838$i" --initial-advertise-peer-urls "http://127.0.0.1:2838$i" \
		--initial-cluster "$initial" --initial-cluster-state new --initial-cluster-token linkraft-bench \
		--logger zap --log-outputs stderr --log-level warn 2>>"$tmp/etcd-e$i.log" &
	pids+=($!) ec_pids+=($!)
done
# etcd 3.4 serves the gateway under /v3/ (and the older /v3beta/); use the
# first that answers a put.
etcd_put() { # member index, path → HTTP status
	curl -s -o /dev/null -w '%{http_code}' -m 5 -X POST "http://${ec[$1]}$2" \
		-d '{"key":"cHJvYmU=","value":"cHJvYmU="}' || true
}
etcd_healthy() { # member index
	[ "$(curl -s -m 2 "http://${ec[$1]}/health" | jq -r .health 2>/dev/null || true)" = true ]
}
up=""
for _ in $(seq 300); do # up to ~30 s
	etcd_healthy 0 && etcd_healthy 1 && etcd_healthy 2 && { up=1; break; }
	sleep 0.1
done
[ -n "$up" ] || { tail -n 20 "$tmp"/etcd-e*.log >&2; die "the etcd cluster was not healthy within 30 s"; }
etcd_path=""
for p in /v3/kv/put /v3beta/kv/put; do
	[ "$(etcd_put 0 "$p")" = 200 ] && { etcd_path=$p; break; }
done
[ -n "$etcd_path" ] || die "etcd is healthy but took no put on /v3/kv/put nor /v3beta/kv/put"
etcd_status_path=${etcd_path%/kv/put}/maintenance/status
# etcd_leader prints the index (0-2) of the member that is the leader.
etcd_leader() {
	local i st
	for i in 0 1 2; do
		st=$(curl -s -m 2 -X POST -d '{}' "http://${ec[$i]}$etcd_status_path" || true)
		[ -n "$st" ] && [ "$(jq -r '(.leader // "") == (.header.member_id // "-")' <<<"$st" 2>/dev/null)" = true ] &&
			{ echo "$i"; return 0; }
	done
	return 0
}
# Raft terms: a change of term during a row means an election ran, even if
# the same server leads at the end.
lk_term() { curl -s -m 2 -H "Authorization: Bearer $token" "http://${lk[0]}/admin/cluster" | jq -r '.term // empty' 2>/dev/null || true; }
etcd_term() { curl -s -m 2 -X POST -d '{}' "http://${ec[0]}$etcd_status_path" | jq -r '.header.raft_term // empty' 2>/dev/null || true; }

elead=""
for _ in $(seq 100); do elead=$(etcd_leader); [ -n "$elead" ] && break; sleep 0.1; done
[ -n "$elead" ] || die "could not find the etcd leader (POST $etcd_status_path)"

# --- measuring -------------------------------------------------------------
per=$((conns / 3))
echo "machine: $(nproc) cores ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)), $(uname -m), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(. /etc/os-release && echo "$PRETTY_NAME"), $(date -u '+%F %T UTC')"
echo "data dirs: $tmp ($(df -T "$tmp" | awk 'NR==2 {print $2}')); loopback only; servers and load tools share the cores"
echo "versions: $("$bin" version 2>&1 | awk 'NR==1') (tree $(git describe --always --dirty 2>/dev/null || echo unknown)); $(etcd --version 2>&1 | awk 'NR==1'); $({ wrk -v 2>&1 || true; } | awk 'NR==1 {print $1, $2}'); $(go version 2>/dev/null | awk '{print $3}')"
echo "wrk -t3 -c$conns -d${secs}s --timeout 5s -s bench/wrk/cluster.lua: $per connections per thread, $((per * 3)) in all; thread i stays on target i mod N"
echo "credentials: linkraft creates carry an API key with links:write (Authorization: Bearer); etcd has no auth"
echo "etcd gateway: POST $etcd_path; linkraft leader n$((lead + 1)) (${lk[$lead]}, term $(lk_term)), etcd leader e$((elead + 1)) (${ec[$elead]}, term $(etcd_term))"
echo

# settled runs a leader lookup until it names one (up to ~5 s): right after
# a run a node can be slow to answer.
settled() { # lk_leader or etcd_leader
	local l=""
	for _ in $(seq 50); do l=$("$1"); [ -n "$l" ] && break; sleep 0.1; done
	echo "$l"
}

rows=(lk-leader lk-follower lk-rr etcd-rr etcd-leader)
declare -A rps note detail oks ticks
peak=() p99=() p99create=() openinfo=()

# served prints how many write requests each server has counted so far, from
# its own metrics: linkraft's create route (a create forwarded by a follower
# counts on the follower and again on the leader), etcd's gRPC Put. The
# per-row deltas show where wrk's connections really went.
served() { # kind
	local i
	for i in 0 1 2; do
		if [ "$1" = linkraft ]; then
			curl -s -m 5 "http://${lk[$i]}/metrics" | awk '/^linkraft_http_requests_total\{/ && /route="create"/ {s += $NF} END {printf "%d ", s}'
		else
			curl -s -m 5 "http://${ec[$i]}/metrics" | awk '/^grpc_server_handled_total\{/ && /grpc_method="Put"/ {s += $NF} END {printf "%d ", s}'
		fi
	done
}

# cpu_ticks prints the user and system clock ticks the three servers of a
# kind have used so far.
hz=$(getconf CLK_TCK)
cpu_ticks() { # kind
	local p s=0 list
	if [ "$1" = linkraft ]; then list=("${lk_pids[@]}"); else list=("${ec_pids[@]}"); fi
	for p in "${list[@]}"; do s=$((s + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
	echo "$s"
}
# us_per prints microseconds of CPU per write.
us_per() { awk -v t="$1" -v n="$2" -v hz="$hz" 'BEGIN {if (n > 0) printf "%.1f", t * 1e6 / hz / n; else print "n/a"}'; }

# wrk_row runs one wrk row and records its 2xx rate, flags and details.
wrk_row() { # round, row, kind, targets
	local r=$1 row=$2 kind=$3 targets=$4 first out res ok dur non2xx sock statuses before after t0
	first=${targets%%,*}
	out=$tmp/wrk-$row-r$r.txt
	read -ra before <<<"$(served "$kind")"
	t0=$(cpu_ticks "$kind")
	WRK_KIND=$kind WRK_TARGETS=$targets WRK_PATH=$etcd_path WRK_RUN="$row-r$r-$$" LINKRAFT_KEY=$apikey \
		wrk -t3 -c"$conns" -d"${secs}s" --timeout 5s -s bench/wrk/cluster.lua "http://$first/" >"$out" 2>&1 || true
	ticks[$row,$r]=$(( $(cpu_ticks "$kind") - t0 ))
	read -ra after <<<"$(served "$kind")"
	res=$(grep '^RESULT ' "$out" || true)
	if [ -z "$res" ]; then
		cat "$out" >&2
		rps[$row,$r]=0 oks[$row,$r]=0 note[$row,$r]="!" detail[$row,$r]="wrk printed no RESULT line"
		return
	fi
	field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$res"; }
	ok=$(field ok) dur=$(field duration_s) non2xx=$(field non2xx) statuses=$(field statuses)
	sock=$(( $(field connect) + $(field read) + $(field write) + $(field timeout) ))
	rps[$row,$r]=$(awk -v o="$ok" -v d="$dur" 'BEGIN {printf "%.0f", (d > 0 ? o / d : 0)}')
	oks[$row,$r]=$ok
	note[$row,$r]=""
	detail[$row,$r]="server CPU $(us_per "${ticks[$row,$r]}" "$ok") us a 2xx write; statuses $statuses; socket errors $sock (connect $(field connect), read $(field read), write $(field write), timeout $(field timeout)); counted by server 1/2/3: $((after[0] - before[0])) / $((after[1] - before[1])) / $((after[2] - before[2]))"
	if [ "$non2xx" != 0 ] || [ "$sock" != 0 ]; then note[$row,$r]="!"; fi
	printf '  %-12s %8s 2xx/s   %s\n' "$row" "${rps[$row,$r]}" "${detail[$row,$r]}"
}

for r in $(seq "$rounds"); do
	echo "round $r"
	lead=$(settled lk_leader); elead=$(settled etcd_leader)
	[ -n "$lead" ] || die "round $r: the linkraft nodes do not agree on a leader"
	[ -n "$elead" ] || die "round $r: no etcd leader"
	fol=$(( (lead + 1) % 3 ))
	for k in 0 1 2 3 4; do
		row=${rows[$(( (k + r - 1) % 5 ))]}
		case $row in lk-*) term=$(lk_term) ;; *) term=$(etcd_term) ;; esac
		case $row in
		lk-leader) wrk_row "$r" "$row" linkraft "${lk[$lead]}" ;;
		lk-follower) wrk_row "$r" "$row" linkraft "${lk[$fol]}" ;;
		lk-rr) wrk_row "$r" "$row" linkraft "${lk[0]},${lk[1]},${lk[2]}" ;;
		etcd-rr) wrk_row "$r" "$row" etcd "${ec[0]},${ec[1]},${ec[2]}" ;;
		etcd-leader) wrk_row "$r" "$row" etcd "${ec[$elead]}" ;;
		esac
		# An election during a row makes it a different measurement: flag it.
		case $row in
		lk-*) now=$(settled lk_leader); [ "$now" = "$lead" ] && [ "$(lk_term)" = "$term" ] || { note[$row,$r]+="*"; echo "  (linkraft election during $row: leader n$((lead + 1)) -> $([ -n "$now" ] && echo "n$((now + 1))" || echo none), term $term -> $(lk_term))"; lead=${now:-$lead}; fol=$(( (lead + 1) % 3 )); } ;;
		etcd-*) now=$(settled etcd_leader); [ "$now" = "$elead" ] && [ "$(etcd_term)" = "$term" ] || { note[$row,$r]+="*"; echo "  (etcd election during $row: term $term -> $(etcd_term))"; elead=${now:-$elead}; } ;;
		esac
	done

	# linkraft bench, mixed (80% redirects, 20% creates) over the three nodes.
	targets="${lk[0]},${lk[1]},${lk[2]}"
	LINKRAFT_KEY=$apikey "$bin" bench --scenario mixed --targets "$targets" -c "$conns" --duration "${secs}s" --warmup 2s \
		--json >"$tmp/mixed-closed-r$r.json" 2>"$tmp/mixed-closed-r$r.log" || { cat "$tmp/mixed-closed-r$r.log" >&2; die "linkraft bench (closed loop) failed"; }
	peak[$r]=$(jq -r '(.success / (if .elapsed_s > 0 then .elapsed_s else 1 end)) | floor' "$tmp/mixed-closed-r$r.json")
	printf '  %-12s %8s 2xx/s   closed loop, %s connections; %s\n' mixed-peak "${peak[$r]}" "$conns" \
		"$(jq -r '"errors \(.errors) \(.errors_by_status) transport \(.transport_errors); p99 \(.latency_ms.p99) ms"' "$tmp/mixed-closed-r$r.json")"
	[ "$(jq .errors "$tmp/mixed-closed-r$r.json")" = 0 ] || note[mixed-peak,$r]="!"
	rate=$(( peak[r] / 2 ))
	(( rate > 0 )) || die "linkraft bench measured no successful requests"
	LINKRAFT_KEY=$apikey "$bin" bench --scenario mixed --targets "$targets" -c "$conns" --rate "$rate" --duration "${secs}s" --warmup 2s \
		--json >"$tmp/mixed-open-r$r.json" 2>"$tmp/mixed-open-r$r.log" || { cat "$tmp/mixed-open-r$r.log" >&2; die "linkraft bench (open loop) failed"; }
	p99[$r]=$(jq -r '.latency_ms.p99' "$tmp/mixed-open-r$r.json")
	p99create[$r]=$(jq -r '[.ops[] | select(.op == "create") | .latency_ms.p99][0] // "-"' "$tmp/mixed-open-r$r.json")
	openinfo[$r]=$(jq -r '"\(.rate) req/s asked, \(.throughput_rps | floor) done; p50 \(.latency_ms.p50) p99 \(.latency_ms.p99) p99.9 \(.latency_ms.p99_9) ms; errors \(.errors) \(.errors_by_status) transport \(.transport_errors); late sends \(.late_sends), never sent \(.unsent)"' "$tmp/mixed-open-r$r.json")
	[ "$(jq .errors "$tmp/mixed-open-r$r.json")" = 0 ] || note[open-p99,$r]="!"
	printf '  %-12s %8s ms      open loop at %s\n' open-p99 "${p99[$r]}" "${openinfo[$r]}"
done

# --- summary ---------------------------------------------------------------
echo
echo "2xx responses per second (! = non-2xx responses or socket errors; * = an election during the run)"
printf '| %-5s |' round
for row in "${rows[@]}" mixed-peak; do printf ' %12s |' "$row"; done
printf ' %12s |\n' "open p99 ms"
sum() { # row → sum over rounds
	local s=0 r
	for r in $(seq "$rounds"); do s=$((s + ${rps[$1,$r]})); done
	echo "$s"
}
for r in $(seq "$rounds"); do
	printf '| %-5s |' "$r"
	for row in "${rows[@]}"; do printf ' %12s |' "${rps[$row,$r]}${note[$row,$r]:-}"; done
	printf ' %12s | %12s |\n' "${peak[$r]}${note[mixed-peak,$r]:-}" "${p99[$r]}${note[open-p99,$r]:-}"
done
printf '| %-5s |' sum
for row in "${rows[@]}"; do printf ' %12s |' "$(sum "$row")"; done
printf ' %12s | %12s |\n' "$(IFS=+; echo $(( ${peak[*]} )))" ""
echo
echo "server CPU per 2xx write, us (user and system time of the row's three servers over its runs, background work included)"
printf '| %-5s |' round
for row in "${rows[@]}"; do printf ' %12s |' "$row"; done
echo
cpu_sum() { # row → us per write over every round
	local t=0 n=0 r
	for r in $(seq "$rounds"); do t=$((t + ${ticks[$1,$r]:-0})) n=$((n + ${oks[$1,$r]:-0})); done
	us_per "$t" "$n"
}
for r in $(seq "$rounds"); do
	printf '| %-5s |' "$r"
	for row in "${rows[@]}"; do printf ' %12s |' "$(us_per "${ticks[$row,$r]:-0}" "${oks[$row,$r]:-0}")"; done
	echo
done
printf '| %-5s |' all
for row in "${rows[@]}"; do printf ' %12s |' "$(cpu_sum "$row")"; done
echo
echo

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "n/a"}'; }
rr=$(ratio "$(sum lk-rr)" "$(sum etcd-rr)")
fl=$(ratio "$(sum lk-follower)" "$(sum lk-leader)")
worst=$(printf '%s\n' "${p99[@]}" | sort -g | tail -n 1)
verdict() { awk -v v="$1" -v t="$2" -v op="$3" 'BEGIN {if (v == "n/a") print "n/a"; else if ((op == ">=" && v >= t) || (op == "<=" && v <= t)) print "met"; else print "MISSED"}'; }
echo "round-robin creates / etcd round-robin puts: $rr (target >= 3: $(verdict "$rr" 3 '>='))"
echo "  per round: $(for r in $(seq "$rounds"); do printf '%s ' "$(ratio "${rps[lk-rr,$r]}" "${rps[etcd-rr,$r]}")"; done)"
echo "  for reference, linkraft leader-only / etcd leader-only: $(ratio "$(sum lk-leader)" "$(sum etcd-leader)")"
echo "follower creates / leader creates: $fl (target >= 0.8: $(verdict "$fl" 0.8 '>='))"
echo "  per round: $(for r in $(seq "$rounds"); do printf '%s ' "$(ratio "${rps[lk-follower,$r]}" "${rps[lk-leader,$r]}")"; done)"
echo "open-loop mixed p99 at half the closed-loop peak: worst round $worst ms (target <= 20 ms: $(verdict "$worst" 20 '<='))"
echo "  per round (all / creates): $(for r in $(seq "$rounds"); do printf '%s / %s ms; ' "${p99[$r]}" "${p99create[$r]}"; done)"
flagged=0
for r in $(seq "$rounds"); do
	for row in "${rows[@]}"; do
		[ -n "${note[$row,$r]:-}" ] && { [ "$flagged" = 1 ] || echo "flagged runs:"; flagged=1; echo "  round $r $row: ${detail[$row,$r]}"; }
	done
	[ -n "${note[open-p99,$r]:-}${note[mixed-peak,$r]:-}" ] && { [ "$flagged" = 1 ] || echo "flagged runs:"; flagged=1; echo "  round $r mixed: open loop ${openinfo[$r]}"; }
done
[ "$flagged" = 1 ] || echo "no run had a non-2xx response, a socket error or an election"

#!/usr/bin/env bash
# Read replicas against voters: five linkraft nodes on loopback, in two
# configurations, measured in the same session:
#   5 voters      five voters (--bootstrap-expect 5): a create needs 3 of 5
#   3v + 2r       three voters (--bootstrap-expect 3) and two read replicas
#                 (--read-replica, Raft non-voters): a create needs 2 of 3
# Every round starts each configuration fresh (new data dirs, same ports),
# waits until all five nodes are ready — /health 200 on all five, all naming
# the same leader, and GET /admin/cluster listing the expected voters and
# non-voters — then runs, against the five HTTP addresses round-robin
# (connection i stays on node i mod 5, as clients behind round-robin DNS):
#   redirect  linkraft bench --scenario redirect: 1000 seeded links
#             (kept after the run: the cluster is thrown away), redirects
#             answered from each node's own state
#   create    linkraft bench --scenario create: closed-loop creates, relayed
#             to the leader by the four other nodes
# both with -c 64, the given seconds after a 2 s warm-up, and records
# successful requests per second, p50/p99 latency and errors (non-2xx/3xx
# answers and transport errors) from "linkraft bench --json", and, for the
# creates, each node's own mean time to answer them from its /metrics
# (linkraft_http_request_duration_seconds, route "create"; a follower or
# replica relays to the leader and waits until it has applied the entry
# itself), summed up for the follower voters and for the replicas. Then it
# stops the five nodes and runs the other configuration. The order of the two
# configurations alternates between rounds (odd rounds start with 5 voters,
# even rounds with 3v + 2r), so a drift in the machine's load does not
# favour one of them. At the end: a table per configuration with every
# round and the median of each column.
#
# The nodes run with --create-rate 0, one cluster key (Raft over mutual
# TLS, as always) and fsync on every Raft append; they share the machine's
# cores with each other and with the load generator, so on one machine the
# numbers measure CPU contention as much as the quorum: compare the two
# configurations round by round, not with other machines.
#
# Credentials: the nodes get a random --admin-token (the admin credential),
# used only for the admin calls (POST /admin/keys, GET /admin/cluster).
# With it the script makes, in each fresh cluster, one API key with
# links:write on workspace "bench", which the readiness probes and
# "linkraft bench" (through LINKRAFT_KEY: its seeds and creates) carry;
# redirects carry none, as browsers send none.
#
# Needs curl and jq. Usage: bench/replicas.sh [seconds per run] [rounds]
# (defaults 10 and 3; LINKRAFT_BIN a prebuilt binary instead of building
# ./cmd/linkraft). Only 127.0.0.1 is used; every process it starts is
# stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${2:-3}
usage="usage: bench/replicas.sh [seconds per run (10)] [rounds (3)]"
[[ $secs =~ ^[1-9][0-9]*$ && $rounds =~ ^[1-9][0-9]*$ ]] || { echo "$usage" >&2; exit 2; }
conns=64
warmup=2

die() { echo "bench/replicas.sh: $*" >&2; exit 1; }
for c in curl jq awk; do
	command -v "$c" >/dev/null || die "$c is needed (Debian: apt-get install -y $c)"
done

# Ports (127.0.0.1 only): HTTP 2868i, Raft 2869i, gossip 2867i, i = 1..5.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
http=() seeds=()
for i in 1 2 3 4 5; do
	for p in "2868$i" "2869$i" "2867$i"; do
		port_busy "$p" && die "port 127.0.0.1:$p is in use; stop what listens there first"
	done
	http+=("127.0.0.1:2868$i")
	seeds+=("127.0.0.1:2867$i")
done
targets=$(IFS=,; echo "${http[*]}")

tmp=$(mktemp -d)
pids=()      # the running configuration's nodes
benchpid=""  # the running linkraft bench (through timeout)
# stop_nodes stops the running configuration: SIGTERM, up to 10 s for a
# clean stop, then SIGKILL.
stop_nodes() {
	[ ${#pids[@]} -gt 0 ] || return 0
	kill "${pids[@]}" 2>/dev/null || true
	local alive p
	for _ in $(seq 100); do
		alive=0
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ "$alive" = 0 ] && break
		sleep 0.1
	done
	kill -9 "${pids[@]}" 2>/dev/null || true
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
cleanup() {
	trap - EXIT INT TERM
	if [ -n "$benchpid" ]; then
		kill "$benchpid" 2>/dev/null || true
		wait "$benchpid" 2>/dev/null || true
	fi
	stop_nodes
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
token=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
apikey=""

configs=(voters5 replicas)
declare -A label=([voters5]="5 voters" [replicas]="3v + 2r")

# start_config starts the five nodes of a configuration with new data dirs.
start_config() { # config, round
	local cfg=$1 r=$2 i join extra
	voters=5
	[ "$cfg" = replicas ] && voters=3
	join=$(IFS=,; echo "${seeds[*]:0:$voters}")
	dir=$tmp/$cfg-r$r
	mkdir -p "$dir"
	for i in 1 2 3 4 5; do
		extra=()
		((i > voters)) && extra=(--read-replica)
		LINKRAFT_CLUSTER_KEY=$key "$bin" serve --id "n$i" --data-dir "$dir/n$i" --http-addr "${http[$((i - 1))]}" \
			--raft-addr "127.0.0.1:2869$i" --gossip-addr "127.0.0.1:2867$i" \
			--join "$join" --bootstrap-expect "$voters" --admin-token "$token" --create-rate 0 \
			--log-level warn "${extra[@]}" 2>>"$dir/n$i.log" &
		pids+=($!)
	done
}

admin_cluster() { curl -s -m 2 -H "Authorization: Bearer $token" "http://${http[$1]}/admin/cluster" || true; }
# leader prints the index (0-4) of the node all five name as leader when all
# five answer /health with 200, or nothing.
leader() {
	local i resp l n id="" ids=()
	for i in 0 1 2 3 4; do
		resp=$(curl -s -m 2 -w '\n%{http_code}' "http://${http[$i]}/health" || true)
		[ "${resp##*$'\n'}" = 200 ] || return 0
		read -r l n < <(jq -r '"\(.leader // "") \(.node_id // "")"' <<<"${resp%$'\n'*}" 2>/dev/null || true) || true
		[ -n "$l" ] || return 0
		[ -z "$id" ] || [ "$id" = "$l" ] || return 0
		id=$l
		ids+=("$n")
	done
	for i in 0 1 2 3 4; do
		[ "${ids[$i]}" = "$id" ] && { echo "$i"; return 0; }
	done
	return 0
}
# membership prints "voters nonvoters" from the leader's /admin/cluster,
# counting only servers it reports reachable.
membership() { # leader index
	admin_cluster "$1" | jq -r '[.servers[] | select(.reachable)] |
		"\([.[] | select(.suffrage == "Voter")] | length) \([.[] | select(.suffrage == "Nonvoter")] | length)"' 2>/dev/null || true
}
term() { admin_cluster "$1" | jq -r '.term // empty' 2>/dev/null || true; }
make_key() { # node index → the secret of a new API key, or nothing
	curl -s -m 10 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
		-d '{"name":"bench/replicas.sh","scopes":["links:write"],"workspaces":["bench"]}' \
		"http://${http[$1]}/admin/keys" | jq -r '.key // empty' 2>/dev/null || true
}
create() { # node index → HTTP status of a create with the API key
	curl -s -o /dev/null -w '%{http_code}' -m 10 -H 'Content-Type: application/json' \
		-H "Authorization: Bearer $apikey" \
		-d "{\"url\":\"https://example.com/probe/$RANDOM$RANDOM\"}" "http://${http[$1]}/api/v1/urls" || true
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# ready waits (up to 60 s) until the configuration serves: all five healthy
# on one leader, the expected membership, an API key made, and a create
# with it taken by every node. It sets lead.
ready() { # config
	local want="5 0" got="" i ok t0
	[ "$1" = replicas ] && want="3 2"
	t0=$(now)
	lead=""
	for _ in $(seq 600); do
		lead=$(leader)
		if [ -n "$lead" ]; then
			got=$(membership "$lead")
			[ "$got" = "$want" ] && break
		fi
		lead=""
		sleep 0.1
	done
	[ -n "$lead" ] || { tail -n 5 "$dir"/n*.log >&2; die "${label[$1]}: not ready in 60 s (want voters/non-voters $want, last seen '${got:-no leader}')"; }
	apikey=""
	for _ in $(seq 100); do
		apikey=$(make_key "$lead")
		[ -n "$apikey" ] && break
		sleep 0.1
	done
	[ -n "$apikey" ] || die "${label[$1]}: the leader n$((lead + 1)) made no API key in 10 s"
	for i in 0 1 2 3 4; do
		ok=""
		for _ in $(seq 100); do [ "$(create "$i")" = 201 ] && { ok=1; break; }; sleep 0.1; done
		[ -n "$ok" ] || die "${label[$1]}: node n$((i + 1)) did not take a create with the API key in 10 s (last status $(create "$i"))"
	done
	echo "  ${label[$1]}: ready $(since "$t0") s after start; leader n$((lead + 1)), term $(term "$lead"), voters/non-voters $got"
}

declare -A rps p50 p99 errs note detail fmean rmean batch

# create_totals prints, per node: the sum (s) and count of its create
# route's latency histogram (the time the node took to answer the creates
# its own clients sent it, relaying included), then the sum and count of
# linkraft_create_batch_size (creates per Raft entry it proposed as leader).
create_totals() {
	local i
	for i in 0 1 2 3 4; do
		curl -s -m 5 "http://${http[$i]}/metrics" | awk '
			/^linkraft_http_request_duration_seconds_sum\{/ && /route="create"/ {s += $NF}
			/^linkraft_http_request_duration_seconds_count\{/ && /route="create"/ {c += $NF}
			/^linkraft_create_batch_size_sum/ {bs += $NF}
			/^linkraft_create_batch_size_count/ {bc += $NF}
			END {printf "%s %d %d %d\n", s + 0, c, bs, bc}' || echo "0 0 0 0"
	done
}
# server_means reads two create_totals and prints, tab-separated: per node,
# the mean create time in ms between them; the follower voters' and the
# replicas' mean (over their creates together); the leader's creates per
# Raft entry. The leader's own create count also holds the creates the
# others relay to it, so its mean is shown, not grouped.
server_means() { # before, after
	awk -v lead="$lead" -v voters="$voters" '
		NR == FNR {s0[FNR] = $1; c0[FNR] = $2; b0[FNR] = $3; e0[FNR] = $4; next}
		{
			i = FNR - 1; ds = $1 - s0[FNR]; dc = $2 - c0[FNR]
			m = dc > 0 ? sprintf("%.1f", 1000 * ds / dc) : "-"
			role = i == lead ? "L" : (i < voters ? "f" : "r")
			line = line sprintf("%sn%d(%s) %s", (i ? " " : ""), i + 1, role, m)
			if (role == "f") {fs += ds; fc += dc}
			if (role == "r") {rs += ds; rc += dc}
			if (role == "L") {bs = $3 - b0[FNR]; be = $4 - e0[FNR]}
		}
		END {
			printf "%s\t%s\t%s\t%s\n", line, (fc > 0 ? sprintf("%.1f", 1000 * fs / fc) : "-"),
				(rc > 0 ? sprintf("%.1f", 1000 * rs / rc) : "-"), (be > 0 ? sprintf("%.1f", bs / be) : "-")
		}' <(echo "$1") <(echo "$2")
}

# run_bench runs one linkraft bench and records its numbers.
run_bench() { # config, round, scenario
	local cfg=$1 r=$2 sc=$3 out log t0 t1 l1 k before after means fm rm bt
	out=$tmp/$cfg-r$r-$sc.json
	log=$tmp/$cfg-r$r-$sc.log
	t0=$(term "$lead")
	before=$(create_totals)
	LINKRAFT_KEY=$apikey timeout $((secs + warmup + 120)) "$bin" bench --targets "$targets" \
		--scenario "$sc" -c "$conns" --duration "${secs}s" --warmup "${warmup}s" --keep-seeds \
		--json >"$out" 2>"$log" &
	benchpid=$!
	wait "$benchpid" || { cat "$log" >&2; tail -n 5 "$dir"/n*.log >&2; die "${label[$cfg]} round $r: linkraft bench --scenario $sc failed"; }
	benchpid=""
	after=$(create_totals)
	k="$cfg,$r,$sc"
	rps[$k]=$(jq -r '(.success / (if .elapsed_s > 0 then .elapsed_s else 1 end)) | floor' "$out")
	p50[$k]=$(jq -r '.latency_ms.p50' "$out")
	p99[$k]=$(jq -r '.latency_ms.p99' "$out")
	errs[$k]=$(jq -r '.errors' "$out")
	detail[$k]=$(jq -r '"errors \(.errors) \(.errors_by_status) transport \(.transport_errors); p99.9 \(.latency_ms.p99_9) ms, max \(.latency_ms.max) ms; sent per node " + ([.sent[].run | add // 0] | map(tostring) | join("/"))' "$out")
	if [ "$sc" = create ]; then
		IFS=$'\t' read -r means fm rm bt <<<"$(server_means "$before" "$after")"
		# shellcheck disable=SC2034 # batch is read through col's nameref
		fmean[$k]=$fm rmean[$k]=$rm batch[$k]=$bt
		detail[$k]+="; server-side mean create ms (warm-up included; L leader, f follower, r replica): $means; creates per Raft entry at the leader $bt"
	fi
	note[$k]=""
	[ "${errs[$k]}" = 0 ] || note[$k]="!"
	# An election during the run makes it a different measurement: flag it.
	# Right after a run a node can be slow to answer: up to 5 s.
	l1=""
	for _ in $(seq 50); do l1=$(leader); [ -n "$l1" ] && break; sleep 0.1; done
	t1=$(term "${l1:-$lead}")
	if [ "$l1" != "$lead" ] || [ "$t1" != "$t0" ]; then
		note[$k]+="*"
		detail[$k]+="; election: leader n$((lead + 1)) -> $([ -n "$l1" ] && echo "n$((l1 + 1))" || echo none), term $t0 -> $t1"
		[ -z "$l1" ] || lead=$l1
	fi
	printf '  %-8s %-8s %8s req/s   p50 %6s ms   p99 %7s ms   %s\n' "${label[$cfg]}" "$sc" "${rps[$k]}" "${p50[$k]}" "${p99[$k]}" "${detail[$k]}"
}

port_free() { # waits up to 10 s until no node port answers
	local i busy
	for _ in $(seq 100); do
		busy=0
		for i in 1 2 3 4 5; do port_busy "2868$i" && busy=1; port_busy "2869$i" && busy=1; done
		[ "$busy" = 0 ] && return 0
		sleep 0.1
	done
	die "the previous configuration's ports are still in use after 10 s"
}

echo "machine: $(nproc) cores ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)), $(uname -m), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(date -u '+%F %T UTC')"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "data dirs: $tmp ($(df -T "$tmp" | awk 'NR==2 {print $2}')); loopback only; nodes and load generator share the cores"
echo "versions: $("$bin" version 2>&1 | awk 'NR==1') (tree $(git describe --always --dirty 2>/dev/null || echo unknown)); $(go version 2>/dev/null | awk '{print $3}')"
echo "each run: linkraft bench --targets <5 nodes> -c $conns --duration ${secs}s --warmup ${warmup}s --keep-seeds, scenarios redirect then create"
echo

for r in $(seq "$rounds"); do
	order=("${configs[@]}")
	((r % 2 == 0)) && order=("${configs[1]}" "${configs[0]}")
	echo "round $r"
	for cfg in "${order[@]}"; do
		port_free
		start_config "$cfg" "$r"
		ready "$cfg"
		run_bench "$cfg" "$r" redirect
		run_bench "$cfg" "$r" create
		stop_nodes
		# What the nodes logged at warn or above, by message. A fresh
		# cluster always logs some: replicas find no peers to elect, new
		# followers are sent the log from the start, connections break at
		# the stop. An election ("heartbeat timeout reached") is worth a look.
		warns=$(cat "$dir"/n*.log | wc -l)
		if [ "$warns" != 0 ]; then
			echo "  ${label[$cfg]}: the nodes logged $warns lines at warn or above: $(sed -n 's/.* msg="\([^"]*\)".*/\1/p' "$dir"/n*.log |
				sort | uniq -c | sort -rn | awk '{n = $1; $1 = ""; printf "%s%s (%d)", (NR > 1 ? "; " : ""), substr($0, 2), n}')"
		fi
		rm -rf "$dir"
	done
done

# --- summary ---------------------------------------------------------------
# median of the numbers on stdin ("-" lines skipped; "-" when none).
median() { grep -v '^-$' | sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else {m = sprintf("%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2); sub(/\.?0+$/, "", m); print m}}'; }
total() { awk '{s += $1} END {print s + 0}'; }
col() { # array name, config, scenario → the round values, one per line
	local -n a=$1
	local r
	for r in $(seq "$rounds"); do echo "${a[$2,$r,$3]}"; done
}
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "successful requests per second, latency in ms over the measured ${secs} s (! = errors; * = an election during the run);"
echo "first = which configuration ran first in the round; create ms at followers / replicas = the server-side mean time"
echo "of the creates sent to follower voters / to replicas (from their /metrics, warm-up included; relaying and"
echo "waiting to apply the leader's answer locally included)"
for cfg in "${configs[@]}"; do
	echo
	echo "${label[$cfg]}"
	echo "| round | first | redirects req/s | redirect p50 / p99 ms | redirect errors | creates req/s | create p50 / p99 ms | create errors | create ms at followers / replicas |"
	echo "|---|---|---|---|---|---|---|---|---|"
	for r in $(seq "$rounds"); do
		first=no
		{ ((r % 2 == 1)) && [ "$cfg" = "${configs[0]}" ]; } || { ((r % 2 == 0)) && [ "$cfg" = "${configs[1]}" ]; } && first=yes
		echo "| $r | $first | ${rps[$cfg,$r,redirect]}${note[$cfg,$r,redirect]} | ${p50[$cfg,$r,redirect]} / ${p99[$cfg,$r,redirect]} | ${errs[$cfg,$r,redirect]} | ${rps[$cfg,$r,create]}${note[$cfg,$r,create]} | ${p50[$cfg,$r,create]} / ${p99[$cfg,$r,create]} | ${errs[$cfg,$r,create]} | ${fmean[$cfg,$r,create]} / ${rmean[$cfg,$r,create]} |"
	done
	echo "| median | | $(col rps "$cfg" redirect | median) | $(col p50 "$cfg" redirect | median) / $(col p99 "$cfg" redirect | median) | $(col errs "$cfg" redirect | total) in all | $(col rps "$cfg" create | median) | $(col p50 "$cfg" create | median) / $(col p99 "$cfg" create | median) | $(col errs "$cfg" create | total) in all | $(col fmean "$cfg" create | median) / $(col rmean "$cfg" create | median) |"
done
echo
for cfg in "${configs[@]}"; do
	echo "${label[$cfg]}: creates per Raft entry at the leader, by round: $(col batch "$cfg" create | tr '\n' ' ')(median $(col batch "$cfg" create | median))"
done
echo "3v + 2r / 5 voters, round by round (medians of the ratios):"
for sc in redirect create; do
	ratios=$(for r in $(seq "$rounds"); do awk -v a="${rps[replicas,$r,$sc]}" -v b="${rps[voters5,$r,$sc]}" 'BEGIN {if (b > 0) printf "%.2f\n", a / b; else print "nan"}'; done)
	echo "  $sc req/s: $(tr '\n' ' ' <<<"$ratios")(median $(median <<<"$ratios"))"
done
flagged=0
for r in $(seq "$rounds"); do
	for cfg in "${configs[@]}"; do
		for sc in redirect create; do
			[ -n "${note[$cfg,$r,$sc]}" ] && { [ "$flagged" = 1 ] || echo "flagged runs:"; flagged=1; echo "  round $r ${label[$cfg]} $sc: ${detail[$cfg,$r,$sc]}"; }
		done
	done
done
[ "$flagged" = 1 ] || echo "no run had an error or an election"

#!/usr/bin/env bash
# Write availability after kill -9 of the leader: start three nodes on
# 127.0.0.1, kill the leader, and time until a create through a survivor
# answers 201. Repeats RUNS times (default 5) and prints the median.
# Usage: bench/failover.sh [runs]. Loopback only; every loop is bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
tmp=$(mktemp -d)
pids=()
# stop_all kills every node and waits (bounded) until their ports are free.
stop_all() {
	kill -9 "${pids[@]}" 2>/dev/null || true
	for _ in $(seq 50); do
		alive=0
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ "$alive" = 0 ] && break
		sleep 0.1
	done
	pids=()
}
cleanup() { stop_all; rm -rf "$tmp"; }
trap cleanup EXIT
go build -o "$tmp/linkraft" ./cmd/linkraft
key=$("$tmp/linkraft" keygen)

start() { # node number
	"$tmp/linkraft" serve --id "n$1" --data-dir "$tmp/run$run/n$1" --http-addr "127.0.0.1:1808$1" \
		--raft-addr "127.0.0.1:1809$1" --gossip-addr "127.0.0.1:1807$1" --cluster-key "$key" \
		--join 127.0.0.1:18071,127.0.0.1:18072,127.0.0.1:18073 --bootstrap-expect 3 \
		--create-rate 0 --log-level error 2>>"$tmp/run$run.log" &
	pids[$1]=$!
	disown "$!"
}
create() { # node number → HTTP status
	curl -s -o /dev/null -w '%{http_code}' -m 10 -d "url=https://example.com/$RANDOM" "127.0.0.1:1808$1/shorten"
}

times=()
for run in $(seq "$runs"); do
	for i in 1 2 3; do start "$i"; done
	leader=""
	for _ in $(seq 100); do
		leader=$(curl -s -m 1 127.0.0.1:18081/health | sed -n 's/.*"leader":"n\([0-9]\)".*/\1/p')
		[ -n "$leader" ] && [ "$(create 1)" = 201 ] && break
		sleep 0.1
	done
	[ -n "$leader" ] || { echo "run $run: no leader"; exit 1; }
	survivor=$((leader % 3 + 1))
	kill -9 "${pids[$leader]}"
	t0=$(date +%s.%N)
	ok=""
	for _ in $(seq 300); do
		[ "$(create "$survivor")" = 201 ] && { ok=1; break; }
		sleep 0.02
	done
	t=$(echo "$(date +%s.%N) - $t0" | bc)
	[ -n "$ok" ] || t="timeout"
	echo "run $run: killed leader n$leader, first 201 via n$survivor after ${t}s"
	times+=("$t")
	stop_all
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print "median: " a[int((NR+1)/2)] "s over " NR " runs"}'

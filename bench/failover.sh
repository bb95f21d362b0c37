#!/usr/bin/env bash
# Write availability after kill -9 of the leader: start three nodes on
# 127.0.0.1, kill the leader, and time until a create through a survivor
# answers 201. Repeats RUNS times (default 5) and prints the median.
# Usage: bench/failover.sh [runs]. Loopback only; every loop is bounded.
# Credentials: the nodes get a random --admin-token; each run uses it once
# to make an API key with links:write (POST /admin/keys), and every create,
# the timed ones included, carries that key, as a client's would. Before the
# kill the survivor must have taken a create with the key, so the time
# measured is the failover's, not the key's replication.
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
token=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
apikey=""

start() { # node number
	LINKRAFT_CLUSTER_KEY=$key "$tmp/linkraft" serve --id "n$1" --data-dir "$tmp/run$run/n$1" --http-addr "127.0.0.1:1808$1" \
		--raft-addr "127.0.0.1:1809$1" --gossip-addr "127.0.0.1:1807$1" \
		--join 127.0.0.1:18071,127.0.0.1:18072,127.0.0.1:18073 --bootstrap-expect 3 \
		--admin-token "$token" --create-rate 0 --log-level error 2>>"$tmp/run$run.log" &
	pids[$1]=$!
	disown "$!"
}
create() { # node number → HTTP status of a create with the API key
	curl -s -o /dev/null -w '%{http_code}' -m 10 -H "Authorization: Bearer $apikey" \
		-d "url=https://example.com/$RANDOM" "127.0.0.1:1808$1/shorten"
}
make_key() { # node number → the secret of a new API key with links:write
	curl -s -m 10 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
		-d '{"name":"bench/failover.sh","scopes":["links:write"],"workspaces":["default"]}' \
		"127.0.0.1:1808$1/admin/keys" | sed -n 's/.*"key":"\([^"]*\)".*/\1/p'
}

times=()
for run in $(seq "$runs"); do
	for i in 1 2 3; do start "$i"; done
	leader="" apikey=""
	for _ in $(seq 100); do
		# || true: under set -e -o pipefail a node not yet listening
		# (curl exit 7) would end the script without a word.
		leader=$(curl -s -m 1 127.0.0.1:18081/health | sed -n 's/.*"leader":"n\([0-9]\)".*/\1/p' || true)
		[ -n "$leader" ] && apikey=$(make_key 1) && [ -n "$apikey" ] && [ "$(create 1)" = 201 ] && break
		leader=""
		sleep 0.1
	done
	[ -n "$leader" ] || { echo "run $run: no leader (or no API key)"; exit 1; }
	survivor=$((leader % 3 + 1))
	ready=""
	for _ in $(seq 100); do [ "$(create "$survivor")" = 201 ] && { ready=1; break; }; sleep 0.1; done
	[ -n "$ready" ] || { echo "run $run: n$survivor took no create with the API key"; exit 1; }
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

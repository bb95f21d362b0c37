# Sourced by the scripts that run linkraft nodes on 127.0.0.1 and import
# links into them (scale.sh, import-forward.sh), from the repository's
# root, once $links is set. It makes a temporary directory (removed on
# exit, after every node started with start is stopped), a random admin
# token ($token, and $auth to send it), one cluster key for every node
# ($key, given in LINKRAFT_CLUSTER_KEY), the binary ($bin: LINKRAFT_BIN, or
# built from ./cmd/linkraft), $tmp/links.jsonl with $links links of
# ~110-byte URLs and distinct 8-character custom codes ($last is the last
# code), and the helpers below. Every wait is bounded: the helpers' curl
# calls give up after 5 s, wait_for after its steps, stop after its
# seconds (then SIGKILL).
# shellcheck shell=bash disable=SC2034,SC2154
tmp=$(mktemp -d)
pids=() # nodes started and not stopped yet
cleanup() {
	[ ${#pids[@]} = 0 ] || kill -TERM "${pids[@]}" 2>/dev/null || true
	local p
	for p in "${pids[@]}"; do stop "$p" 30; done
	rm -rf "$tmp"
}
trap cleanup EXIT

token=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
auth="Authorization: Bearer $token"
bin=${LINKRAFT_BIN:-$tmp/linkraft}
[ -n "${LINKRAFT_BIN:-}" ] || go build -o "$bin" ./cmd/linkraft
key=$("$bin" keygen)

awk -v n="$links" 'BEGIN {
	for (i = 0; i < n; i++)
		printf "{\"short_code\":\"k%07d\",\"original_url\":\"https://www.example-shop.com/catalogue/category-%03d/products/item-%08d?utm_medium=email&utm_source=newsletter\",\"workspace\":\"default\"}\n", i, i % 1000, i
}' >"$tmp/links.jsonl"
last=$(printf 'k%07d' $((links - 1)))

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
# RSS, and its anonymous part (the process's own memory) and file part
# (mapped files: the binary and raft.db pages bbolt touched, which the
# kernel can drop and read again), and the highest RSS so far.
rss_mb() {
	awk '/^VmRSS/ { r = $2 } /^RssAnon/ { a = $2 } /^RssFile/ { f = $2 } /^VmHWM/ { p = $2 }
		END { printf "%.0f MB (anonymous %.0f, files %.0f; peak %.0f)", r / 1024, a / 1024, f / 1024, p / 1024 }' "/proc/$1/status"
}
metric() { curl -sf -m 5 "http://$1/metrics" | awk -v m="$2" '$1 == m { printf "%.0f", $2 }'; }
heap_mb() { metric "$1" go_memstats_heap_inuse_bytes | awk '{ printf "%.0f", $1 / 1048576 }'; }

start() { # id, http port, raft port, gossip port, extra flags...
	local id=$1 http=$2 raft=$3 gossip=$4
	shift 4
	LINKRAFT_CLUSTER_KEY=$key "$bin" serve --id "$id" --data-dir "$tmp/$id" --http-addr "127.0.0.1:$http" \
		--raft-addr "127.0.0.1:$raft" --gossip-addr "127.0.0.1:$gossip" --admin-token "$token" --create-rate 0 \
		--log-level warn "$@" 2>>"$tmp/$id.log" &
	pid=$!
	pids+=("$pid")
}
running() { [ -e "/proc/$1" ] && [ "$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" != Z ]; }
# stop: SIGTERM, and SIGKILL if the node has not exited within the seconds
# given (a node that hangs on shutdown must not hang the script); it is
# then reaped and no longer one of $pids.
stop() { # pid, seconds
	local pid=$1 steps=$(($2 * 20)) p rest=()
	kill -TERM "$pid" 2>/dev/null || true
	while [ "$steps" -gt 0 ] && running "$pid"; do sleep 0.05; steps=$((steps - 1)); done
	if running "$pid"; then
		echo "bench/$(basename "$0"): pid $pid still running $2 s after SIGTERM: killed" >&2
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
	for p in "${pids[@]}"; do [ "$p" = "$pid" ] || rest+=("$p"); done
	pids=("${rest[@]}")
}
wait_for() { # description, timeout in 0.05 s steps, command...
	local what=$1 steps=$2
	shift 2
	for _ in $(seq "$steps"); do "$@" && return 0; sleep 0.05; done
	echo "bench/$(basename "$0"): timed out waiting for $what; the nodes' logs end:" >&2
	tail -n 5 "$tmp"/*.log >&2
	exit 1
}
healthy() { curl -sf -m 5 "http://$1/health" >/dev/null; }
listening() { [ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://$1/health")" != 000 ]; }
serves() { [ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://$1/$last")" = 302 ]; }
holds_all() { [ "$(metric "$1" linkraft_links)" = "$links" ]; }
voter() { # id, address of a node to ask: whether GET /admin/cluster lists id as a voter
	curl -sf -m 5 -H "$auth" "http://$2/admin/cluster" | grep -q "\"id\":\"$1\",[^}]*\"suffrage\":\"Voter\""
}


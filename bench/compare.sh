#!/usr/bin/env bash
# Compare one linkraft node against its peers with the same load tool in the
# same run (ratios survive a noisy machine; absolutes do not):
#   - redirects vs bench/baseline, a bare fasthttp 302 from a map (the ceiling);
#   - creates and redirects vs bench/peers/flask_sqlite.py under gunicorn.
#
# Credentials: the node gets a random --admin-token, used once, to make an
# API key with links:write (workspace "default") through POST /admin/keys.
# "linkraft create" carries that key (LINKRAFT_KEY, which bench/wrk/create.lua
# sends as "Authorization: Bearer"); redirects carry none. The node also runs
# with --public-create, so "linkraft create (no key)" measures the same
# creates without a credential in the same run: their ratio is what a key
# costs. The flask peer gets the same header (it ignores it), so both
# servers read requests of the same size.
# Needs wrk (and gunicorn + python3-flask for the peer), all from Debian:
#   apt-get install wrk gunicorn python3-flask
# Usage: bench/compare.sh [seconds per run] [rounds]. Only 127.0.0.1 is loaded.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${2:-3}
tmp=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

go build -o "$tmp/linkraft" ./cmd/linkraft
go build -o "$tmp/baseline" ./bench/baseline

token=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
"$tmp/baseline" -addr 127.0.0.1:19090 & pids+=($!)
"$tmp/linkraft" serve --id bench --data-dir "$tmp/data" --http-addr 127.0.0.1:19080 \
	--raft-addr 127.0.0.1:19081 --admin-token "$token" --public-create \
	--create-rate 0 --log-level warn 2>"$tmp/linkraft.log" & pids+=($!)
peer=""
if command -v gunicorn >/dev/null; then
	PEER_DB="$tmp/peer.sqlite" gunicorn -w 4 -b 127.0.0.1:19280 --chdir bench/peers flask_sqlite:app \
		>"$tmp/peer.log" 2>&1 & pids+=($!)
	peer=http://127.0.0.1:19280
fi
# The API key the creates carry: made as soon as the node takes writes.
key=""
for _ in $(seq 100); do
	key=$(curl -s -m 5 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
		-d '{"name":"bench/compare.sh","scopes":["links:write"],"workspaces":["default"]}' \
		http://127.0.0.1:19080/admin/keys | sed -n 's/.*"key":"\([^"]*\)".*/\1/p' || true)
	[ -n "$key" ] && break
	sleep 0.2
done
[ -n "$key" ] || { tail -n 20 "$tmp/linkraft.log" >&2; echo "bench/compare.sh: could not make an API key" >&2; exit 1; }
export LINKRAFT_KEY=$key
code=$(curl -sf -H "Authorization: Bearer $key" -d url=https://example.com/some/long/path?with=query \
	http://127.0.0.1:19080/shorten | sed 's/.*"short_code":"\([^"]*\)".*/\1/')
[ -n "$code" ] || { echo "bench/compare.sh: a create with the API key failed" >&2; exit 1; }
[ -n "$peer" ] && curl -sf -H 'Content-Type: application/json' -d '{"url":"https://example.com/x"}' "$peer/shorten" >/dev/null

# run prints wrk's rate and, when there were any, its count of responses
# that were neither 2xx nor 3xx (a 401 is fast but is not throughput).
run() { # label, wrk args...
	local label=$1; shift
	local out rps bad
	out=$(wrk -t2 -c64 -d"${secs}s" "$@")
	rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
	bad=$(awk '/Non-2xx or 3xx responses/ {print $NF}' <<<"$out")
	printf '%-28s %10s req/s%s\n' "$label" "$rps" "${bad:+   ! $bad non-2xx/3xx responses}"
	[ "$label" = "linkraft create" ] && with_key+=("$rps")
	[ "$label" = "linkraft create (no key)" ] && without_key+=("$rps")
	return 0
}
with_key=() without_key=()
echo "machine: $(nproc) cores, $(uname -m), $(date -u +%F)"
for r in $(seq "$rounds"); do
	echo "round $r"
	run "baseline redirect" http://127.0.0.1:19090/abc1234
	run "linkraft redirect" "http://127.0.0.1:19080/$code"
	run "linkraft create" -s bench/wrk/create.lua http://127.0.0.1:19080
	LINKRAFT_KEY= run "linkraft create (no key)" -s bench/wrk/create.lua http://127.0.0.1:19080
	if [ -n "$peer" ]; then
		run "flask+sqlite redirect" "$peer/1"
		run "flask+sqlite create" -s bench/wrk/create.lua "$peer"
	fi
done
sumof() { awk '{ for (i = 1; i <= NF; i++) s += $i } END { printf "%.0f", s }' <<<"$*"; }
awk -v a="$(sumof "${with_key[@]}")" -v b="$(sumof "${without_key[@]}")" \
	'BEGIN { if (b > 0) printf "linkraft creates with a key / without: %.3f (sums over the rounds)\n", a / b }'

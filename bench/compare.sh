#!/usr/bin/env bash
# Compare one linkraft node against its peers with the same load tool in the
# same run (ratios survive a noisy machine; absolutes do not):
#   - redirects vs bench/baseline, a bare fasthttp 302 from a map (the ceiling);
#   - creates and redirects vs bench/peers/flask_sqlite.py under gunicorn.
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

"$tmp/baseline" -addr 127.0.0.1:19090 & pids+=($!)
"$tmp/linkraft" serve --id bench --data-dir "$tmp/data" --http-addr 127.0.0.1:19080 \
	--raft-addr 127.0.0.1:19081 --create-rate 0 --log-level warn 2>"$tmp/linkraft.log" & pids+=($!)
peer=""
if command -v gunicorn >/dev/null; then
	PEER_DB="$tmp/peer.sqlite" gunicorn -w 4 -b 127.0.0.1:19280 --chdir bench/peers flask_sqlite:app \
		>"$tmp/peer.log" 2>&1 & pids+=($!)
	peer=http://127.0.0.1:19280
fi
for _ in $(seq 50); do curl -sf http://127.0.0.1:19080/health >/dev/null && break; sleep 0.2; done
code=$(curl -sf -d url=https://example.com/some/long/path?with=query http://127.0.0.1:19080/shorten |
	sed 's/.*"short_code":"\([^"]*\)".*/\1/')
[ -n "$peer" ] && curl -sf -H 'Content-Type: application/json' -d '{"url":"https://example.com/x"}' "$peer/shorten" >/dev/null

run() { # label, wrk args...
	local label=$1; shift
	local rps
	rps=$(wrk -t2 -c64 -d"${secs}s" "$@" | awk '/Requests\/sec/ {print $2}')
	printf '%-28s %10s req/s\n' "$label" "$rps"
}
echo "machine: $(nproc) cores, $(uname -m), $(date -u +%F)"
for r in $(seq "$rounds"); do
	echo "round $r"
	run "baseline redirect" http://127.0.0.1:19090/abc1234
	run "linkraft redirect" "http://127.0.0.1:19080/$code"
	run "linkraft create" -s bench/wrk/create.lua http://127.0.0.1:19080
	if [ -n "$peer" ]; then
		run "flask+sqlite redirect" "$peer/1"
		run "flask+sqlite create" -s bench/wrk/create.lua "$peer"
	fi
done

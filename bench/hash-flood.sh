#!/usr/bin/env bash
# Redirect latency on a node that one API key floods with password-bearing
# creates. Every such create costs a bcrypt hash (tens of milliseconds of
# CPU); the node's hashing budget (per client, per key, per node) answers
# the flood 429 past it, so redirects keep their latency:
#   1. one node (the leader of a cluster of one), --create-rate 0 so that
#      only the hashing budget stands between the flood and the CPU;
#   2. redirects alone for SECS seconds (wrk -t1 -c16 --latency): p50, p99;
#   3. the same redirects while another wrk (-t1 -c16) POSTs creates with a
#      "password" under one key: p50, p99, and the flood's statuses.
# Usage: bench/hash-flood.sh [seconds (10)]. Needs wrk, curl and awk.
# Only 127.0.0.1 is used; the node is stopped on exit (LINKRAFT_BIN: a
# prebuilt binary instead of building ./cmd/linkraft).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
[[ $secs =~ ^[1-9][0-9]*$ ]] || { echo "usage: bench/hash-flood.sh [seconds]" >&2; exit 2; }
command -v wrk >/dev/null || { echo "bench/hash-flood.sh: needs wrk (apt-get install wrk)" >&2; exit 1; }
links=1
# shellcheck source=bench/nodes.sh
. bench/nodes.sh

n1=127.0.0.1:28881
start node1 28881 28901 28861
wait_for "node1 to be ready" 400 healthy "$n1"
echo "machine: $(nproc) cores, $(uname -m), $(date -u '+%F %T') UTC; one node; wrk $(wrk -v 2>&1 | head -1 | awk '{print $2}')"

curl -sSf -o /dev/null -H "$auth" -H 'Content-Type: application/json' \
	-d '{"url":"https://example.com/target","custom_code":"hop"}' "http://$n1/api/v1/urls"
flood_key=$(curl -sSf -H "$auth" -H 'Content-Type: application/json' \
	-d '{"name":"flood","scopes":["links:write"],"workspaces":["*"]}' "http://$n1/admin/keys" |
	awk -F'"key":"' '{ split($2, a, "\""); print a[1] }')

cat >"$tmp/flood.lua" <<'LUA'
local headers = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. os.getenv("FLOOD_KEY") }
local n = 0
request = function()
  n = n + 1
  return wrk.format("POST", "/api/v1/urls", headers,
    '{"url":"https://example.com/flood/' .. n .. '/' .. math.random(1e9) .. '","password":"correct horse battery"}')
end
LUA

latency() { # label
	wrk -t1 -c16 -d"${secs}s" --latency "http://$n1/hop" >"$tmp/redirect.txt"
	awk -v l="$1" '/^ +50%/ { p50 = $2 } /^ +99%/ { p99 = $2 } /^Requests\/sec/ { rps = $2 }
		END { printf "%-22s redirects p50 %s  p99 %s  (%s req/s)\n", l, p50, p99, rps }' "$tmp/redirect.txt"
}

latency "alone"
FLOOD_KEY=$flood_key wrk -t1 -c16 -d"$((secs + 2))s" -s "$tmp/flood.lua" "http://$n1" >"$tmp/flood.txt" &
flood=$!
sleep 1
latency "under the flood"
wait "$flood"
awk '/requests in/ { total = $1 } /Non-2xx/ { refused = $NF } /^Requests\/sec/ { rps = $2 }
	END { printf "flood: %s creates sent (%s req/s), %s of them not 2xx (429: over the hashing budget)\n", total, rps, refused + 0 }' "$tmp/flood.txt"
echo "node CPU: $(awk '{ printf "%.1f s", ($14 + $15) / 100 }' "/proc/${pids[0]}/stat")"

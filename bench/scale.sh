#!/usr/bin/env bash
# One node holding many links: how fast they are imported, what the node's
# memory is afterwards, how long a restart takes until it serves them all
# again, and how long a new, empty node takes to install them and serve.
#   1. node1 starts alone; N links (~110-byte URLs, distinct 8-character
#      custom codes) are imported through POST /admin/import;
#   2. 15 s later: RSS (from /proc) and the Go heap (from /metrics);
#   3. node1 is stopped (SIGTERM) and started again; the time until its own
#      state serves the last imported code (no leader is asked: a single
#      node's miss would be a 404) and its RSS 10 s later;
#   4. node2 starts with an empty data dir and is added with POST
#      /admin/join; the time until its linkraft_links gauge reaches N, i.e.
#      until it installed node1's snapshot, and its RSS 10 s later.
# Usage: bench/scale.sh [links (1000000)]. Needs curl and awk. Only
# 127.0.0.1 is used; both nodes are stopped on exit (LINKRAFT_BIN: a
# prebuilt binary instead of building ./cmd/linkraft).
# Credentials: both nodes get the same random --admin-token, which the two
# admin calls (POST /admin/import, POST /admin/join) carry; nothing here
# creates links one by one, and redirects, /health and /metrics need none.
set -euo pipefail
cd "$(dirname "$0")/.."
links=${1:-1000000}
[[ $links =~ ^[1-9][0-9]*$ ]] || { echo "usage: bench/scale.sh [links]" >&2; exit 2; }
# shellcheck source=bench/nodes.sh
. bench/nodes.sh

n1=127.0.0.1:28581
n2=127.0.0.1:28582
echo "machine: $(nproc) cores, $(uname -m), $(date -u '+%F %T') UTC; $links links of ~110-byte URLs"

start node1 28581 28591 28571
node1=$pid
wait_for "node1" 200 healthy "$n1"
t0=$(now)
curl -sSf -o "$tmp/report" -H "$auth" --data-binary @"$tmp/links.jsonl" "http://$n1/admin/import"
took=$(since "$t0")
grep -q "\"created\":$links" "$tmp/report" || { echo "import report: $(head -c 300 "$tmp/report")" >&2; exit 1; }
echo "import          $took s   $(awk -v n="$links" -v s="$took" 'BEGIN { printf "%.0f", n / s }') links/s"
sleep 15
echo "after import    RSS $(rss_mb "$node1")   heap in use $(heap_mb "$n1") MiB"

kill -TERM "$node1"
wait "$node1" || true
du -sh "$tmp/node1/raft.db" "$tmp/node1/snapshots" | awk '{ printf "  %s %s\n", $2, $1 }' | sed "s|$tmp/||"
t0=$(now)
start node1 28581 28591 28571
node1=$pid
wait_for "node1 to serve $last after the restart" 1200 serves "$n1"
echo "restart         $(since "$t0") s to serve the last code"
sleep 10
echo "after restart   RSS $(rss_mb "$node1")   heap in use $(heap_mb "$n1") MiB"

start node2 28582 28592 28572 --bootstrap-expect 2
node2=$pid
wait_for "node2" 200 listening "$n2"
t0=$(now)
curl -sSf -o /dev/null -H "$auth" -H 'Content-Type: application/json' \
	-d "{\"id\":\"node2\",\"raft_addr\":\"127.0.0.1:28592\",\"http_addr\":\"$n2\"}" "http://$n1/admin/join"
wait_for "node2 to hold every link" 1200 holds_all "$n2"
echo "new node        $(since "$t0") s from join to holding all $links links"
sleep 10
echo "new node        RSS $(rss_mb "$node2")   heap in use $(heap_mb "$n2") MiB"

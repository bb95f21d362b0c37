#!/usr/bin/env bash
# One node holding many links: how fast they are imported, what the node's
# memory is afterwards, how long a restart takes until it serves them all
# again, how fast it then serves codes its caches have not met, and how
# long a new, empty node takes to install them and serve.
#   1. node1 starts alone; N links (~110-byte URLs, distinct 8-character
#      custom codes) are imported through POST /admin/import;
#   2. 15 s later: RSS (from /proc) and the Go heap (from /metrics), and
#      the snapshots Raft took during the import, with their mean time
#      (a snapshot refers to a checkpoint of the engine: its time should
#      not grow with the links);
#   3. node1 is stopped (SIGTERM) and started again; the time until its own
#      state serves the last imported code (no leader is asked: a single
#      node's miss would be a 404);
#   4. at once, caches cold: 2000 GETs of distinct codes picked at random
#      (seed 1) from the imported ones, one at a time, each checked to
#      redirect to its URL (bench/cold): p50, p99 and max;
#   5. 10 s later: RSS, heap, and node1's whole data dir (du) per link;
#      then 300,000 more distinct codes (or every link), one at a time,
#      and 10 s later RSS and heap again, with the caches full;
#   6. node2 starts with an empty data dir and is added with POST
#      /admin/join: the time until the join answers (node2 is added as a
#      learner), until its linkraft_links gauge reaches N (it installed
#      node1's snapshot and serves every code from its own state), and
#      until the leader promoted it to voter; its RSS 10 s later; both
#      data dirs' sizes (node2's holds a snapshot and a short log only);
#   7. the figures issue 36's acceptance bounds, one line each with the
#      bound (which is for 20M links; docs/SCALING.md has the table).
# Usage: bench/scale.sh [links (1000000)]. Needs go, curl and awk. Only
# 127.0.0.1 is used; both nodes are stopped on exit (LINKRAFT_BIN: a
# prebuilt binary instead of building ./cmd/linkraft). Every wait has a
# limit (bench/nodes.sh), the import one of 30 minutes per 1M-link part.
# Credentials: both nodes get the same random --admin-token, which the two
# admin calls (POST /admin/import, POST /admin/join) carry; nothing here
# creates links one by one, and redirects, /health and /metrics need none.
set -euo pipefail
cd "$(dirname "$0")/.."
links=${1:-1000000}
[[ $links =~ ^[1-9][0-9]*$ ]] || { echo "usage: bench/scale.sh [links]" >&2; exit 2; }
# shellcheck source=bench/nodes.sh
. bench/nodes.sh
go build -o "$tmp/cold" ./bench/cold
cold_n=$((links < 2000 ? links : 2000))
# Enough distinct codes to fill the default record cache (131,072 slots)
# nine tenths and the engine's block cache: a code's slot is its position's.
warm_n=$((links < 300000 ? links : 300000))

n1=127.0.0.1:28581
n2=127.0.0.1:28582
echo "machine: $(nproc) cores, $(uname -m), $(date -u '+%F %T') UTC; $links links of ~110-byte URLs"

# rss_kb: the resident set in kB, for the acceptance lines.
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
# snapshots: how many snapshots a node took, their mean time and the part
# of it that held up applying entries (raft's summaries; their quantiles
# cover the last 10 s only, so the means).
snapshots() { # http address
	curl -s -m 5 "http://$1/metrics" | awk '
		/^raft_snapshot_take_snapshot_seconds_sum/ { s = $2 }
		/^raft_snapshot_take_snapshot_seconds_count/ { n = $2 }
		/^raft_fsm_snapshot_seconds_sum/ { f = $2 }
		/^raft_fsm_snapshot_seconds_count/ { m = $2 }
		END {
			if (n == 0 || m == 0) { print "none taken"; exit }
			printf "%d taken, %.0f ms each on average, of which %.0f ms held up applying", n, s * 1000 / n, f * 1000 / m
		}'
}
gb() { awk -v k="$1" 'BEGIN { printf "%.2f GB", k * 1024 / 1e9 }'; }

start node1 28581 28591 28571
node1=$pid
wait_for "node1" 200 healthy "$n1"
# An import body must arrive within 5 minutes (and be at most 1 GiB): parts
# of 1M links (~140 MB), which a node with small caches takes in time too.
split -l 1000000 -d -a 4 "$tmp/links.jsonl" "$tmp/part."
t0=$(now)
for part in "$tmp"/part.*; do
	# -T streams the file (--data-binary reads it whole, and fails at 10M links).
	curl -sSf -m 1800 -o "$tmp/report" -H "$auth" -H 'Content-Type: application/x-ndjson' -H 'Expect:' -X POST -T "$part" "http://$n1/admin/import"
	grep -q "\"created\":$(wc -l <"$part")," "$tmp/report" || { echo "import report: $(head -c 300 "$tmp/report")" >&2; exit 1; }
	rm "$part"
done
took=$(since "$t0")
echo "import          $took s   $(awk -v n="$links" -v s="$took" 'BEGIN { printf "%.0f", n / s }') links/s"
sleep 15
rss_import=$(rss_kb "$node1")
echo "after import    RSS $(rss_mb "$node1")   heap in use $(heap_mb "$n1") MiB"
echo "snapshots       $(snapshots "$n1") during the import"

stop "$node1" 120
du -sh "$tmp/node1/raft.db" "$tmp/node1/snapshots" | awk '{ printf "  %s %s\n", $2, $1 }' | sed "s|$tmp/||"
t0=$(now)
start node1 28581 28591 28571
node1=$pid
wait_for "node1 to serve $last after the restart" 6000 serves "$n1"
restart=$(since "$t0")
echo "restart         $restart s to serve the last code"
cold=$("$tmp/cold" --target "$n1" --links "$tmp/links.jsonl" --n "$cold_n" --seed 1 --limit 5m) ||
	{ echo "cold redirects  ${cold:-none measured}" >&2; exit 1; }
echo "cold redirects  $cold"
sleep 10
rss_restart=$(rss_kb "$node1")
echo "after restart   RSS $(rss_mb "$node1")   heap in use $(heap_mb "$n1") MiB"
data=$(du -sB1 "$tmp/node1" | cut -f1)
# Caches full: a state larger than the caches fills them (a code filter's
# fill reads every code), a smaller one may not; the same caches filled at
# both sizes compare what grows with links.
"$tmp/cold" --target "$n1" --links "$tmp/links.jsonl" --n "$warm_n" --seed 2 --limit 10m >/dev/null ||
	{ echo "warming the caches failed" >&2; exit 1; }
sleep 10
rss_warm=$(rss_kb "$node1")
echo "caches full     RSS $(rss_mb "$node1")   heap in use $(heap_mb "$n1") MiB   after $warm_n more distinct codes"

start node2 28582 28592 28572 --bootstrap-expect 2
node2=$pid
wait_for "node2" 200 listening "$n2"
t0=$(now)
curl -sSf -m 60 -o "$tmp/join" -H "$auth" -H 'Content-Type: application/json' \
	-d "{\"id\":\"node2\",\"raft_addr\":\"127.0.0.1:28592\",\"http_addr\":\"$n2\"}" "http://$n1/admin/join"
echo "join answered   $(since "$t0") s   node2 catching up: $(grep -o '"id":"node2"[^}]*' "$tmp/join" | grep -o '"catching_up":true' || echo no)"
wait_for "node2 to hold every link" 6000 holds_all "$n2"
joined=$(since "$t0")
echo "new node        $joined s from join to holding all $links links"
wait_for "node2 to be promoted" 6000 voter node2 "$n1"
echo "new node        $(since "$t0") s from join to voter"
sleep 10
echo "new node        RSS $(rss_mb "$node2")   heap in use $(heap_mb "$n2") MiB"
for d in node1 node1/raft.db node1/snapshots node2 node2/raft.db node2/snapshots; do
	du -sh "$tmp/$d" # one at a time: du counts a file once, under its first path
done | awk '{ printf "  %s %s\n", $2, $1 }' | sed "s|$tmp/||"

# The figures issue 36's acceptance bounds (its bounds are for 20M links;
# GB is 10^9 bytes), one line each.
echo "acceptance at $links links (bound at 20M links in brackets)"
echo "  data dir        $(awk -v b="$data" -v n="$links" 'BEGIN { printf "%.0f B/link: node1'\''s %.0f MB after the restart", b / n, b / 1e6 }')   [<= 150 B/link]"
echo "  RSS at rest     $(gb "$rss_import") after the import, $(gb "$rss_restart") after the restart, $(gb "$rss_warm") with the caches full   [<= 1 GB; 20M within 20 % of 2M]"
echo "  restart         $restart s to serve the last code   [<= 2 s]"
echo "  joining node    $joined s to hold every link   [<= 30 s]"
echo "  cold redirects  ${cold%%  (*}   [p99 <= 10 ms]"

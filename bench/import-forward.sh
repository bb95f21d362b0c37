#!/usr/bin/env bash
# An import sent to a follower, which sends it on to the leader as it
# reads it (the leader imports it as it arrives):
#   1. node1 starts alone; node2 and node3 start empty and are added with
#      POST /admin/join (SERVERS=2 leaves node3 out);
#   2. N links (~110-byte URLs, distinct 8-character custom codes, as
#      bench/scale.sh makes them) are imported through node2's
#      POST /admin/import; the report and the time until node2's own
#      linkraft_links gauge reaches N;
#   3. 15 s later: RSS (from /proc) of the follower and of the leader;
#   4. a backup fetched through node2 (which relays the leader's answer),
#      then restored through node2, with the slowest /health/live answer
#      of each node during each, and how often a leader stepped down over
#      the whole run.
# Usage: bench/import-forward.sh [links (1000000)]; CHUNKED=1 sends the
# import without a length (Transfer-Encoding: chunked). Needs curl and awk.
# Only 127.0.0.1 is used; every node is stopped on exit (LINKRAFT_BIN: a
# prebuilt binary instead of building ./cmd/linkraft). The nodes share a
# random --admin-token, which the admin calls carry.
set -euo pipefail
cd "$(dirname "$0")/.."
links=${1:-1000000}
servers=${SERVERS:-3}
[[ $links =~ ^[1-9][0-9]*$ ]] || { echo "usage: bench/import-forward.sh [links]" >&2; exit 2; }
[[ $servers =~ ^[23]$ ]] || { echo "bench/import-forward.sh: SERVERS is 2 or 3" >&2; exit 2; }
# shellcheck source=bench/nodes.sh
. bench/nodes.sh

join() { # id, http port, raft port, gossip port
	start "$1" "$2" "$3" "$4" --bootstrap-expect 2
	wait_for "$1 to listen" 200 listening "127.0.0.1:$2"
	curl -sSf -o /dev/null -H "$auth" -H 'Content-Type: application/json' \
		-d "{\"id\":\"$1\",\"raft_addr\":\"127.0.0.1:$3\",\"http_addr\":\"127.0.0.1:$2\"}" "http://$n1/admin/join"
	wait_for "$1 to be ready" 400 healthy "127.0.0.1:$2"
}

n1=127.0.0.1:28781
n2=127.0.0.1:28782
echo "machine: $(nproc) cores, $(uname -m), $(date -u '+%F %T') UTC; $servers servers; $links links of ~110-byte URLs"
start node1 28781 28801 28761
leader=$pid
wait_for "node1" 200 healthy "$n1"
join node2 28782 28802 28762
follower=$pid
[ "$servers" = 2 ] || join node3 28783 28803 28763
sleep 2 # let the joiners settle: the import should meet a quiet cluster

t0=$(now)
framing=() # CHUNKED=1: the import without a length, as Transfer-Encoding: chunked
[ "${CHUNKED:-0}" = 1 ] && framing=(-H 'Transfer-Encoding: chunked')
curl -sS -o "$tmp/report" -H "$auth" "${framing[@]}" --data-binary @"$tmp/links.jsonl" "http://$n2/admin/import"
echo "import answer   $(head -c 160 "$tmp/report")"
if grep -q "\"created\":$links" "$tmp/report"; then
	wait_for "node2 to hold every link" 1200 holds_all "$n2"
	echo "import          $(since "$t0") s until the follower holds all $links links"
else
	echo "import          failed after $(since "$t0") s; the nodes' warnings:"
	grep -h 'level=WARN' "$tmp"/*.log | cut -c1-200 | head -n 8
fi
sleep 15
echo "follower        RSS $(rss_mb "$follower")"
echo "leader          RSS $(rss_mb "$leader")"

# While a backup and then a restore cross the follower, both nodes are
# asked for /health/live every 20 ms (150 times each): a node that stops
# answering is stalled.
probe() { # http port
	for _ in $(seq 150); do
		curl -s -o /dev/null -m 3 -w '%{time_total}\n' "http://127.0.0.1:$1/health/live"
		sleep 0.02
	done | sort -n | tail -n 1
}
probed() { # what, command...
	local what=$1 probing
	shift
	probe 28781 >"$tmp/probe.leader" &
	probing=$!
	probe 28782 >"$tmp/probe.follower" &
	probing="$probing $!"
	"$@"
	# shellcheck disable=SC2086 # two pids
	wait $probing
	echo "slowest probe   leader $(cat "$tmp/probe.leader") s, follower $(cat "$tmp/probe.follower") s (/health/live during the $what)"
}
backup() {
	local t0 status
	t0=$(now)
	status=$(curl -sS -o "$tmp/backup" -w '%{http_code}' -H "$auth" "http://$n2/admin/backup")
	echo "backup          $status, $(($(stat -c %s "$tmp/backup") / 1048576)) MB through the follower in $(since "$t0") s"
}
restore() {
	local t0 status
	t0=$(now)
	status=$(curl -sS -o "$tmp/restored" -w '%{http_code}' -H "$auth" --data-binary @"$tmp/backup" "http://$n2/admin/restore")
	echo "restore         $status $(head -c 80 "$tmp/restored") through the follower in $(since "$t0") s"
}
probed backup backup
probed restore restore
echo "step-downs      $(cat "$tmp"/*.log | grep -c 'stepping down' || true)"

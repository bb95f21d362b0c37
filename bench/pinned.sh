#!/usr/bin/env bash
# Redirect throughput with the server and the load tool each pinned to
# cores of their own (taskset), against peers on the same cores in the
# same run (ratios survive a noisy machine; absolutes do not):
#   plain: bench/baseline (a bare fasthttp 302 from a map) vs a linkraft
#          node: the leader of a one-node cluster, and a follower of a
#          three-node cluster (FOLLOWER=1; its two peers share its cores);
#   TLS:   linkraft's own TLS (--tls-cert) vs nginx terminating TLS in
#          front of the same node's plain HTTP (an upstream with keep-alive),
#          with keep-alive and with a new connection per request.
# Needs wrk and nginx from Debian (apt-get install wrk nginx) and openssl.
# Usage: bench/pinned.sh [seconds per run] [rounds]
#   SERVER_CPUS (default 0) and LOAD_CPUS (default 1) are taskset lists;
#   CONNS (default 64) connections, THREADS (default 1) wrk threads;
#   FOLLOWER=1 adds the follower's row, TLS=0 leaves the TLS rows out;
#   LINKRAFT_BIN runs that build instead of this tree's.
# Each row gives requests per second and the CPU time the serving
# processes spent per request (from /proc): the second is what decides
# throughput once the server's cores are saturated, and it does not move
# when something else on the machine takes CPU between rounds.
# Only 127.0.0.1 is loaded.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${2:-3}
server=${SERVER_CPUS:-0}
load=${LOAD_CPUS:-1}
conns=${CONNS:-64}
threads=${THREADS:-1}
tmp=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

if [ -n "${LINKRAFT_BIN:-}" ]; then cp "$LINKRAFT_BIN" "$tmp/linkraft"; else go build -o "$tmp/linkraft" ./cmd/linkraft; fi
go build -o "$tmp/baseline" ./bench/baseline
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=bench.local \
	-addext subjectAltName=DNS:bench.local -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
token=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
key=$("$tmp/linkraft" keygen)

taskset -c "$server" "$tmp/baseline" -addr 127.0.0.1:19090 & pids+=($!)
basepid=$!
declare -A nodepid
node() { # id, http port, raft port, extra flags...
	local id=$1 http=$2 raft=$3; shift 3
	LINKRAFT_CLUSTER_KEY=$key taskset -c "$server" "$tmp/linkraft" serve --id "$id" --data-dir "$tmp/$id" \
		--http-addr "127.0.0.1:$http" --raft-addr "127.0.0.1:$raft" --gossip-addr "127.0.0.1:$((raft + 1))" \
		--admin-token "$token" --create-rate 0 --log-level warn "$@" 2>"$tmp/$id.log" & pids+=($!)
	nodepid[$id]=$!
}
node n1 19080 19081 --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem" --https-addr 127.0.0.1:19443 --http-redirect=false
if [ "${FOLLOWER:-0}" = 1 ]; then
	node n2 19180 19181 --join 127.0.0.1:19082
	node n3 19280 19281 --join 127.0.0.1:19082
fi
cat >"$tmp/nginx.conf" <<NGINX
worker_processes $(taskset -c "$server" nproc);
pid $tmp/nginx.pid;
error_log $tmp/nginx.err warn;
events { worker_connections 4096; }
http {
	access_log off;
	upstream linkraft { server 127.0.0.1:19080; keepalive 256; }
	server {
		listen 127.0.0.1:19543 ssl;
		ssl_certificate $tmp/cert.pem;
		ssl_certificate_key $tmp/key.pem;
		ssl_protocols TLSv1.2 TLSv1.3;
		location / {
			proxy_pass http://linkraft;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Host \$host;
			proxy_set_header X-Forwarded-For \$remote_addr;
		}
	}
}
NGINX
mkdir -p "$tmp/nginx"
taskset -c "$server" nginx -p "$tmp/nginx" -c "$tmp/nginx.conf" -g 'daemon off;' & pids+=($!)
nginxpid=$!

code=""
for _ in $(seq 100); do
	code=$(curl -s -m 5 -H "Authorization: Bearer $token" -d url=https://example.com/some/long/path?with=query \
		http://127.0.0.1:19080/shorten | sed -n 's/.*"short_code":"\([^"]*\)".*/\1/p' || true)
	[ -n "$code" ] && break
	sleep 0.2
done
[ -n "$code" ] || { tail -n 20 "$tmp/n1.log" >&2; echo "bench/pinned.sh: no link created" >&2; exit 1; }
if [ "${FOLLOWER:-0}" = 1 ]; then
	for _ in $(seq 100); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:19180/$code)" = 302 ] && break
		sleep 0.2
	done
fi

# cpu is the CPU time, in clock ticks, the processes pids (and their
# threads) have used; nginx's workers, its children, count with it.
cpu() {
	local t=0 p list=("$@")
	[[ " $* " == *" $nginxpid "* ]] && list+=($(pgrep -P "$nginxpid"))
	for p in "${list[@]}"; do
		t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
	done
	echo "$t"
}
run() { # label, "pids serving", wrk args...
	local label=$1 serving=$2; shift 2
	local out before after n
	before=$(cpu $serving)
	out=$(taskset -c "$load" wrk -t"$threads" -c"$conns" -d"${secs}s" "$@")
	after=$(cpu $serving)
	n=$(echo "$out" | awk '/requests in/ {print $1}')
	printf '%-34s %10s req/s %8s ns CPU/request\n' "$label" "$(echo "$out" | awk '/Requests\/sec/ {print $2}')" \
		"$(( (after - before) * (1000000000 / $(getconf CLK_TCK)) / n ))"
}
close=(-H 'Connection: close')
echo "server cpus $server, load cpus $load, $conns connections, ${secs}s runs, $rounds rounds; $(nproc) cpus, $(go env GOVERSION)"
for r in $(seq "$rounds"); do
	echo "round $r"
	run "baseline (bare fasthttp)" "$basepid" http://127.0.0.1:19090/abc1234
	run "linkraft leader" "${nodepid[n1]}" "http://127.0.0.1:19080/$code"
	[ "${FOLLOWER:-0}" = 1 ] && run "linkraft follower" "${nodepid[n2]}" "http://127.0.0.1:19180/$code"
	[ "${TLS:-1}" = 0 ] && continue
	run "linkraft TLS, keep-alive" "${nodepid[n1]}" "https://127.0.0.1:19443/$code"
	run "nginx TLS -> linkraft, keep-alive" "$nginxpid ${nodepid[n1]}" "https://127.0.0.1:19543/$code"
	run "linkraft TLS, new connections" "${nodepid[n1]}" "${close[@]}" "https://127.0.0.1:19443/$code"
	run "nginx TLS -> linkraft, new conns" "$nginxpid ${nodepid[n1]}" "${close[@]}" "https://127.0.0.1:19543/$code"
done

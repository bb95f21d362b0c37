#!/bin/sh
# linkraft-backup.sh: save one backup of a linkraft cluster (GET /admin/backup)
# under a dated name and delete all but the newest few. Run daily by
# linkraft-backup.timer; also fine to run by hand (as root or as linkraft):
#
#   set -a; . /etc/linkraft.env; set +a; linkraft-backup.sh
#
# Environment (the unit reads /etc/linkraft.env). GET /admin/backup needs an
# admin credential from every client, one on this machine included; set one
# of these two (when both are set LINKRAFT_KEY is sent, as the admin CLI does):
#   LINKRAFT_KEY           an API key with the admin scope: the one a new
#                          cluster writes to <data-dir>/admin.key, or one made
#                          with "linkraft keys create --name backup --scopes admin"
#   LINKRAFT_ADMIN_TOKEN   the nodes' --admin-token
#   LINKRAFT_ADDR          node to ask, http(s)://host:port or host:port
#                          (default: this machine, port of LINKRAFT_HTTP_ADDR,
#                          or of LINKRAFT_HTTPS_ADDR when the node serves HTTPS:
#                          LINKRAFT_ACME_DOMAINS or LINKRAFT_TLS_CERT set).
#                          Any node will do: it relays to the leader.
#   LINKRAFT_SERVER_NAME   the name the node's certificate holds (default: the
#                          first of LINKRAFT_ACME_DOMAINS, else LINKRAFT_BASE_URL's)
#   LINKRAFT_CA_FILE       a PEM bundle of CAs, for a certificate a private CA signed
#   LINKRAFT_BACKUP_DIR    where backups go (default /var/lib/linkraft-backups)
#   LINKRAFT_BACKUP_KEEP   how many backups to keep (default 14)
#   LINKRAFT_BACKUP_TIMEOUT  seconds the whole download may take (default 900)
#
# Exits non-zero, leaving earlier backups alone, unless a complete backup
# was saved. The backup file is replaced atomically: a reader never sees a
# partial one under the final name.
set -eu

dir=${LINKRAFT_BACKUP_DIR:-/var/lib/linkraft-backups}
keep=${LINKRAFT_BACKUP_KEEP:-14}
timeout=${LINKRAFT_BACKUP_TIMEOUT:-900}
token=${LINKRAFT_KEY:-${LINKRAFT_ADMIN_TOKEN:-}}

die() {
	echo "linkraft-backup: $*" >&2
	exit 1
}

case $keep in '' | *[!0-9]*) die "LINKRAFT_BACKUP_KEEP=$keep: want a whole number >= 1" ;; esac
[ "$keep" -ge 1 ] || die "LINKRAFT_BACKUP_KEEP=$keep: want a whole number >= 1"
case $timeout in '' | *[!0-9]*) die "LINKRAFT_BACKUP_TIMEOUT=$timeout: want seconds" ;; esac
[ -n "$token" ] || die "no credential: set LINKRAFT_KEY (an API key with the admin scope) or LINKRAFT_ADMIN_TOKEN (the nodes' --admin-token)"
# The credential goes to curl in a config file read from standard input, so
# it never shows on a command line (ps); the config's quoting forbids these.
case $token in *'"'* | *'\'*) die "LINKRAFT_KEY / LINKRAFT_ADMIN_TOKEN must not contain a quote or a backslash" ;; esac
command -v curl >/dev/null 2>&1 || die "curl is not installed"

# local_addr is a listen address as this machine reaches it: ":8080" or
# "0.0.0.0:8080" listens on every address, loopback included.
local_addr() {
	host=${1%:*}
	case $host in '' | 0.0.0.0 | '[::]') host=127.0.0.1 ;; esac
	echo "$host:${1##*:}"
}

addr=${LINKRAFT_ADDR:-}
name=${LINKRAFT_SERVER_NAME:-}
tls=
if [ -z "$addr" ] && [ -n "${LINKRAFT_ACME_DOMAINS:-}${LINKRAFT_TLS_CERT:-}" ]; then
	# The node on this machine serves HTTPS, and its plain HTTP answers
	# with a redirect: ask its HTTPS port, checking the certificate for
	# the name it serves (LINKRAFT_SERVER_NAME, else the first ACME name,
	# else the base URL's host), as linkraft's own commands do.
	[ -n "$name" ] || name=${LINKRAFT_ACME_DOMAINS%%,*}
	if [ -z "$name" ]; then
		name=${LINKRAFT_BASE_URL#*://}
		name=${name%%/*}
		name=${name%:*}
	fi
	[ -n "$name" ] || die "the node serves HTTPS: set LINKRAFT_SERVER_NAME to the name its certificate holds"
	listen=$(local_addr "${LINKRAFT_HTTPS_ADDR:-:443}")
	tls="--connect-to $name:${listen##*:}:$listen"
	addr=https://$name:${listen##*:}
elif [ -z "$addr" ]; then
	addr=$(local_addr "${LINKRAFT_HTTP_ADDR:-:8080}")
fi
case $addr in *://*) ;; *) addr=http://$addr ;; esac
url=${addr%/}/admin/backup
# A private CA's certificate (LINKRAFT_CA_FILE, as for linkraft's commands).
[ -z "${LINKRAFT_CA_FILE:-}" ] || tls="$tls --cacert $LINKRAFT_CA_FILE"

umask 077
mkdir -p "$dir"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=$dir/linkraft-$stamp.backup
tmp=$dir/.linkraft-$stamp.backup.partial
hdr=$dir/.linkraft-$stamp.headers
trap 'rm -f "$tmp" "$hdr"' EXIT
trap 'exit 1' HUP INT TERM

curl_config() {
	printf 'header = "Authorization: Bearer %s"\n' "$token"
}

# $tls is split on purpose: no flag, or flags and values without spaces.
# shellcheck disable=SC2086
status=$(curl_config | curl --silent --show-error --config - $tls \
	--max-time "$timeout" --dump-header "$hdr" --output "$tmp" \
	--write-out '%{http_code}' "$url") ||
	die "GET $url failed (curl exit $?); is the node up? (systemctl status linkraft)"

case $status in 3??)
	# A redirect is never a backup: the node serves HTTPS elsewhere.
	die "GET $url answered $status (to $(sed -n 's/^[Ll]ocation: *//p' "$hdr" | tr -d '\r')): the node serves HTTPS; set LINKRAFT_ADDR=https://... (and LINKRAFT_SERVER_NAME, LINKRAFT_CA_FILE as needed)" ;;
esac
if [ "$status" != 200 ]; then
	# Errors are problem+json; their detail says what is wrong (401: the
	# credential is unknown, revoked or expired; 403: an API key without the
	# admin scope).
	detail=$(dd if="$tmp" bs=400 count=1 2>/dev/null | tr '\n' ' ')
	die "GET $url answered $status: $detail"
fi
[ -s "$tmp" ] || die "GET $url answered an empty backup"
# Every backup starts with the backup envelope's magic (LKRS: a bare
# snapshot, from a node of a build before backups were authenticated);
# restore checks the rest (the cluster key's HMAC, every section, the
# checksum) and refuses a changed or damaged one.
magic=$(dd if="$tmp" bs=4 count=1 2>/dev/null)
case $magic in
LKRB | LKRS) ;;
*) die "GET $url answered something that is not a linkraft backup" ;;
esac
if grep -qi '^x-linkraft-stale:' "$hdr"; then
	echo "linkraft-backup: warning: no leader was reachable; this backup is the answering node's own state and may lag the cluster" >&2
fi

# On disk before it takes the final name, so a crash cannot leave an empty
# file there (sync FILE is GNU coreutils; elsewhere sync everything).
sync "$tmp" 2>/dev/null || sync
mv -f "$tmp" "$out"
size=$(wc -c <"$out" | tr -d ' ')
echo "linkraft-backup: saved $out ($size bytes) from $url"

# The names sort by time. Only names this script writes are considered.
ls "$dir" | grep -E '^linkraft-[0-9]{8}T[0-9]{6}Z\.backup$' | sort -r |
	tail -n "+$((keep + 1))" | while IFS= read -r old; do
	rm -f -- "$dir/$old"
	echo "linkraft-backup: pruned $old (keeping the newest $keep)"
done

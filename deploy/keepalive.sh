#!/bin/sh
# keepalive.sh CMD ARGS...: run a command, and run it again whenever it
# dies, as systemd's Restart= would. The Procfile runs each node of the
# local cluster through it, because foreman stops every process as soon as
# one exits: with it, a node killed with kill -9 comes back and rejoins
# while the other two go on serving. TERM or INT (Ctrl-C in foreman) stops
# the command gracefully and then this script.
trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid"; exit 0' TERM INT
while :; do
	"$@" &
	pid=$!
	wait "$pid"
	status=$?
	echo "keepalive: $1 exited with status $status; starting it again in 1 s" >&2
	sleep 1
done

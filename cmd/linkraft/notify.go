package main

import (
	"fmt"
	"log/slog"

	"github.com/coreos/go-systemd/v22/daemon"
)

// systemd readiness (sd_notify). Under a unit with Type=notify, systemd
// sets NOTIFY_SOCKET and counts the service as started only when READY=1
// arrives, so "systemctl start" (and units ordered After= this one) wait
// until the node answers /health rather than until the process exists.
// Without NOTIFY_SOCKET (a shell, foreman, Type=simple, the tests) every
// call here does nothing and logs nothing.

// notifyReady tells systemd the node serves: cluster.Open has checked the
// Raft data and restored the latest snapshot (entries logged since are
// applied as Raft learns they are committed, while the node serves), and
// the HTTP listener answers. STATUS= is what "systemctl status" shows.
func notifyReady(log *slog.Logger, httpAddr, raftAddr string) {
	sdNotify(log, fmt.Sprintf("%s\nSTATUS=serving http on %s, raft on %s", daemon.SdNotifyReady, httpAddr, raftAddr))
}

// notifyStopping tells systemd the node has begun its graceful shutdown, so
// the unit shows "deactivating" while in-flight requests finish and clicks
// are flushed, instead of looking like a hang.
func notifyStopping(log *slog.Logger, reason string) {
	sdNotify(log, daemon.SdNotifyStopping+"\nSTATUS=stopping: "+reason)
}

// sdNotify sends state when NOTIFY_SOCKET is set. A failure is logged and
// otherwise ignored: the node serves either way, and systemd reports a
// missing READY=1 itself (TimeoutStartSec).
func sdNotify(log *slog.Logger, state string) {
	// NOTIFY_SOCKET stays set (false): STOPPING=1 is sent later through
	// the same socket.
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.Warn("systemd notification failed", "state", state, "err", err)
	}
}

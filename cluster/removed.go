package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/internal/ownfile"
	"github.com/linkraft/linkraft/cluster/wire"
)

// A removed server stays removed. Raft's configuration says who is in,
// not who was put out, and a leader adds every gossip member that answers
// (membership.Membership.Reconcile): a server an operator removed while it ran would be added
// back by the next leader. So an operator's removal is also a record in
// the replicated state (fsm.ServerRemovalCommand, once the cluster is
// raised to fsm.LevelRemovals), written before the configuration changes:
//
//   - the record names the server's id and its incarnation, a random id made
//     with its data dir and kept in it (incarnationFile), which the server
//     says over gossip and in GET node;
//   - no leader adds a server of a recorded id back, by reconciliation or
//     promotion, whichever incarnation it runs; a leader finishes a removal
//     whose record an earlier leader wrote but whose configuration change it
//     did not make;
//   - an operator's join (Membership.AddServer) of that id on a new data
//     dir forgets the record; one of the data dir that was removed is
//     refused;
//   - the server itself stops taking part once it learns of its removal:
//     from the record in its own state, or from a leader (POST removed),
//     which tells a removed server that gossip shows it still runs, since
//     a server that was down or cut off never receives the entries that
//     remove it. It flushes its clicks, writes removedFile, shuts Raft
//     down (no elections, no cluster port), leaves gossip, and says once
//     what the operator should do. Removed reports it, and a restart on
//     that data dir finds the mark. Until it is stopped it still serves
//     the clients that reach it (its /health says removed), and hands the
//     clicks it counts to the servers of its last configuration.
//
// A server's own leave as it stops (--leave-on-terminate) and a leave gossip
// announced are not recorded: such a server rejoins when it starts again,
// as before. Until the cluster is raised to LevelRemovals (a rolling
// upgrade), only the removing leader remembers a removal, in memory
// (gossip.markRemoved).
//
// The leader's side (the records, keeping removed servers out) is package
// membership's (its removed.go); this file is the removed server's.

const (
	// incarnationFile, in the data dir, holds its incarnation.
	incarnationFile = "incarnation"
	// removedFile, in the data dir, marks a data dir whose server was
	// removed from its cluster.
	removedFile = "removed"
	// removedLog is what a removed server logs, once, as it stops taking
	// part.
	removedLog = "this server was removed from the cluster: it takes no further part in it"
	// noticeTimeout bounds the leader's notice to a removed server.
	noticeTimeout = time.Second
)

// loadIncarnation returns the data dir's incarnation, made and written
// down at its first start with this build.
func loadIncarnation(dir string) (string, error) {
	path := filepath.Join(dir, incarnationFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if inc := strings.TrimSpace(string(data)); inc != "" {
			return inc, nil
		}
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("read the data dir's incarnation: %w", err)
	}
	inc := randomHex(8)
	if err := ownfile.Write(path, []byte(inc+"\n")); err != nil {
		return "", fmt.Errorf("write the data dir's incarnation: %w", err)
	}
	return inc, nil
}

// standing is this server's own side of membership: the suffrage it asks
// for (learners.go), its leave as it stops (leave.go), and its retirement
// once an operator removed it (here). The leader's side is package
// membership's.
type standing struct {
	n *Node
	// nonvoter: this server asks to remain a non-voter (--read-replica,
	// or an operator added it as one); otherwise a non-voter is a learner
	// to be promoted (learners.go).
	nonvoter   atomic.Bool
	retirement retirement
}

// retirement is whether this server was removed, and what told it.
type retirement struct {
	removed atomic.Bool
	// retiring: it learnt of its removal and stops taking part, from the
	// last flush of its clicks through Raft (retire) on; removed follows.
	retiring atomic.Bool
	// told: a leader said this server was removed (POST removed); wake
	// tells watchRemoval.
	told atomic.Bool
	wake broadcast
}

// Removed reports whether an operator removed this server from the
// cluster: it takes no part in it any more (Raft is shut down) and must be
// stopped; it comes back only with an empty data dir, joined again.
func (n *Node) Removed() bool { return n.standing.retirement.removed.Load() }

// leavingForGood reports whether this server is stopping taking part, or
// has: its clicks go to the servers of its last configuration
// (clickSender.toServers), its Raft being shut down or about to be.
func (s *standing) leavingForGood() bool {
	return s.retirement.retiring.Load() || s.retirement.removed.Load()
}

// retireIfMarked retires a server whose data dir was removed from its
// cluster, at Open, before gossip and the cluster port start. It reports
// whether it did.
func (s *standing) retireIfMarked() bool {
	n := s.n
	_, err := os.Stat(filepath.Join(n.cfg.DataDir, removedFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false
	case err != nil:
		n.log.Warn("reading the removal mark; taking the data dir as removed", "err", err)
	}
	s.retirement.retiring.Store(true)
	s.retirement.removed.Store(true)
	s.stopTakingPart("its data dir is marked removed (" + removedFile + ")")
	return true
}

// watchRemoval retires this server once it learns that it was removed: on
// each applied batch (the record, in its own state), each leader or state
// change Raft reports (a leader that removed itself steps down first), and
// each leader's notice. Until the node closes.
func (s *standing) watchRemoval() {
	n := s.n
	for !n.Removed() {
		applied := n.machine.applied.wait()
		leaders := n.leadership.changed.wait()
		told := s.retirement.wake.wait()
		if why := s.removedBecause(); why != "" {
			s.retire(why)
			return
		}
		select {
		case <-n.closing:
			return
		case <-applied:
		case <-leaders:
		case <-told:
		}
	}
}

// removedBecause says how this server learnt that it was removed, "" while
// it has not. A leader removing itself goes on until it has stepped down:
// the removal is its to finish.
func (s *standing) removedBecause() string {
	n := s.n
	if n.IsLeader() {
		return ""
	}
	if s.retirement.told.Load() {
		return "a leader said so"
	}
	if inc, ok := n.fsm.Removed(n.cfg.ID); ok && inc != "" && inc == n.incarnation {
		return "the cluster's state records it"
	}
	return ""
}

// retire makes this server stop taking part, once. The clicks it counted
// go to the cluster first, while its Raft still runs and knows the leader
// (the record that told it came from that leader moments ago): a removed
// server's data dir is emptied, not started again, so clicks saved there
// for the next start would be lost. Those it counts afterwards go to the
// servers of its last configuration (clickSender.toServers). Its data dir is
// marked before Raft stops: a crash right after still keeps it out.
func (s *standing) retire(why string) {
	n := s.n
	if !s.retirement.retiring.CompareAndSwap(false, true) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(n.cfg.Writes.Timeout, finalFlushTimeout))
	if err := n.clicks.Flush(ctx); err != nil {
		n.log.Warn("flushing the clicks as this server stops taking part: it sends them again to the servers of its last configuration", "err", err)
	}
	cancel()
	s.retirement.removed.Store(true)
	mark := fmt.Sprintf("removed from cluster %s at %s: %s\n", n.fsm.ClusterID(), time.Now().UTC().Format(time.RFC3339), why)
	if err := ownfile.Write(filepath.Join(n.cfg.DataDir, removedFile), []byte(mark)); err != nil {
		n.log.Error("writing the removal mark: a restart on this data dir will not know of the removal", "err", err)
	}
	s.stopTakingPart(why)
}

// stopTakingPart says once what the operator should do next, then shuts
// Raft down (its transport closes the cluster port) and leaves gossip.
// Close does the rest.
func (s *standing) stopTakingPart(why string) {
	n := s.n
	n.log.Warn(removedLog, "id", n.cfg.ID, "incarnation", n.incarnation, "because", why,
		"next", fmt.Sprintf("stop this process; to bring the server back, empty its data dir %s, start it again and join it (linkraft join --id %s ...)", n.cfg.DataDir, n.cfg.ID))
	if err := stopRaft(n); err != nil {
		n.log.Warn("shutting Raft down after the removal", "err", err)
	}
	if n.gossip != nil {
		n.gossip.leaveRemoved(n.cfg.Writes.Timeout)
	}
}

// noticeRemoval takes a leader's word (POST removed) that this server, on
// this data dir, was removed; watchRemoval acts on it.
func (s *standing) noticeRemoval(notice wire.RemovedNotice) error {
	n := s.n
	if notice.ID != n.cfg.ID || notice.Incarnation == "" || notice.Incarnation != n.incarnation {
		return fmt.Errorf("%w: this is server %q on data dir %q, not %q on %q", ErrInvalidServer, n.cfg.ID, n.incarnation, notice.ID, notice.Incarnation)
	}
	s.retirement.told.Store(true)
	s.retirement.wake.notify()
	return nil
}

// tellRemoved tells the server id at raftAddr, on the data dir of
// incarnation, that it was removed. A build before removal records has no
// such exchange.
func (c *peerClient) tellRemoved(id, incarnation, raftAddr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), noticeTimeout)
	defer cancel()
	body, err := json.Marshal(wire.RemovedNotice{V: wire.Version, ID: id, Incarnation: incarnation})
	if err != nil {
		return fmt.Errorf("encode a removal notice: %w", err)
	}
	var ack wire.Ack
	if err := c.call(ctx, raftAddr, fasthttp.MethodPost, wire.PathRemoved, body, &ack); err != nil {
		return fmt.Errorf("telling %s it was removed: %w", id, err)
	}
	return nil
}

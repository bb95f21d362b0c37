package cluster

import (
	"crypto/rand"
	"fmt"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

const (
	leaderDutyInterval = 250 * time.Millisecond
	purgeInterval      = time.Minute
	// requestWindow is how long a create's request ID is remembered, so a
	// retry within it returns the first outcome instead of a second link.
	requestWindow = 10 * time.Minute
)

// runLeaderDuties does, while this node leads, what only the leader should:
// create the code key once per cluster and purge expired state.
func (n *Node) runLeaderDuties() {
	defer n.wg.Done()
	t := time.NewTicker(leaderDutyInterval)
	defer t.Stop()
	var lastPurge time.Time
	for {
		select {
		case <-n.closing:
			return
		case <-t.C:
		}
		if !n.IsLeader() {
			continue
		}
		if !n.fsm.Initialized() {
			if err := n.initKey(); err != nil {
				n.log.Warn("initialising the code key failed; will retry", "err", err)
				continue
			}
		}
		// Followers forward to this address; record it before anything else
		// so a new leader is reachable as soon as it can take writes.
		n.recordHTTPAddr(n.cfg.ID, n.cfg.HTTPAddr)
		if time.Since(lastPurge) >= purgeInterval {
			lastPurge = time.Now()
			if err := n.purge(lastPurge); err != nil {
				n.log.Warn("purge failed; will retry", "err", err)
			}
		}
	}
}

// initKey proposes a fresh random key after a barrier, so a key applied by
// an earlier leader is seen first. The FSM keeps only the first key applied.
func (n *Node) initKey() error {
	if err := n.raft.Barrier(n.cfg.WriteTimeout).Error(); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	if n.fsm.Initialized() {
		return nil
	}
	var init fsm.InitCommand
	if _, err := rand.Read(init.Key[:]); err != nil {
		return fmt.Errorf("random key: %w", err)
	}
	if _, err := rand.Read(init.ClusterID[:]); err != nil {
		return fmt.Errorf("random cluster id: %w", err)
	}
	if _, err := n.apply(fsm.EncodeInit(init)); err != nil {
		return fmt.Errorf("apply init: %w", err)
	}
	n.log.Info("code key initialised")
	return nil
}

func (n *Node) purge(now time.Time) error {
	cmd := fsm.PurgeCommand{
		ExpiredBefore:  now.Add(-n.cfg.ExpiredRetention).UnixMilli(),
		RequestsBefore: now.Add(-requestWindow).UnixMilli(),
	}
	if !n.fsm.NeedsPurge(cmd) {
		return nil
	}
	if _, err := n.apply(fsm.EncodePurge(cmd)); err != nil {
		return fmt.Errorf("apply purge: %w", err)
	}
	return nil
}

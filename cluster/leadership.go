package cluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/cluster/duties"
	"github.com/linkraft/linkraft/fsm"
)

const (
	// reconcileInterval is how often a leader makes a full membership pass
	// besides reacting to gossip events: it retries what failed (a voter
	// that could not be added yet) and catches an event that was missed.
	reconcileInterval = 2 * time.Second
	purgeInterval     = time.Minute
	// requestWindow is how long a create's request ID is remembered, so a
	// retry within it returns the first outcome instead of a second link.
	requestWindow = 10 * time.Minute
	// establishRetry is the wait between attempts to establish leadership;
	// restoreAtStartRetry after a restore at start failed (no good backup
	// at the source yet, or the source unreachable): each try lists it.
	establishRetry      = 100 * time.Millisecond
	restoreAtStartRetry = 5 * time.Second
)

// leaderLoop is this node's side of leading, as Consul's leader loop:
// when Raft reports that it won an election it establishes its term, then
// starts the leader duties (one list, leaderDuties, started and stopped
// alike) and reconciles membership until leadership ends.
type leaderLoop struct {
	n      *Node
	duties *duties.Manager
}

// monitor starts the leader loop when Raft reports that this node won an
// election and stops it when it reports the loss, as Consul's leader loop
// does. A "true" while the loop runs means leadership was lost and won
// again in between: the loop starts over for the new term.
func (l leaderLoop) monitor() {
	n := l.n
	var stop chan struct{}
	done := make(chan struct{})
	revoke := func() {
		if stop != nil {
			close(stop)
			<-done
			stop = nil
		}
	}
	defer revoke()
	for {
		select {
		case <-n.closing:
			return
		case leading := <-n.raft.LeaderCh():
			revoke()
			if leading {
				stop, done = make(chan struct{}), make(chan struct{})
				loopStop := stop
				n.spawn(func() {
					defer close(done)
					l.lead(loopStop)
				})
			}
		}
	}
}

// leaderDuties is what this node does only while it leads, from its
// established term until leadership ends or the node begins to stop: the
// commit pusher, the replication-lag monitor, the promotion of learners
// that caught up, webhook delivery, the purge of expired state, raising
// the cluster's level, ordering certificates and the scheduled backups.
// Each term gets its own.
func leaderDuties(n *Node) []duties.Duty {
	announceCommit := func() { _ = n.raft.Barrier(visibilityWait).Error() } // the append matters, not the outcome
	lag := &lagMonitor{gauge: n.metrics.lag, servers: n.members.Configuration, own: n.machine.appliedIndex,
		others: func(ctx context.Context, servers []raft.Server) map[string]uint64 {
			return n.peers.appliedIndexes(ctx, servers, 0)
		}}
	purge := purger{state: n.fsm, apply: n.apply, retention: n.cfg.Leader.ExpiredRetention, log: n.log}
	raise := raiser{state: n.fsm, levels: n.levels, log: n.log, propose: func(ctx context.Context, cmd fsm.Command) error {
		_, err := n.Propose(ctx, cmd, ProposeOptions{})
		return err
	}}
	promoter := n.members.Promoter()
	list := []duties.Duty{
		{Name: "commit pusher", Run: func(ctx context.Context) {
			n.creates.push.run(ctx.Done(), n.creates.proposer.Busy, announceCommit)
		}},
		{Name: "lag monitor", Run: func(ctx context.Context) { lag.run(ctx.Done()) }},
		{Name: "promoter", Run: func(ctx context.Context) { promoter.Run(ctx.Done()) }},
		{Name: "webhooks", Run: n.hooks.Run},
		{Name: "purger", Run: func(ctx context.Context) { purge.run(ctx.Done()) }},
		{Name: "raiser", Run: raise.run},
	}
	if n.certs != nil {
		list = append(list, duties.Duty{Name: "certificates", Run: func(ctx context.Context) { runCertificates(ctx, n) }})
	}
	if n.backups != nil {
		list = append(list, duties.Duty{Name: "backups", Run: n.backups.Run})
	}
	return list
}

// lead runs while this node leads: it establishes leadership, then starts
// the leader duties, which end with leadership (when lead returns) or
// when the node begins to stop, and reconciles membership on gossip
// events (and a periodic full pass).
func (l leaderLoop) lead(stop <-chan struct{}) {
	n := l.n
	defer n.leadership.revoke()
	if !l.establishLeadership(stop) {
		return
	}
	// The duties end with leading, before they are waited for, when this
	// loop returns (leadership ends) or the node stops (n.stopping).
	if err := l.duties.StartAll(n.stopping, leaderDuties(n)); err != nil {
		n.log.Error("starting the leader duties", "err", err)
	}
	defer l.duties.StopAll()
	if n.gossip != nil {
		n.gossip.takeLeft() // leaves seen while following were for the old leader
	}
	reconcile := time.NewTicker(reconcileInterval)
	defer reconcile.Stop()
	for {
		var members <-chan struct{}
		if n.gossip != nil {
			members = n.gossip.changed.wait()
			n.members.Reconcile()
		}
		select {
		case <-stop:
			return
		case <-n.closing:
			return
		case <-members:
		case <-reconcile.C:
		}
	}
}

// establishLeadership retries establish until it succeeds or leadership
// ends. It reports whether this node is now ready to serve as leader.
func (l leaderLoop) establishLeadership(stop <-chan struct{}) bool {
	for {
		err := establish(l.n, stop)
		if err == nil {
			return true
		}
		l.n.log.Warn("establishing leadership failed; will retry", "err", err)
		wait := establishRetry
		if errors.Is(err, errRestoreAtStart) {
			wait = restoreAtStartRetry
		}
		select {
		case <-stop:
			return false
		case <-l.n.closing:
			return false
		case <-time.After(wait):
		}
	}
}

// establish makes a new leader ready for writes and reads: one barrier, so
// every entry earlier leaders committed is applied here; with
// --restore-from, the newest good backup installed into a cluster that
// has no state yet (backupduty.go); the code key and
// cluster id, once per cluster (after the barrier, so one applied under an
// earlier leader is seen first; the FSM keeps only the first anyway); an
// initial admin key while the cluster has none and this node has no
// --admin-token; and this node's HTTP address in the replicated registry.
// Only then does it mark its term ready. stop closes when leadership ends.
func establish(n *Node, stop <-chan struct{}) error {
	term := n.raft.CurrentTerm()
	if err := n.raft.Barrier(n.cfg.Writes.Timeout).Error(); err != nil {
		return fmt.Errorf("barrier: %w", raftError(err))
	}
	if !n.fsm.Initialized() && n.cfg.Backups.RestoreFrom != "" {
		if err := restoreAtStart(n, stop); err != nil {
			return err
		}
	}
	if !n.fsm.Initialized() {
		init, err := newInitCommand()
		if err != nil {
			return err
		}
		if err := n.applyOwn(init, "init"); err != nil {
			return err
		}
		n.log.Info("code key initialised")
	}
	if n.cfg.Leader.InitialKeyFile != "" && !n.fsm.HasKeys() {
		key, err := initialAdminKey(n.cfg.Leader.InitialKeyFile)
		if err != nil {
			return err
		}
		if err := n.applyOwn(key, "initial admin key"); err != nil {
			return err
		}
		n.log.Info("created the initial admin API key; keep it safe", "file", n.cfg.Leader.InitialKeyFile, "key_id", key.Key.ID)
	}
	if err := n.members.RecordHTTPAddr(n.cfg.ID, n.cfg.HTTPAddr); err != nil {
		return err
	}
	if n.raft.CurrentTerm() != term || !n.IsLeader() {
		return ErrNoLeader
	}
	n.leadership.established(term)
	n.log.Info("leading", "term", term)
	return nil
}

// newInitCommand draws a fresh random code key and cluster id.
func newInitCommand() (fsm.InitCommand, error) {
	var init fsm.InitCommand
	if _, err := rand.Read(init.Key[:]); err != nil {
		return init, fmt.Errorf("random key: %w", err)
	}
	if _, err := rand.Read(init.ClusterID[:]); err != nil {
		return init, fmt.Errorf("random cluster id: %w", err)
	}
	return init, nil
}

// purger is the leader duty that turns links expired for longer than
// retention into tombstones and forgets request IDs older than
// requestWindow, at once and every purgeInterval. The state is asked
// first, so an idle cluster writes nothing.
type purger struct {
	state     *fsm.FSM
	apply     func(fsm.Command) (any, uint64, error)
	retention time.Duration
	log       *slog.Logger
}

// run purges until stop.
func (p purger) run(stop <-chan struct{}) {
	tick := time.NewTicker(purgeInterval)
	defer tick.Stop()
	for {
		p.purge(time.Now())
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

func (p purger) purge(now time.Time) {
	cmd := fsm.PurgeCommand{
		ExpiredBefore:  now.Add(-p.retention).UnixMilli(),
		RequestsBefore: now.Add(-requestWindow).UnixMilli(),
	}
	if !p.state.NeedsPurge(cmd) {
		return
	}
	if _, _, err := p.apply(cmd); err != nil {
		p.log.Warn("purge failed; the next one retries", "err", err)
	}
}

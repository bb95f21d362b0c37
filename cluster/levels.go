package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// A cluster upgraded one node at a time runs two builds at once, and a
// node cannot apply a log entry type its build does not know: it would
// skip the entry and hold another state than the others. So every node
// reports the entry level its build applies (wire.NodeInfo), and a write
// that needs a newer level than some server of the Raft configuration
// reports is refused (ErrUpgrading) until every server runs a build that
// knows it. Writes the oldest build knows are never held back, and the
// state machine's encoders pick the oldest entry type that carries a
// command (fsm.RequiredLevel), so a link without options is written the
// way the previous release writes it.

// ErrUpgrading refuses a write that some server of the cluster could not
// apply: its build is older than the write.
var ErrUpgrading = errors.New("a server of the cluster runs an older build that cannot apply this write: finish the upgrade first")

// levelRecheck is how often a server is asked its level at most: a
// server restarted with another build is noticed within that time.
const levelRecheck = 5 * time.Second

// entryLevels remembers what each server reported.
type entryLevels struct {
	mu    sync.Mutex
	known map[raft.ServerID]levelSeen
}

type levelSeen struct {
	level int       // the last answer; LevelKeys before any
	asked time.Time // the last time the server was asked
}

// requireLevel returns nil when every server of the configuration applies
// entries of level, and ErrUpgrading naming one that does not otherwise.
// A server is asked at most every levelRecheck; one that never answered
// counts as the oldest build that can be in the cluster, so writes it
// might not apply wait until it answers.
func (n *Node) requireLevel(ctx context.Context, level int) error {
	if level <= fsm.LevelKeys {
		return nil // every build that can join this cluster applies those
	}
	servers, err := n.configuration()
	if err != nil {
		return err
	}
	n.askLevels(ctx, servers, level)
	l := &n.levels
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range servers {
		if s.ID == raft.ServerID(n.cfg.ID) {
			continue
		}
		if got := l.known[s.ID].levelOr(fsm.LevelKeys); got < level {
			return fmt.Errorf("%w (%s applies entry level %d, this write needs %d)", ErrUpgrading, s.ID, got, level)
		}
	}
	return nil
}

func (s levelSeen) levelOr(def int) int {
	if s.level == 0 {
		return def
	}
	return s.level
}

// askLevels asks, at once, the servers below level that were not asked
// within levelRecheck.
func (n *Node) askLevels(ctx context.Context, servers []raft.Server, level int) {
	l := &n.levels
	now := time.Now()
	var ask []raft.Server
	l.mu.Lock()
	if l.known == nil {
		l.known = map[raft.ServerID]levelSeen{}
	}
	for _, s := range servers {
		seen := l.known[s.ID]
		if s.ID != raft.ServerID(n.cfg.ID) && seen.levelOr(fsm.LevelKeys) < level && now.Sub(seen.asked) >= levelRecheck {
			ask = append(ask, s)
			seen.asked = now
			l.known[s.ID] = seen
		}
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range ask {
		wg.Go(func() {
			got, ok := n.levelOf(ctx, s)
			if !ok {
				return
			}
			l.mu.Lock()
			seen := l.known[s.ID]
			seen.level = got
			l.known[s.ID] = seen
			l.mu.Unlock()
		})
	}
	wg.Wait()
}

// levelOf asks a server which entry level its build applies. A build from
// before levels answers without one: it applies LevelKeys.
func (n *Node) levelOf(ctx context.Context, s raft.Server) (int, bool) {
	timeout := time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	info, err := n.nodeInfoOf(string(s.Address), timeout)
	if err != nil {
		return 0, false
	}
	return max(info.EntryLevel, fsm.LevelKeys), true
}

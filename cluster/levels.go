package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/cluster/internal/ownfile"
	"github.com/linkraft/linkraft/fsm"
)

// A cluster upgraded one node at a time runs two builds at once, and a
// node cannot apply a log entry type its build does not know: it would
// skip the entry and hold another state than the others. So every node
// reports the entry level its build applies (wire.NodeInfo), every node
// keeps asking the servers of the configuration for theirs, and a write
// that needs a newer level than some server reported is refused
// (ErrUpgrading) until every server runs a build that knows it. Writes
// the oldest build knows are never held back, and the state machine's
// encoders pick the oldest entry type that carries a command
// (fsm.RequiredLevel), so a link without options is written the way the
// previous release writes it.
//
// Levels arrive in each member's gossip metadata as soon as it joins, and
// from GET node, which every node asks each server every few seconds (a
// cluster may run without gossip). What each server reported is kept in
// the data dir, so a node that
// restarts while another server is down still knows that server's build.
// A server never heard from counts as the oldest build that can be in the
// cluster: writing what it cannot apply would make it diverge once back.

// ErrUpgrading refuses a write that some server of the cluster could not
// apply: its build is older than the write.
var ErrUpgrading = errors.New("a server of the cluster runs an older build that cannot apply this write: finish the upgrade first")

const (
	// levelPoll is how often every server is asked its level; a server
	// restarted with another build is noticed within that time.
	levelPoll = 5 * time.Second
	// levelRetry is how soon a server below a write's level is asked
	// again on the write path, so a finished upgrade shows at once.
	levelRetry = time.Second
	// levelsFile keeps what the servers reported, one "id level" a line.
	levelsFile = "entry-levels"
)

// entryLevels is what each server of the configuration reported: it asks
// them, remembers their answers across restarts (levelsFile in dir), and
// decides whether a write of a level may be proposed.
type entryLevels struct {
	self raft.ServerID
	dir  string
	log  *slog.Logger
	// servers reads the configuration; ask asks one server its level.
	servers func() ([]raft.Server, error)
	ask     func(ctx context.Context, s raft.Server) (int, bool)

	mu    sync.Mutex
	known map[raft.ServerID]levelSeen
	saved map[raft.ServerID]int // what levelsFile holds
}

type levelSeen struct {
	level int       // the last answer; 0 before any
	asked time.Time // the last time the server was asked
}

// require returns nil when every server of the configuration applies
// entries of level, and ErrUpgrading naming one that does not otherwise.
func (l *entryLevels) require(ctx context.Context, level int) error {
	if level <= fsm.LevelKeys {
		return nil // every build that can join this cluster applies those
	}
	servers, err := l.servers()
	if err != nil {
		return err
	}
	l.askBelow(ctx, servers, level, levelRetry)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range servers {
		if got := l.levelOf(s.ID); s.ID != l.self && got < level {
			return fmt.Errorf("%w (%s applies entry level %d, this write needs %d)", ErrUpgrading, s.ID, got, level)
		}
	}
	return nil
}

// heard records a level a server reported some other way (its gossip
// metadata).
func (l *entryLevels) heard(id raft.ServerID, level int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := l.known[id]
	seen.level = level
	l.known[id] = seen
}

// levelOf is what a server reported; LevelKeys before any answer.
func (l *entryLevels) levelOf(id raft.ServerID) int {
	return max(l.known[id].level, fsm.LevelKeys)
}

// askBelow asks, at once, the servers below level that were not asked
// within every, and records their answers.
func (l *entryLevels) askBelow(ctx context.Context, servers []raft.Server, level int, every time.Duration) {
	now := time.Now()
	var ask []raft.Server
	l.mu.Lock()
	for _, s := range servers {
		seen := l.known[s.ID]
		if s.ID != l.self && l.levelOf(s.ID) < level && now.Sub(seen.asked) >= every {
			ask = append(ask, s)
			seen.asked = now
			l.known[s.ID] = seen
		}
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range ask {
		wg.Go(func() {
			if got, ok := l.ask(ctx, s); ok {
				l.mu.Lock()
				seen := l.known[s.ID]
				seen.level = got
				l.known[s.ID] = seen
				l.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// askLevel asks a server, through peers at the address addrs knows for
// it, which entry level its build applies. A build from before levels
// answers without one: it applies LevelKeys.
func askLevel(peers *peerClient, addrs *addressBook) func(ctx context.Context, s raft.Server) (int, bool) {
	return func(ctx context.Context, s raft.Server) (int, bool) {
		timeout := time.Second
		if d, ok := ctx.Deadline(); ok {
			timeout = min(timeout, time.Until(d))
		}
		info, err := peers.nodeInfo(string(addrs.resolve(s.ID, s.Address)), timeout)
		if err != nil {
			return 0, false
		}
		return max(info.EntryLevel, fsm.LevelKeys), true
	}
}

// watch asks every server its level every levelPoll (every second until
// each has answered once), and keeps the answers in the data dir, until
// ctx ends.
func (l *entryLevels) watch(ctx context.Context) {
	t := time.NewTicker(levelRetry)
	defer t.Stop()
	for {
		if servers, err := l.servers(); err == nil {
			ask, cancel := context.WithTimeout(ctx, 2*levelRetry)
			every := levelPoll
			if !l.allAnswered(servers) {
				every = levelRetry
			}
			l.askBelow(ask, servers, int(^uint(0)>>1), every)
			cancel()
			if err := l.save(); err != nil {
				l.log.Warn("keep the servers' entry levels", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (l *entryLevels) allAnswered(servers []raft.Server) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range servers {
		if s.ID != l.self && l.known[s.ID].level == 0 {
			return false
		}
	}
	return true
}

// load reads what the servers reported before this start.
func (l *entryLevels) load() {
	l.known, l.saved = map[raft.ServerID]levelSeen{}, map[raft.ServerID]int{}
	data, err := os.ReadFile(filepath.Join(l.dir, levelsFile))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			l.log.Warn("read the servers' entry levels", "err", err)
		}
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		id, level, ok := strings.Cut(line, " ")
		if v, err := strconv.Atoi(level); ok && err == nil && v >= fsm.LevelKeys {
			l.known[raft.ServerID(id)] = levelSeen{level: v}
			l.saved[raft.ServerID(id)] = v
		}
	}
}

// save writes what the servers reported when it changed.
func (l *entryLevels) save() error {
	l.mu.Lock()
	now := map[raft.ServerID]int{}
	for id, seen := range l.known {
		if seen.level > 0 {
			now[id] = seen.level
		}
	}
	changed := len(now) != len(l.saved)
	for id, v := range now {
		changed = changed || l.saved[id] != v
	}
	l.saved = now
	l.mu.Unlock()
	if !changed {
		return nil
	}
	var lines []string
	for id, v := range now {
		lines = append(lines, string(id)+" "+strconv.Itoa(v))
	}
	slices.Sort(lines)
	return ownfile.Write(filepath.Join(l.dir, levelsFile), []byte(strings.Join(lines, "\n")+"\n"))
}

// raiser is the leader duty that raises the cluster (fsm.RaiseCommand) to
// the highest level every server of the configuration applies, at once
// and every levelPoll, so that rules that change what an existing entry
// does start at one point of the log on every node. Once raised, a server
// of an older build can no longer join (canApplyState).
type raiser struct {
	state   *fsm.FSM
	levels  *entryLevels
	propose func(ctx context.Context, cmd fsm.Command) error
	log     *slog.Logger
}

// run raises until ctx ends.
func (r raiser) run(ctx context.Context) {
	tick := time.NewTicker(levelPoll)
	defer tick.Stop()
	for {
		r.raise(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (r raiser) raise(ctx context.Context) {
	for level := fsm.EntryLevel; level >= fsm.LevelBounds && level > r.state.Raised(); level-- {
		if r.levels.require(ctx, level) != nil {
			continue
		}
		if err := r.propose(ctx, fsm.RaiseCommand{To: level}); err != nil {
			r.log.Warn("raise the cluster's level; the next poll retries", "level", level, "err", err)
			return
		}
		r.log.Info("every server applies a new level: the cluster is raised to it", "level", level)
		return
	}
}

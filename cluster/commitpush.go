package cluster

import (
	"sync"
	"time"
)

// A node that relayed creates answers its clients only once it has applied
// them itself (read-your-writes where the answer was given), and a follower
// learns that an entry committed from the leader's next append. Raft sends
// one at once when an entry is proposed and otherwise only after its
// commit timeout (50-100 ms): under light load that timeout would be the
// latency of every relayed create. The commit pusher closes that gap: after
// an entry holding relayed creates is applied, it proposes a barrier, whose
// append carries the commit index of everything applied before it — at
// once when the proposer holds nothing to propose, otherwise after pushGrace
// unless the proposer proposed an entry meanwhile, which does the same.
// Barriers in flight are one at a time: entries applied meanwhile share the
// next one.

// pushGrace is how long the pusher waits for an entry the proposer is
// about to propose (creates are queued, or a batch waits for its turn)
// before it proposes a barrier after all; with nothing queued it proposes
// one at once.
const pushGrace = time.Millisecond

// commitPusher records whether an applied entry with relayed creates has
// been followed by a proposal yet.
type commitPusher struct {
	mu   sync.Mutex
	owed bool
	wake chan struct{}
}

func newCommitPusher() *commitPusher {
	return &commitPusher{wake: make(chan struct{}, 1)}
}

// proposing is called just before the proposer proposes a batch: the
// entry's append carries the commit index of every entry applied so far.
func (p *commitPusher) proposing() {
	p.mu.Lock()
	p.owed = false
	p.mu.Unlock()
}

// applied is called once an entry holding relayed creates was applied.
func (p *commitPusher) applied() {
	p.mu.Lock()
	p.owed = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default: // a wake is pending
	}
}

// take reports whether a proposal is owed, and clears it: the caller
// proposes one.
func (p *commitPusher) take() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	owed := p.owed
	p.owed = false
	return owed
}

// run proposes the owed barriers, one at a time: owed entries applied
// while a barrier is in flight share the next one. busy reports whether
// the proposer is about to propose an entry. It is a leader duty, until
// stop (leadership ends): only a leader applies relayed creates, and only
// a leader's barrier carries a commit index.
func (p *commitPusher) run(stop <-chan struct{}, busy func() bool, barrier func()) {
	grace := time.NewTimer(pushGrace)
	grace.Stop()
	for {
		select {
		case <-p.wake:
		case <-stop:
			return
		}
		if busy() {
			grace.Reset(pushGrace)
			select {
			case <-grace.C:
			case <-stop:
				return
			}
		}
		if p.take() {
			barrier()
		}
	}
}

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
// once when the batcher holds nothing to propose, otherwise after pushGrace
// unless the batcher proposed an entry meanwhile, which does the same.
// Barriers in flight are one at a time: entries applied meanwhile share the
// next one.

// pushGrace is how long the pusher waits for an entry the batcher is about
// to propose (creates are queued, or a batch waits for its turn) before it
// proposes a barrier after all; with nothing queued it proposes one at once.
const pushGrace = time.Millisecond

// commitPusher records whether an applied entry with relayed creates has
// been followed by a proposal yet, and how many batches the batcher has
// formed but not proposed.
type commitPusher struct {
	mu     sync.Mutex
	owed   bool
	formed int
	wake   chan struct{}
}

func newCommitPusher() *commitPusher {
	return &commitPusher{wake: make(chan struct{}, 1)}
}

// forming is called when the batcher has formed a batch to propose here.
func (p *commitPusher) forming() {
	p.mu.Lock()
	p.formed++
	p.mu.Unlock()
}

// proposing is called just before the batcher proposes a batch it formed:
// the entry's append carries the commit index of every entry applied so
// far.
func (p *commitPusher) proposing() {
	p.mu.Lock()
	p.owed = false
	p.formed--
	p.mu.Unlock()
}

// imminent reports whether the batcher holds a formed batch.
func (p *commitPusher) imminent() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.formed > 0
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

// runCommitPusher proposes the owed barriers, one at a time: owed
// entries applied while a barrier is in flight share the next one. It runs
// under the leader loop, until stop (leadership ends) or the node closes:
// only a leader applies relayed creates, and only a leader's barrier
// carries a commit index.
func (n *Node) runCommitPusher(p *commitPusher, stop <-chan struct{}) {
	grace := time.NewTimer(pushGrace)
	grace.Stop()
	for {
		select {
		case <-p.wake:
		case <-stop:
			return
		case <-n.closing:
			return
		}
		if len(n.creates) > 0 || p.imminent() {
			grace.Reset(pushGrace)
			select {
			case <-grace.C:
			case <-stop:
				return
			case <-n.closing:
				return
			}
		}
		if p.take() {
			_ = n.raft.Barrier(visibilityWait).Error() // the append matters, not the outcome
		}
	}
}

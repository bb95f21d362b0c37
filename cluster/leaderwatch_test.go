package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

// TestLeaderlessSince: the node's clock of how long it has known no leader
// starts when it loses the leader it knew, or when it starts an election
// without having known one, keeps its start while no leader comes, and
// stops with the next leader. A node that has just started and is still
// listening for a leader has not been without one.
func TestLeaderlessSince(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	earlier := now.Add(-3 * time.Second).UnixNano()
	tests := []struct {
		name    string
		since   int64
		leader  bool
		looking bool
		want    int64
	}{
		{"a leader is known", 0, true, true, 0},
		{"a leader again after going without", earlier, true, true, 0},
		{"just started, not electing yet", 0, false, false, 0},
		{"the leader just lost", 0, false, true, now.UnixNano()},
		{"still no leader", earlier, false, true, earlier},
	}
	for _, tt := range tests {
		if got := leaderlessSince(tt.since, tt.leader, tt.looking, now); got != tt.want {
			t.Errorf("%s: leaderless since %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestPatienceLeft is the decision a client's request makes when it finds
// no leader: wait through an election that has just begun, give up at once
// on a node that has gone longer than an election takes without a leader.
func TestPatienceLeft(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	const patience = 1500 * time.Millisecond
	ago := func(d time.Duration) int64 { return now.Add(-d).UnixNano() }
	tests := []struct {
		name        string
		since       int64
		wantBounded bool
		wantLeft    time.Duration // meaningful when bounded
		wantGiveUp  bool
	}{
		{"a leader is known, or the node has not begun to look", 0, false, 0, false},
		{"an election just started", ago(100 * time.Millisecond), true, 1400 * time.Millisecond, false},
		{"an election timeout without a leader", ago(500 * time.Millisecond), true, time.Second, false},
		{"exactly as long as an election may take", ago(patience), true, 0, true},
		{"the leader last seen long ago", ago(time.Minute), true, patience - time.Minute, true},
	}
	for _, tt := range tests {
		left, bounded := patienceLeft(tt.since, patience, now)
		if bounded != tt.wantBounded || (bounded && (left != tt.wantLeft || (left <= 0) != tt.wantGiveUp)) {
			t.Errorf("%s: %v left (bounded %v), want %v (bounded %v, give up %v)", tt.name, left, bounded, tt.wantLeft, tt.wantBounded, tt.wantGiveUp)
		}
	}
}

// TestPatienceFollowsRaftsTimeouts: with linkraft's Raft timeouts a node
// that has gone an election timeout without a leader waits at most
// 1 s more for one, within the 1.5 s in which it promises an answer.
func TestPatienceFollowsRaftsTimeouts(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir())
	c := n.raft.ReloadableConfig()
	patience := n.leadership.patience()
	if patience != electionPatience(c.HeartbeatTimeout, c.ElectionTimeout) {
		t.Fatalf("patience %v, want electionPatience(%v, %v)", patience, c.HeartbeatTimeout, c.ElectionTimeout)
	}
	if waits := patience - c.ElectionTimeout; waits > 1500*time.Millisecond {
		t.Fatalf("a node an election timeout (%v) without a leader still waits %v for one", c.ElectionTimeout, waits)
	}
	if patience < 2*c.HeartbeatTimeout+c.ElectionTimeout {
		t.Fatalf("patience %v is shorter than the slowest voter's notice (%v) and one round of voting (%v)", patience, 2*c.HeartbeatTimeout, c.ElectionTimeout)
	}
}

// TestClientRequestsWithoutALeader: on a node whose only peer (the leader)
// is gone, a create, a miss and a forwarded request give up at once once
// the node has gone longer than an election takes without a leader, and
// the miss is not called a confirmed one; while an election has just begun
// they still wait for the next leader, until their caller gives up. The
// write timeout is 20 s, so a request that waited for it could not pass
// for one that gave up (that takes no time: the errors say which).
func TestClientRequestsWithoutALeader(t *testing.T) {
	t.Parallel()
	leader, follower := openPair(t, 20*time.Second)
	leader.Close() // two voters, one left: no majority, no leader ever again
	waitFor(t, func() bool { return follower.leadership.leaderless.Load() != 0 })

	const callerWait = 300 * time.Millisecond // the caller's own bound, far below the patience
	ops := []struct {
		name string
		do   func(ctx context.Context) error
	}{
		{"create", func(ctx context.Context) error {
			_, err := follower.Create(ctx, fsm.CreateRequest{URL: "https://example.com/leaderless", Workspace: "default", CodeLength: 7})
			return err
		}},
		{"miss", func(ctx context.Context) error {
			_, err := follower.Lookup(ctx, "nosuchcode")
			if errors.Is(err, fsm.ErrNotFound) {
				t.Errorf("miss without a leader: %v, a confirmed miss; want it unconfirmed", err)
			}
			return err
		}},
		{"forward", func(ctx context.Context) error {
			var timeout time.Duration // 0: the write timeout
			if deadline, ok := ctx.Deadline(); ok {
				timeout = time.Until(deadline)
			}
			var req fasthttp.Request
			var resp fasthttp.Response
			req.SetRequestURI("http://node/api/v1/urls/x")
			req.Header.SetMethod(fasthttp.MethodDelete)
			_, err := follower.Forward(&req, &resp, ForwardOptions{Timeout: timeout})
			return err
		}},
		{"propose", func(ctx context.Context) error {
			_, err := follower.Propose(ctx, fsm.DeleteCommand{Code: "x"}, ProposeOptions{})
			return err
		}},
	}
	tests := []struct {
		name          string
		leaderlessFor time.Duration
		giveUp        bool
	}{
		{"the leader last seen a minute ago", time.Minute, true},
		{"an election just started", 0, false},
	}
	for _, tt := range tests {
		for _, op := range ops {
			// Ages the node's clock (run keeps it while no leader comes).
			follower.leadership.leaderless.Store(time.Now().Add(-tt.leaderlessFor).UnixNano())
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if !tt.giveUp {
				ctx, cancel = context.WithTimeout(ctx, callerWait)
			}
			start := time.Now()
			err := op.do(ctx)
			took := time.Since(start)
			cancel()
			t.Logf("%s: %s answered after %v: %v", tt.name, op.name, took.Round(time.Millisecond), err)
			switch {
			case err == nil:
				t.Errorf("%s: %s without a leader succeeded", tt.name, op.name)
			case tt.giveUp && !errors.Is(err, errElectionOverdue):
				t.Errorf("%s: %s: %v, want it to give up for want of a leader (%v)", tt.name, op.name, err, errElectionOverdue)
			case !tt.giveUp && errors.Is(err, errElectionOverdue):
				t.Errorf("%s: %s gave up (%v) instead of waiting for the next leader until its caller's %v ran out", tt.name, op.name, err, callerWait)
			}
		}
	}
}

package cluster

import (
	"errors"
	"fmt"
	"testing"

	"github.com/linkraft/linkraft/fsm"
)

func TestOutcomeOf(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, outcomeOK},
		{fmt.Errorf("wrapped: %w", ErrNoLeader), outcomeNoLeader},
		{errLeaderChanged, outcomeNoLeader},
		{errNotApplied, outcomeNoLeader},
		{fmt.Errorf("%w: no answer", ErrTimeout), outcomeTimeout},
		// A leader that refuses the request itself is an error, even when
		// the caller reports it as "no leader" to its client.
		{fmt.Errorf("%w: %w", ErrNoLeader, ErrRefused), outcomeError},
		{errors.New("boom"), outcomeError},
	}
	for _, tt := range tests {
		if got := outcomeOf(tt.err); got != tt.want {
			t.Errorf("outcomeOf(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
}

func TestConfirmResult(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, "found"},
		{fsm.ErrNotFound, "not_found"},
		{fmt.Errorf("ask the leader: %w", fsm.ErrNotFound), "not_found"},
		{fmt.Errorf("read index: %w", ErrTimeout), "unconfirmed"},
		{ErrNoLeader, "unconfirmed"},
	}
	for _, tt := range tests {
		if got := confirmResult(tt.err); got != tt.want {
			t.Errorf("confirmResult(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
}

func TestSetLags(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	tests := []struct {
		name    string
		servers []Server
		want    []*uint64
	}{
		{"leader and followers answered",
			[]Server{{ID: "a", Leader: true, AppliedIndex: u(100)}, {ID: "b", AppliedIndex: u(90)}, {ID: "c", AppliedIndex: u(100)}},
			[]*uint64{u(0), u(10), u(0)}},
		{"a follower sampled after the leader is no lag",
			[]Server{{ID: "a", Leader: true, AppliedIndex: u(100)}, {ID: "b", AppliedIndex: u(103)}},
			[]*uint64{u(0), u(0)}},
		{"a server that did not answer has no lag",
			[]Server{{ID: "a", Leader: true, AppliedIndex: u(100)}, {ID: "b"}},
			[]*uint64{u(0), nil}},
		{"no leader answered: no lags",
			[]Server{{ID: "a", Leader: true}, {ID: "b", AppliedIndex: u(7)}},
			[]*uint64{nil, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setLags(tt.servers)
			for i, s := range tt.servers {
				got, want := s.ReplicationLag, tt.want[i]
				if (got == nil) != (want == nil) || (got != nil && *got != *want) {
					t.Errorf("server %s: lag %v, want %v", s.ID, deref(got), deref(want))
				}
			}
		})
	}
}

func deref(p *uint64) any {
	if p == nil {
		return nil
	}
	return *p
}

package membership

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// fsmProposer applies membership's entries to a real state machine, in
// order, as Raft would.
type fsmProposer struct {
	f     *fsm.FSM
	index uint64
}

func (p *fsmProposer) ApplyOwn(cmd fsm.Command, what string) error {
	p.index++
	resp := p.f.Apply(&raft.Log{Index: p.index, Term: 1, Type: raft.LogCommand, Data: cmd.Encode()})
	if err, _ := resp.(error); err != nil {
		return fmt.Errorf("apply %s: %w", what, err)
	}
	return nil
}

func (p *fsmProposer) Apply(cmd fsm.Command) error { return p.ApplyOwn(cmd, "entry") }

func (p *fsmProposer) Propose(_ context.Context, cmd fsm.Command) error {
	return p.ApplyOwn(cmd, "entry")
}

// TestJoinOfARemovedServer: an operator's join of a removed server is let
// in only on a data dir that says it is another than the one removed, and
// then forgets the record (in the state machine itself).
func TestJoinOfARemovedServer(t *testing.T) {
	t.Parallel()
	state := fsm.New()
	p := &fsmProposer{f: state}
	if err := p.ApplyOwn(fsm.InitCommand{}, "init"); err != nil {
		t.Fatal(err)
	}
	if err := p.ApplyOwn(fsm.RaiseCommand{To: fsm.EntryLevel}, "raise"); err != nil {
		t.Fatal(err)
	}
	f := newFixture(voter("n1", n1))
	f.Membership.state, f.Membership.proposer = state, p
	cases := []struct {
		name       string
		removedInc string
		joiner     string
		admitted   bool
	}{
		{"the data dir removed", "aaaa", "aaaa", false},
		{"a data dir that does not say which it is", "aaaa", "", false},
		{"a new data dir", "aaaa", "bbbb", true},
		{"any data dir that says which it is, when the removed one is unknown", "", "bbbb", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := p.ApplyOwn(fsm.ServerRemovalCommand{ID: "r9", Incarnation: c.removedInc}, "removal record"); err != nil {
				t.Fatal(err)
			}
			err := f.admitRemoved("r9", c.removedInc, c.joiner)
			if admitted := err == nil; admitted != c.admitted || err != nil && !errors.Is(err, ErrRemovedServer) {
				t.Fatalf("admitRemoved: %v, want admitted %v", err, c.admitted)
			}
			if _, kept := state.Removed("r9"); kept == c.admitted {
				t.Errorf("record kept %v after the join was admitted %v", kept, c.admitted)
			}
			if err != nil && !errors.Is(err, ErrServerConflict) {
				t.Errorf("refusal %v is no conflict (409)", err)
			}
		})
	}
}

package cluster

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// TestRaiserWaitsForEveryServer: the cluster is raised to this build's
// level only once every server of the configuration reports it, never
// while one of them (a voter or a replica) runs an older build, and only
// once.
func TestRaiserWaitsForEveryServer(t *testing.T) {
	t.Parallel()
	reported := map[raft.ServerID]int{"n2": fsm.LevelRestoreAudit, "r1": fsm.EntryLevel}
	levels := &entryLevels{self: "n1", dir: t.TempDir(), log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		servers: func() ([]raft.Server, error) {
			return []raft.Server{{ID: "n1"}, {ID: "n2"}, {ID: "r1", Suffrage: raft.Nonvoter}}, nil
		},
		ask: func(_ context.Context, s raft.Server) (int, bool) { return reported[s.ID], true },
	}
	levels.load()
	state := fsm.New()
	proposed := 0
	r := raiser{state: state, levels: levels, log: levels.log, propose: func(_ context.Context, cmd fsm.Command) error {
		proposed++
		if err, _ := state.ApplyBatch([]*raft.Log{{Index: uint64(proposed), Type: raft.LogCommand, Data: cmd.Encode()}})[0].(error); err != nil {
			t.Fatalf("apply %T: %v", cmd, err)
		}
		return nil
	}}
	r.raise(context.Background())
	if proposed != 0 || state.Raised() != 0 {
		t.Fatalf("raised to %d while n2 reports level %d", state.Raised(), fsm.LevelRestoreAudit)
	}
	reported["n2"] = fsm.EntryLevel
	levels.known["n2"] = levelSeen{} // asked again at once
	r.raise(context.Background())
	r.raise(context.Background())
	if proposed != 1 || state.Raised() != fsm.EntryLevel {
		t.Fatalf("%d raises proposed, raised to %d; want one, to %d", proposed, state.Raised(), fsm.EntryLevel)
	}
}

// TestMembershipIsAudited: on a raised cluster, a join and a removal
// appear in the security audit with the key that asked for them.
func TestMembershipIsAudited(t *testing.T) {
	t.Parallel()
	leader := openMember(t, "n1", true, 5*time.Second)
	waitFor(t, func() bool { return leader.NotReady() == "" && leader.FSM().Raised() == fsm.EntryLevel })
	follower := openMember(t, "n2", false, 5*time.Second)
	if err := leader.members.AddServer("n2", follower.cfg.RaftAddr, "", false, "opskey000001"); err != nil {
		t.Fatalf("join: %v", err)
	}
	if err := leader.members.RemoveServer("n2", "opskey000002"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	got := leader.FSM().Audit(fsm.AuditQuery{Kind: fsm.AuditSecurity, Limit: 10})
	if len(got) != 2 || got[0].Action != fsm.AuditMemberLeave || got[0].KeyID != "opskey000002" ||
		got[1].Action != fsm.AuditMemberJoin || got[1].KeyID != "opskey000001" || got[1].Subject != "n2" {
		t.Fatalf("security audit: %+v; want the leave, then the join, each with its key", got)
	}
}

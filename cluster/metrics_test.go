package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/linkraft/linkraft/fsm"
)

func TestOutcomeOf(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// TestLagMonitor: each follower's gauge is the leader's applied index less
// the follower's; a follower that stops answering keeps its last index, so
// its lag grows; one that left the configuration loses its series.
func TestLagMonitor(t *testing.T) {
	t.Parallel()
	servers := []raft.Server{{ID: "n1"}, {ID: "n2"}, {ID: "n3"}}
	answers := map[string]uint64{"n2": 90, "n3": 100}
	own := uint64(100)
	m := &lagMonitor{
		gauge:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lag"}, []string{"server_id"}),
		servers: func() ([]raft.Server, error) { return servers, nil },
		others:  func(context.Context, []raft.Server) map[string]uint64 { return maps.Clone(answers) },
		own:     func() uint64 { return own },
	}
	lagOf := func(id string) float64 {
		g, err := m.gauge.GetMetricWithLabelValues(id)
		if err != nil {
			t.Fatal(err)
		}
		var out dto.Metric
		if err := g.Write(&out); err != nil {
			t.Fatal(err)
		}
		return out.GetGauge().GetValue()
	}
	known := map[string]uint64{}
	m.measure(known)
	if got := lagOf("n2"); got != 10 {
		t.Fatalf("n2 lag %v, want 10", got)
	}
	delete(answers, "n2") // n2 stops answering while the leader moves on
	own = 150
	m.measure(known)
	if got := lagOf("n2"); got != 60 {
		t.Fatalf("n2 lag after it went quiet: %v, want 60", got)
	}
	servers = servers[:2] // n3 leaves
	m.measure(known)
	if _, ok := known["n3"]; ok {
		t.Fatal("n3 left the configuration and is still measured")
	}
	if n := seriesOf(m.gauge); n != 1 {
		t.Fatalf("%d series after n3 left, want 1 (n2)", n)
	}
}

// seriesOf is the number of series a collector holds.
func seriesOf(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 16)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

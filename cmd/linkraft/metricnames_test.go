package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	gometrics "github.com/hashicorp/go-metrics/compat"
)

func TestPromNames(t *testing.T) {
	for _, c := range []struct {
		key   string
		kind  metricKind
		name  string
		scale float32
	}{
		{"raft.commitTime", sampleKind, "raft_commit_time_seconds", 0.001},
		{"raft.rpc.appendEntries.storeLogs", sampleKind, "raft_rpc_append_entries_store_logs_seconds", 0.001},
		{"raft.net.getRPCType", sampleKind, "raft_net_get_rpc_type_seconds", 0.001},
		{"raft.fsm.store_config", sampleKind, "raft_fsm_store_config_seconds", 0.001},
		{"raft.boltdb.logsPerBatch", sampleKind, "raft_boltdb_logs_per_batch", 1},
		{"raft.boltdb.logSize", sampleKind, "raft_boltdb_log_size_bytes", 1},
		{"raft.state.leader", counterKind, "raft_state_leader_total", 1},
		{"memberlist.udp.sent", counterKind, "memberlist_udp_sent_bytes_total", 1},
		{"raft.peers", gaugeKind, "raft_peers", 1},
		{"raft.fsm.lastRestoreDuration", gaugeKind, "raft_fsm_last_restore_duration_seconds", 0.001},
		{"memberlist.node.instances", gaugeKind, "memberlist_node_instances", 1},
	} {
		name, scale := promName(strings.Split(c.key, "."), c.kind)
		if name != c.name || scale != c.scale {
			t.Errorf("promName(%s, %d) = %s, %v; want %s, %v", c.key, c.kind, name, scale, c.name, c.scale)
		}
	}
}

func TestPromNamesLabels(t *testing.T) {
	in := []gometrics.Label{{Name: "rpcType", Value: "AppendEntries"}, {Name: "peer_id", Value: "n1"}}
	got := newPromNames(nil).snakeLabels(in)
	if got[0].Name != "rpc_type" || got[0].Value != "AppendEntries" || got[1].Name != "peer_id" {
		t.Errorf("snakeLabels = %v", got)
	}
	if in[0].Name != "rpcType" {
		t.Errorf("snakeLabels changed its argument: %v", in)
	}
}

// recordingSink keeps what promNames passes on.
type recordingSink struct {
	gometrics.BlackholeSink
	got []string
}

func (s *recordingSink) AddSampleWithLabels(key []string, val float32, labels []gometrics.Label) {
	line := strings.Join(key, ".")
	for _, l := range labels {
		line += " " + l.Name + "=" + l.Value
	}
	s.got = append(s.got, line+" "+strconv.FormatFloat(float64(val), 'g', -1, 32))
}

// TestPromNamesRemembered: a name worked out once is passed on the same
// every time after, and a label's name is not taken for a metric's.
func TestPromNamesRemembered(t *testing.T) {
	sink := &recordingSink{}
	p := newPromNames(sink)
	labels := []gometrics.Label{{Name: "rpcType", Value: "AppendEntries"}}
	for range 2 {
		p.AddSampleWithLabels([]string{"raft", "commitTime"}, 2000, nil)
		p.AddSampleWithLabels([]string{"raft", "net", "getRPCType"}, 2, labels)
		p.AddSampleWithLabels([]string{"rpcType"}, 3, nil)
	}
	want := []string{"raft_commit_time_seconds 2", "raft_net_get_rpc_type_seconds rpc_type=AppendEntries 0.002",
		"rpc_type_seconds 0.003"}
	want = append(want, want...)
	if !slices.Equal(sink.got, want) {
		t.Fatalf("passed on %q, want %q", sink.got, want)
	}
}

// BenchmarkPromNames: one raft timing with a label, renamed and passed on.
func BenchmarkPromNames(b *testing.B) {
	p := newPromNames(&gometrics.BlackholeSink{})
	key := []string{"raft", "replication", "appendEntries", "rpc"}
	labels := []gometrics.Label{{Name: "peerId", Value: "n2"}}
	for b.Loop() {
		p.AddSampleWithLabels(key, 1, labels)
	}
}

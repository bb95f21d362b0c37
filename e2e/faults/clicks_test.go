package faults

import "testing"

func TestCheckClicks(t *testing.T) {
	ms := int64(1e6)
	bounds := ClickBounds{FlushInterval: 200 * ms, Margin: 2000 * ms}
	redirect := func(node string, at int64, status int, outcome Outcome) Op {
		return Op{Kind: Redirect, Code: "c", Node: node, Invoke: at, Complete: at + ms, Status: status, Outcome: outcome}
	}
	acked := []Op{redirect("n1", 1000*ms, 302, Ok), redirect("n2", 1000*ms, 302, Ok), redirect("n1", 9000*ms, 302, Ok)}
	tests := []struct {
		name    string
		ops     []Op
		count   uint64
		kills   []Kill
		windows []Window
		bad     bool
	}{
		{"every click counted", acked, 3, nil, nil, false},
		{"a click lost without a kill", acked, 2, nil, nil, true},
		{"a click counted twice", acked, 4, nil, nil, true},
		{"indeterminate redirects may count", append(acked, redirect("n2", 5000*ms, 0, Info)), 4, nil, nil, false},
		{"lost to a kill right after", acked, 2, []Kill{{Node: "n1", At: 1500 * ms}}, nil, false},
		{"a kill long after the flush excuses nothing", acked, 2, []Kill{{Node: "n1", At: 6000 * ms}}, nil, true},
		{"a kill at the end of a window the click fell in", acked, 2,
			[]Kill{{Node: "n1", At: 6000 * ms}}, []Window{{Start: 500 * ms, End: 5000 * ms, Nodes: []string{"n1"}}}, false},
		{"a window on another node excuses nothing", acked, 2,
			[]Kill{{Node: "n1", At: 6000 * ms}}, []Window{{Start: 500 * ms, End: 5000 * ms, Nodes: []string{"n3"}}}, true},
		{"404s and failures do not count", append(acked, redirect("n1", 7000*ms, 404, Ok)), 3, nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckClicks(tt.ops, map[string]uint64{"c": tt.count}, tt.kills, tt.windows, bounds)
			if (len(got) > 0) != tt.bad {
				t.Fatalf("anomalies %v, want some: %v", got, tt.bad)
			}
		})
	}
}

func TestExportClicks(t *testing.T) {
	counts, err := ExportClicks([]byte(`{"short_code":"a","click_count":3}` + "\n\n" + `{"short_code":"b","click_count":0}` + "\n"))
	if err != nil || counts["a"] != 3 || counts["b"] != 0 || len(counts) != 2 {
		t.Fatalf("counts %v, err %v", counts, err)
	}
}

func TestCheckClickSeries(t *testing.T) {
	counts := map[string]uint64{"a": 5, "b": 0}
	tests := []struct {
		name   string
		series map[string]map[string][]uint64
		want   int
	}{
		{"agree", map[string]map[string][]uint64{"n1": {"a": {0, 2, 3}, "b": {0, 0, 0}}, "n2": {"a": {0, 2, 3}}}, 0},
		{"a click missing from the hours", map[string]map[string][]uint64{"n1": {"a": {0, 2, 2}}}, 1},
		{"a click counted in two hours", map[string]map[string][]uint64{"n1": {"b": {1, 0, 0}}}, 1},
		{"nodes disagree on the hour", map[string]map[string][]uint64{"n1": {"a": {0, 2, 3}}, "n2": {"a": {0, 3, 2}}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CheckClickSeries(counts, tt.series); len(got) != tt.want {
				t.Fatalf("%d anomalies, want %d: %v", len(got), tt.want, got)
			}
		})
	}
}

func TestCheckBreakdowns(t *testing.T) {
	counts := map[string]uint64{"a": 5, "b": 2}
	good := func() map[string]Breakdown {
		return map[string]Breakdown{
			"a by browser": {Code: "a", By: "browser", Groups: map[string]uint64{"chrome": 3, "safari": 2}},
			"b by browser": {Code: "b", By: "browser", Groups: map[string]uint64{"firefox": 2}},
		}
	}
	tests := []struct {
		name   string
		change func(n2 map[string]Breakdown)
		want   int
	}{
		{"agreeing nodes", func(map[string]Breakdown) {}, 0},
		{"a node's groups differ, same sum", func(n2 map[string]Breakdown) {
			n2["a by browser"] = Breakdown{Code: "a", By: "browser", Groups: map[string]uint64{"chrome": 2, "safari": 3}}
		}, 1},
		{"a node counts a click twice", func(n2 map[string]Breakdown) {
			n2["b by browser"] = Breakdown{Code: "b", By: "browser", Groups: map[string]uint64{"firefox": 3}}
		}, 2}, // differs from n1, and its sum is off
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n2 := good()
			tt.change(n2)
			got := CheckBreakdowns(counts, map[string]map[string]Breakdown{"n1": good(), "n2": n2})
			if len(got) != tt.want {
				t.Fatalf("%d anomalies, want %d: %v", len(got), tt.want, got)
			}
		})
	}
}

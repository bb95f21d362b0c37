package clicks

import (
	"fmt"
	"maps"
	"testing"

	"github.com/linkraft/linkraft/fsm"
)

// TestTallyCountsEveryPair: whatever the mix of codes and visitors
// (one of each, one code seen by more kinds of visitor than its list
// holds, many codes), the tally holds exactly what a map keyed by code and
// visitor would, also after a reset and a second interval reusing its
// entries.
func TestTallyCountsEveryPair(t *testing.T) {
	visitor := func(i int) fsm.Visitor {
		return fsm.Visitor{Referrer: fmt.Sprintf("r%d.example", i%5), Country: [2]byte{'A' + byte(i%3), 'Z'},
			Browser: fsm.Browser(i % 3), Device: fsm.DeviceClass(i % 2)}
	}
	tests := []struct {
		name            string
		codes, visitors int
		clicks          int
	}{
		{"one code, one visitor", 1, 1, 10},
		{"one code, more visitors than listed", 1, 3 * listedVisitors, 500},
		{"many codes, few visitors", 200, 2, 2000},
		{"many codes, many visitors", 50, 30, 5000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl := newTally()
			for round := range 2 {
				want := map[codeVisitor]uint64{}
				var total uint64
				for i := range tc.clicks {
					key := codeVisitor{fmt.Sprintf("c%d-%d", round, (i*7)%tc.codes), visitor((i * 13) % tc.visitors)}
					n := uint64(1 + i%3)
					tl.add(key.code, key.visitor, n)
					want[key] += n
					total += n
				}
				if got := tl.counts(); !maps.Equal(got, want) {
					t.Fatalf("round %d: tally holds %d pairs, want %d (or counts differ)", round, len(got), len(want))
				}
				if tl.len() != len(want) || tl.total() != total {
					t.Fatalf("round %d: len %d total %d, want %d and %d", round, tl.len(), tl.total(), len(want), total)
				}
				tl.reset()
				if tl.len() != 0 || tl.total() != 0 {
					t.Fatalf("round %d: not empty after reset", round)
				}
			}
		})
	}
}

// A node in a steady state, counting the same codes and visitors interval
// after interval, counts without allocating.
func TestTallyReusesItsMemory(t *testing.T) {
	tl := newTally()
	codes := []string{"a", "b", "c"}
	visitors := []fsm.Visitor{{}, {Referrer: "x.example"}, {Bot: fsm.Preview}}
	interval := func() {
		for i := range 30 {
			tl.add(codes[i%3], visitors[(i/3)%3], 1)
		}
		tl.reset()
	}
	interval()
	if n := testing.AllocsPerRun(20, interval); n != 0 {
		t.Errorf("an interval allocates %v times", n)
	}
}

package faults

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Availability is how long creates failed after one fault.
type Availability struct {
	Kind string
	// Ref is the fault's start (kill, pause) or heal (partitions), in ns
	// since the run started.
	Ref int64
	// Gap is the time from Ref to the completion of the first create
	// invoked at or after Ref that was answered 201; -1 when none was.
	Gap time.Duration
}

// WriteAvailability measures, for each fault reference time, the time to
// the first acknowledged unique create invoked afterwards.
func WriteAvailability(ops []Op, kinds []string, refs []int64) []Availability {
	out := make([]Availability, len(refs))
	for i, ref := range refs {
		out[i] = Availability{Kind: kinds[i], Ref: ref, Gap: -1}
		for _, op := range ops {
			if op.Kind == Create && op.Status == 201 && op.Invoke >= ref {
				if g := time.Duration(op.Complete - ref); out[i].Gap < 0 || g < out[i].Gap {
					out[i].Gap = g
				}
			}
		}
	}
	return out
}

// WriteSummary prints operations by kind and outcome, faults by kind and
// the write-availability gaps.
func WriteSummary(w io.Writer, ops []Op, avail []Availability) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "operation\tok\tfail\tinfo\tstatuses\t")
	for _, k := range []Kind{Create, Dedupe, Custom, Redirect, Read, Edit, Delete, Final} {
		counts, statuses := map[Outcome]int{}, map[int]int{}
		for _, op := range ops {
			if op.Kind == k {
				counts[op.Outcome]++
				statuses[op.Status]++
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t\n", k, counts[Ok], counts[Fail], counts[Info], statusList(statuses))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault\tcount\twrite gaps (first 201 after start / heal)\tmax\t")
	byKind := map[string][]time.Duration{}
	for _, a := range avail {
		byKind[a.Kind] = append(byKind[a.Kind], a.Gap)
	}
	for _, k := range keys(byKind) {
		gaps := byKind[k]
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t\n", k, len(gaps), gapList(gaps), gapString(maxGap(gaps)))
	}
	tw.Flush()
}

func statusList(m map[int]int) string {
	var codes []int
	for c := range m {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d:%d", c, m[c]))
	}
	return strings.Join(parts, " ")
}

func gapList(gaps []time.Duration) string {
	parts := make([]string, len(gaps))
	for i, g := range gaps {
		parts[i] = gapString(g)
	}
	return strings.Join(parts, " ")
}

func gapString(g time.Duration) string {
	if g < 0 {
		return "none"
	}
	return g.Round(10 * time.Millisecond).String()
}

func maxGap(gaps []time.Duration) time.Duration {
	m := time.Duration(-1)
	for _, g := range gaps {
		if g < 0 {
			return -1
		}
		m = max(m, g)
	}
	return m
}

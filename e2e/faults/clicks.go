package faults

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// Kill is a kill -9 of one node, dated when the kill had taken effect (ns
// since the run started): a click the node served before then is at risk.
type Kill struct {
	Node string `json:"node"`
	At   int64  `json:"at"`
}

// ClickBounds says when a redirect's click may have been lost: a node
// counts clicks in memory and flushes them every FlushInterval, so a click
// it served is lost if it is killed before a flush that reached a leader.
// Margin covers the flush itself; a click served while the node sat in a
// fault window (cut off, or its leader gone) cannot be flushed before the
// window ends, so it is at risk until the window's end plus Margin.
type ClickBounds struct {
	FlushInterval int64
	Margin        int64
}

// CheckClicks compares each live code's final click count with what the
// history allows: at least the redirects acknowledged with a 302, less
// those whose serving node was killed before it could flush them; at most
// every redirect that may have been served (acknowledged or
// indeterminate). Below means clicks were lost; above means a click was
// counted twice.
func CheckClicks(ops []Op, counts map[string]uint64, kills []Kill, windows []Window, b ClickBounds) []Anomaly {
	lower, upper := map[string]int64{}, map[string]int64{}
	for _, op := range ops {
		if op.Kind != Redirect {
			continue
		}
		switch {
		case op.Outcome == Ok && op.Status == 302:
			upper[op.Code]++
			if !clickAtRisk(op, kills, windows, b) {
				lower[op.Code]++
			}
		case op.Outcome == Info:
			upper[op.Code]++
		}
	}
	var out []Anomaly
	for _, code := range keys(counts) {
		got := int64(counts[code])
		switch {
		case got < lower[code]:
			out = append(out, Anomaly{Checker: "clicks", Code: code, Detail: fmt.Sprintf(
				"%d clicks counted, but %d redirects were acknowledged by nodes that lived to flush them", got, lower[code])})
		case got > upper[code]:
			out = append(out, Anomaly{Checker: "clicks", Code: code, Detail: fmt.Sprintf(
				"%d clicks counted, but at most %d redirects may have been served", got, upper[code])})
		}
	}
	return sortAnomalies(out)
}

// clickAtRisk reports whether the node that served op was killed before it
// can be sure to have flushed the click.
func clickAtRisk(op Op, kills []Kill, windows []Window, b ClickBounds) bool {
	until := op.Complete + b.FlushInterval + b.Margin
	for _, w := range windows {
		if w.Start <= op.Complete && op.Complete <= w.End && windowCovers(w, op.Node) {
			until = max(until, w.End+b.Margin)
		}
	}
	for _, k := range kills {
		if k.Node == op.Node && k.At >= op.Invoke && k.At <= until {
			return true
		}
	}
	return false
}

func windowCovers(w Window, node string) bool {
	if len(w.Nodes) == 0 {
		return true
	}
	for _, n := range w.Nodes {
		if n == node {
			return true
		}
	}
	return false
}

// ExportClicks reads each link's click count from an export.
func ExportClicks(export []byte) (map[string]uint64, error) {
	counts := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(export))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var l struct {
			Code   string `json:"short_code"`
			Clicks uint64 `json:"click_count"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("export line: %w", err)
		}
		counts[l.Code] = l.Clicks
	}
	return counts, sc.Err()
}

// CheckClickSeries compares each node's clicks-over-time with the totals
// the nodes agreed on: every click counted in a link's total must sit in
// exactly one hour of its series (the run is shorter than the day the
// series covers), on every node alike. series holds, per node, each code's
// hourly counts as that node returned them.
func CheckClickSeries(counts map[string]uint64, series map[string]map[string][]uint64) []Anomaly {
	var out []Anomaly
	nodes := slices.Sorted(maps.Keys(series))
	for _, node := range nodes {
		for code, hours := range series[node] {
			if first := series[nodes[0]][code]; first != nil && !slices.Equal(hours, first) {
				out = append(out, Anomaly{Checker: "click-series", Node: node, Code: code,
					Detail: fmt.Sprintf("hours %v differ from %s's %v", hours, nodes[0], first)})
			}
			var sum uint64
			for _, h := range hours {
				sum += h
			}
			if want, ok := counts[code]; ok && sum != want {
				out = append(out, Anomaly{Checker: "click-series", Node: node, Code: code,
					Detail: fmt.Sprintf("hours add up to %d clicks, the total is %d", sum, want)})
			}
		}
	}
	return out
}

// SeriesClicks reads the per-interval counts from a stats answer.
func SeriesClicks(stats []byte) ([]uint64, error) {
	var s struct {
		Series []struct {
			Clicks uint64 `json:"clicks"`
		} `json:"series"`
	}
	if err := json.Unmarshal(stats, &s); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	out := make([]uint64, len(s.Series))
	for i, p := range s.Series {
		out[i] = p.Clicks
	}
	return out, nil
}

// Breakdown is one node's answer for a link's clicks grouped by one
// dimension (browser, referrer, ...): clicks per value.
type Breakdown struct {
	Code, By string
	Groups   map[string]uint64
}

// VisitBreakdown reads the groups of a grouped stats answer.
func VisitBreakdown(stats []byte) (Breakdown, error) {
	var s struct {
		Visits struct {
			Groups []struct {
				Value  string `json:"value"`
				Clicks uint64 `json:"clicks"`
			} `json:"groups"`
		} `json:"visits"`
	}
	if err := json.Unmarshal(stats, &s); err != nil {
		return Breakdown{}, fmt.Errorf("stats: %w", err)
	}
	b := Breakdown{Groups: map[string]uint64{}}
	for _, g := range s.Visits.Groups {
		b.Groups[g.Value] += g.Clicks
	}
	return b, nil
}

// CheckBreakdowns checks that every node answers each breakdown alike,
// and that its groups add up to the link's agreed click total: a click
// batch carries both in one exactly-once entry, so no fault may set them
// apart. All the workload's clicks are people's (bots would not count).
func CheckBreakdowns(counts map[string]uint64, byNode map[string]map[string]Breakdown) []Anomaly {
	var out []Anomaly
	nodes := slices.Sorted(maps.Keys(byNode))
	for _, node := range nodes {
		for key, b := range byNode[node] {
			if first, ok := byNode[nodes[0]][key]; ok && !maps.Equal(b.Groups, first.Groups) {
				out = append(out, Anomaly{Checker: "breakdowns", Node: node, Code: b.Code,
					Detail: fmt.Sprintf("by %s %v differs from %s's %v", b.By, b.Groups, nodes[0], first.Groups)})
			}
			var sum uint64
			for _, n := range b.Groups {
				sum += n
			}
			if want, ok := counts[b.Code]; ok && sum != want {
				out = append(out, Anomaly{Checker: "breakdowns", Node: node, Code: b.Code,
					Detail: fmt.Sprintf("by %s the groups add up to %d clicks, the total is %d", b.By, sum, want)})
			}
		}
	}
	return out
}

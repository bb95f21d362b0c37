package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write JSON report: %w", err)
	}
	return nil
}

// WriteText writes the report as a readable table, with the ceiling run
// and the ratio to it when there is one.
func WriteText(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	writeSummary(tw, r)
	fmt.Fprintln(tw)
	writeLatencies(tw, r)
	if c := r.Ceiling; c != nil {
		fmt.Fprintf(tw, "\n%s\n", ceilingLine(r))
		if c.Errors > 0 {
			fmt.Fprintf(tw, "ceiling errors: %d%s\n", c.Errors, countsSuffix(c.ErrorsByStatus, c.TransportErrors))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

func writeSummary(w io.Writer, r *Report) {
	fmt.Fprintf(w, "linkraft bench\trun %s\n", r.RunID)
	fmt.Fprintf(w, "server\t%s at %s\n", r.Server, strings.Join(r.Targets, ", "))
	fmt.Fprintf(w, "scenario\t%s\n", scenarioLine(r))
	if r.Seeds != nil {
		fmt.Fprintf(w, "seeds\t%s\n", seedsLine(r.Seeds))
	}
	fmt.Fprintf(w, "mode\t%s\n", modeLine(r))
	fmt.Fprintf(w, "duration\t%gs after %gs warm-up (measured %.2fs)\n", r.DurationS, r.WarmupS, r.ElapsedS)
	fmt.Fprintf(w, "requests\t%d\n", r.Requests)
	fmt.Fprintf(w, "throughput\t%.1f req/s\n", r.Throughput)
	fmt.Fprintf(w, "success\t%d\n", r.Success)
	fmt.Fprintf(w, "errors\t%d%s\n", r.Errors, countsSuffix(r.ErrorsByStatus, r.TransportErrors))
	if r.ErrorsByStatus["429"] > 0 {
		fmt.Fprintf(w, "\t429: the nodes limit creates per client IP; start them with --create-rate 0 to benchmark creates\n")
	}
	if r.Mode == "open" {
		fmt.Fprintf(w, "late sends\t%d (started > 1 ms after their intended time); %d never sent\n", r.LateSends, r.Unsent)
	}
}

func scenarioLine(r *Report) string {
	s := string(r.Scenario)
	if r.Scenario == ScenarioMixed {
		s += " (80% redirects, 20% creates)"
	}
	if r.SeededLinks > 0 {
		s += fmt.Sprintf(", %d links seeded", r.SeededLinks)
	}
	return s
}

// seedsLine says where the seeds went and whether they are gone.
func seedsLine(s *SeedCleanup) string {
	line := fmt.Sprintf("%d created in workspace %s, ", s.Created, s.Workspace)
	switch {
	case s.Kept:
		return line + "kept (--keep-seeds)"
	case s.Failed == 0:
		return line + fmt.Sprintf("%d removed after the run", s.Removed)
	}
	return line + fmt.Sprintf("%d removed after the run, %d NOT removed: %s", s.Removed, s.Failed, s.FirstError)
}

func modeLine(r *Report) string {
	if r.Mode == "open" {
		return fmt.Sprintf("open loop, %g req/s, up to %d in flight", r.Rate, r.Connections)
	}
	return fmt.Sprintf("closed loop, %d connections", r.Connections)
}

// countsSuffix lists the errors: " (429: 3, timeout: 1)", or "".
func countsSuffix(byStatus, transport map[string]int64) string {
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(byStatus)) {
		parts = append(parts, fmt.Sprintf("%s: %d", s, byStatus[s]))
	}
	for _, k := range slices.Sorted(maps.Keys(transport)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, transport[k]))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// writeLatencies writes the latency table: all requests, each route when
// there is more than one, and the ceiling run when there is one.
func writeLatencies(w io.Writer, r *Report) {
	fmt.Fprintln(w, "latency ms\tp50\tp90\tp99\tp99.9\tmax\trequests\treq/s")
	row := func(name string, l Latency, n int64, elapsed float64) {
		rate := 0.0
		if elapsed > 0 {
			rate = float64(n) / elapsed
		}
		fmt.Fprintf(w, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t%.0f\n", name, l.P50, l.P90, l.P99, l.P999, l.Max, n, rate)
	}
	row("all", r.Latency, r.Requests, r.ElapsedS)
	if len(r.Ops) > 1 {
		for _, o := range r.Ops {
			row(o.Op, o.Latency, o.Requests, r.ElapsedS)
		}
	}
	if c := r.Ceiling; c != nil {
		row("ceiling", c.Latency, c.Requests, c.ElapsedS)
	}
}

// ceilingLine states linkraft as a fraction of the ceiling run.
func ceilingLine(r *Report) string {
	return ceilingHeadline(r) + " (" + ceilingDetail(r) + ")"
}

func ceilingHeadline(r *Report) string {
	return fmt.Sprintf("linkraft = %.1f%% of this machine's ceiling", r.CeilingPercent)
}

// ceilingDetail gives the numbers behind the ratio. In an open loop both
// runs send --rate requests per second, so the throughput ratio says
// little; the latencies are compared too.
func ceilingDetail(r *Report) string {
	c := r.Ceiling
	s := fmt.Sprintf("%.0f vs %.0f req/s; the ceiling is the same load against an in-process bare fasthttp server", r.Throughput, c.Throughput)
	if r.Mode == "open" {
		s += fmt.Sprintf("; open loop, both capped by --rate: p50 %.3f vs %.3f ms, p99 %.3f vs %.3f ms",
			r.Latency.P50, c.Latency.P50, r.Latency.P99, c.Latency.P99)
	}
	return s
}

package bench

import (
	"strconv"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Report is the result of a run and the --json output. Counts other than
// Sent cover the measured phase only; Sent counts every request the tool
// sent (seeding, warm-up, measured) by target and route, so it can be
// reconciled with the servers' linkraft_http_requests_total.
type Report struct {
	RunID string `json:"run_id"`
	// StartedAt is when the measured phase started (RFC 3339, UTC).
	StartedAt string `json:"started_at"`
	// Server is "linkraft", or "ceiling" for the in-process ceiling server.
	Server      string   `json:"server"`
	Scenario    Scenario `json:"scenario"`
	Targets     []string `json:"targets"`
	Mode        string   `json:"mode"` // "closed" or "open"
	Connections int      `json:"connections"`
	Rate        float64  `json:"rate,omitempty"`
	WarmupS     float64  `json:"warmup_s"`
	DurationS   float64  `json:"duration_s"`
	// ElapsedS runs from the start of the measured phase until the last
	// request answered; throughput is Requests / ElapsedS.
	ElapsedS    float64 `json:"elapsed_s"`
	SeededLinks int     `json:"seeded_links"`

	Requests        int64            `json:"requests"`
	Throughput      float64          `json:"throughput_rps"`
	Success         int64            `json:"success"`
	Errors          int64            `json:"errors"`
	ErrorsByStatus  map[string]int64 `json:"errors_by_status"`
	TransportErrors map[string]int64 `json:"transport_errors"`
	// LateSends (open loop) started more than 1 ms after their intended
	// time; Unsent were due before the end but never sent.
	LateSends int64        `json:"late_sends"`
	Unsent    int64        `json:"unsent"`
	Latency   Latency      `json:"latency_ms"`
	Ops       []OpReport   `json:"ops"`
	Seconds   []Second     `json:"seconds"`
	Sent      []TargetSent `json:"sent"`
	// Seeds is what became of the seeded links (nil for the ceiling
	// scenario, which seeds none on linkraft).
	Seeds *SeedCleanup `json:"seeds,omitempty"`

	// Ceiling is the same load against the in-process ceiling server
	// (--ceiling); CeilingPercent is Throughput as a percentage of its.
	Ceiling        *Report `json:"ceiling,omitempty"`
	CeilingPercent float64 `json:"ceiling_percent,omitempty"`
}

// Latency is a latency distribution in milliseconds. Open-loop latency runs
// from the intended send time.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// OpReport is one route's share of the measured phase.
type OpReport struct {
	Op              string           `json:"op"`
	Requests        int64            `json:"requests"`
	Success         int64            `json:"success"`
	Errors          int64            `json:"errors"`
	Statuses        map[string]int64 `json:"statuses"`
	TransportErrors map[string]int64 `json:"transport_errors"`
	Latency         Latency          `json:"latency_ms"`
}

// Second is one second of the measured phase, by completion time.
type Second struct {
	T        int     `json:"t"`
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
}

// TargetSent is every request sent to one target, by phase and route
// ("redirect", "create", "stats", "delete": linkraft's route labels).
// Cleanup is the deletes of the seeds after the run. Requests that failed
// in transport are included: they may or may not have reached the server.
type TargetSent struct {
	Target  string           `json:"target"`
	Seed    map[string]int64 `json:"seed"`
	Warmup  map[string]int64 `json:"warmup"`
	Run     map[string]int64 `json:"run"`
	Cleanup map[string]int64 `json:"cleanup"`
}

// report builds the plan's report from its workers' recorders.
func (p *plan) report(workers []*worker, unsent int64, finished time.Time) *Report {
	recs := make([]*recorder, len(workers))
	for i, w := range workers {
		recs[i] = w.rec
	}
	m := mergeRecorders(recs, len(p.targets))
	r := &Report{
		RunID: p.runID, Server: p.server, Scenario: p.cfg.Scenario,
		StartedAt: p.measureStart.UTC().Format(time.RFC3339),
		Mode:      "closed", Connections: p.cfg.Connections, Rate: p.cfg.Rate,
		WarmupS: p.cfg.Warmup.Seconds(), DurationS: p.cfg.Duration.Seconds(),
		ElapsedS:        max(finished.Sub(p.measureStart).Seconds(), 0),
		SeededLinks:     len(p.codes),
		ErrorsByStatus:  map[string]int64{},
		TransportErrors: map[string]int64{},
		LateSends:       m.tally.late,
		Unsent:          unsent,
		Latency:         latencyOf(m.all),
		Seconds:         p.seconds(),
		Sent:            p.sent(&m.tally),
	}
	if p.cfg.openLoop() {
		r.Mode = "open"
	}
	for _, t := range p.targets {
		r.Targets = append(r.Targets, t.addr)
	}
	r.addOps(m)
	if r.ElapsedS > 0 {
		r.Throughput = float64(r.Requests) / r.ElapsedS
	}
	return r
}

// addOps fills the per-route reports and the totals.
func (r *Report) addOps(m *merged) {
	for o := range numOps {
		t := &m.tally
		if t.requests[o] == 0 {
			continue
		}
		or := OpReport{
			Op: o.String(), Requests: t.requests[o], Success: t.success[o],
			Errors:          t.requests[o] - t.success[o],
			Statuses:        map[string]int64{},
			TransportErrors: map[string]int64{},
			Latency:         latencyOf(m.byOp[o]),
		}
		for s, n := range t.statuses[o] {
			or.Statuses[strconv.Itoa(s)] = n
			if !o.ok(s) {
				r.ErrorsByStatus[strconv.Itoa(s)] += n
			}
		}
		for k, n := range t.transport[o] {
			if n > 0 {
				or.TransportErrors[errKind(k).String()] = n
				r.TransportErrors[errKind(k).String()] += n
			}
		}
		r.Ops = append(r.Ops, or)
		r.Requests += or.Requests
		r.Success += or.Success
		r.Errors += or.Errors
	}
}

func (p *plan) seconds() []Second {
	p.series.mu.Lock()
	defer p.series.mu.Unlock()
	out := make([]Second, len(p.series.secs))
	for i, s := range p.series.secs {
		out[i] = Second{
			T: i, Requests: s.requests, Errors: s.errors,
			P50: millis(s.hist.ValueAtQuantile(50)), P99: millis(s.hist.ValueAtQuantile(99)),
		}
	}
	return out
}

func (p *plan) sent(t *tally) []TargetSent {
	out := make([]TargetSent, len(p.targets))
	for i, tg := range p.targets {
		out[i] = TargetSent{
			Target:  tg.addr,
			Seed:    byRoute(t.sent[i][phaseSeed]),
			Warmup:  byRoute(t.sent[i][phaseWarmup]),
			Run:     byRoute(t.sent[i][phaseRun]),
			Cleanup: map[string]int64{},
		}
	}
	return out
}

// byRoute names the non-zero counts.
func byRoute(counts [numOps]int64) map[string]int64 {
	m := map[string]int64{}
	for o, n := range counts {
		if n > 0 {
			m[op(o).String()] = n
		}
	}
	return m
}

// addSeeds records the seeding creates sent to each target.
func (r *Report) addSeeds(perTarget []int64) {
	for i, n := range perTarget {
		if n > 0 {
			r.Sent[i].Seed[opCreate.String()] = n
		}
	}
}

// addCleanup records the deletes of the seeds sent to each target.
func (r *Report) addCleanup(perTarget []int64) {
	for i, n := range perTarget {
		if n > 0 {
			r.Sent[i].Cleanup[opDelete.String()] = n
		}
	}
}

// attachCeiling adds the ceiling run and the ratio to it.
func (r *Report) attachCeiling(c *Report) {
	r.Ceiling = c
	if c.Throughput > 0 {
		r.CeilingPercent = 100 * r.Throughput / c.Throughput
	}
}

func latencyOf(h *hdrhistogram.Histogram) Latency {
	if h == nil || h.TotalCount() == 0 {
		return Latency{}
	}
	return Latency{
		P50: millis(h.ValueAtQuantile(50)), P90: millis(h.ValueAtQuantile(90)),
		P99: millis(h.ValueAtQuantile(99)), P999: millis(h.ValueAtQuantile(99.9)),
		Max: millis(h.Max()), Mean: h.Mean() / 1000,
	}
}

func millis(micros int64) float64 { return float64(micros) / 1000 }

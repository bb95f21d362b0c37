package faults

import (
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/valyala/fasthttp"
)

// Flags of the suite (go test ./e2e/faults/ -args -faults.seed=42 ...).
var (
	flagNodes     = flag.Int("faults.nodes", 3, "cluster size: 3 or 5")
	flagSeed      = flag.Int64("faults.seed", 0, "schedule and workload seed (0: time-based; always printed)")
	flagDuration  = flag.Duration("faults.duration", 60*time.Second, "schedule length (every nemesis kind runs at least once)")
	flagSoak      = flag.Bool("faults.soak", false, "longer run (10m unless -faults.duration is larger) with longer faults")
	flagArtifacts = flag.String("faults.artifacts", "", "where a failed run writes its history, logs and visualisations (default: $LINKRAFT_FAULT_ARTIFACTS or a new temp dir)")
)

// runConfig is one run's settings, read from the flags.
type runConfig struct {
	nodes    int
	seed     int64
	duration time.Duration
	soak     bool
}

func configFromFlags(t *testing.T) runConfig {
	t.Helper()
	cfg := runConfig{nodes: *flagNodes, seed: *flagSeed, duration: *flagDuration, soak: *flagSoak}
	if cfg.nodes != 3 && cfg.nodes != 5 {
		t.Fatalf("-faults.nodes must be 3 or 5, got %d", cfg.nodes)
	}
	if cfg.seed == 0 {
		cfg.seed = time.Now().UnixNano()
	}
	if cfg.soak {
		cfg.duration = max(cfg.duration, 10*time.Minute)
	}
	return cfg
}

// workloadClients is the number of concurrent clients.
const workloadClients = 8

// TestFaultSchedule starts a cluster, runs the workload while a seeded
// schedule of nemeses runs, heals everything, waits for convergence and
// checks the history.
func TestFaultSchedule(t *testing.T) {
	if testing.Short() {
		t.Skip("fault-injection test: skipped in -short mode")
	}
	cfg := configFromFlags(t)
	t.Logf("seed %d (repeat with -faults.seed=%d), %d nodes, duration %v, soak %v", cfg.seed, cfg.seed, cfg.nodes, cfg.duration, cfg.soak)
	rng := mrand.New(mrand.NewPCG(uint64(cfg.seed), 1))
	began := time.Now()
	c := startCluster(t, cfg.nodes, rng)
	t.Logf("cluster of %d formed in %v", cfg.nodes, time.Since(began).Round(time.Millisecond))

	schedule := plan(rng, cfg.duration, cfg.soak, c.env.isolated, cfg.nodes)
	faults := runSchedule(t, c, rng, cfg, schedule)
	healAll(t, c)
	converged := c.waitConverged(60 * time.Second)
	c.finalReads(codesOf(c.cl.hist.Ops()))
	ops := c.cl.hist.Ops()

	dir := artifactsDir(t)
	anomalies, lin := check(c, ops, faults, converged, filepath.Join(dir, "porcupine"))
	report(t, ops, faults, lin, anomalies)
	if len(anomalies) > 0 || t.Failed() {
		if err := c.saveArtifacts(dir, ops, map[string]any{"schedule.json": schedule, "faults.json": faults, "anomalies.json": anomalies}); err != nil {
			t.Errorf("artifacts: %v", err)
		}
		t.Errorf("%d anomalies (seed %d); artifacts in %s", len(anomalies), cfg.seed, dir)
	}
	t.Logf("run took %v", time.Since(began).Round(time.Millisecond))
}

// runSchedule runs the workload and applies the schedule, then stops the
// workload.
func runSchedule(t *testing.T, c *cluster, rng *mrand.Rand, cfg runConfig, schedule []planned) []fault {
	w := &workload{c: c, seed: uint64(cfg.seed), clients: workloadClients}
	stop := make(chan struct{})
	wait := w.run(stop, time.Now().Add(cfg.duration+5*time.Minute))
	defer wait()
	defer close(stop)
	time.Sleep(3 * time.Second) // a calm start
	m := &nemesis{c: c, rng: rng}
	var faults []fault
	for i, p := range schedule {
		f := m.apply(p)
		t.Logf("fault %d/%d %s: %s, held %v, healed at %s %s", i+1, len(schedule), f.Kind, f.Detail, p.Hold.Round(time.Millisecond), ms(f.Heal), f.Err)
		faults = append(faults, f)
	}
	return faults
}

// healAll removes every partition, resumes paused nodes and restarts dead
// members (a removed node stays stopped).
func healAll(t *testing.T, c *cluster) {
	t.Helper()
	if c.env.isolated {
		if err := c.env.heal(); err != nil {
			t.Errorf("heal: %v", err)
		}
	}
	c.resume()
	for _, n := range c.nodes() {
		if !n.running() {
			t.Logf("node %s is down after the schedule; restarting it", n.id)
			if err := n.launch(); err != nil {
				t.Errorf("restart: %v", err)
			}
		}
	}
}

// codesOf returns every code the history names.
func codesOf(ops []Op) []string {
	seen := map[string]bool{}
	var out []string
	for _, op := range ops {
		if op.Code != "" && !seen[op.Code] {
			seen[op.Code] = true
			out = append(out, op.Code)
		}
	}
	return out
}

// artifactsDir is the -faults.artifacts flag, $LINKRAFT_FAULT_ARTIFACTS or
// a new directory under the system temp dir (kept after the test, so a
// failure can be looked at).
func artifactsDir(t *testing.T) string {
	if *flagArtifacts != "" {
		return *flagArtifacts
	}
	if env := os.Getenv("LINKRAFT_FAULT_ARTIFACTS"); env != "" {
		return env
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("linkraft-faults-%s-%d", time.Now().Format("20060102-150405"), os.Getpid()))
	t.Logf("artifacts (written on failure): %s", dir)
	return dir
}

// check runs every checker.
func check(c *cluster, ops []Op, faults []fault, converged error, htmlDir string) ([]Anomaly, LinearizabilityResult) {
	win := windows(faults)
	var all []Anomaly
	if converged != nil {
		all = append(all, Anomaly{Checker: "convergence", Detail: converged.Error()})
	}
	all = append(all, CheckLostCreates(ops, ids(c.nodes()))...)
	all = append(all, CheckSingleTarget(ops)...)
	all = append(all, CheckNoOlderTargetAfterEdit(ops, win)...)
	all = append(all, CheckCustomWinners(ops)...)
	all = append(all, CheckDedupe(ops)...)
	all = append(all, CheckNoReadAfterDelete(ops, win)...)
	all = append(all, CheckNo404AfterAck(ops, win)...)
	exports, exportAnomalies := c.convergedExports(15 * time.Second)
	all = append(all, exportAnomalies...)
	all = append(all, c.editHistoryAnomalies(ops)...)
	all = append(all, checkClicks(c.t, ops, faults, win, exports)...)
	all = append(all, c.clickSeriesAnomalies(exports)...)
	all = append(all, c.processAnomalies()...)
	all = append(all, c.membershipAnomalies()...)
	for _, f := range faults {
		if f.Err != "" {
			all = append(all, Anomaly{Checker: "nemesis", Detail: f.Kind + ": " + f.Err})
		}
	}
	lin := CheckLinearizable(ops, win, htmlDir, 30*time.Second)
	return append(all, lin.Anomalies...), lin
}

// clickFlushInterval is the nodes' --click-flush-interval.
const clickFlushInterval = 200 * time.Millisecond

// checkClicks runs CheckClicks on the first node's export (they agree once
// converged, or the exports checker says so).
func checkClicks(t *testing.T, ops []Op, faults []fault, win []Window, exports map[string][]byte) []Anomaly {
	if len(exports) == 0 {
		return nil
	}
	counts, err := ExportClicks(exports[keys(exports)[0]])
	if err != nil {
		return []Anomaly{{Checker: "clicks", Detail: err.Error()}}
	}
	var counted uint64
	for _, n := range counts {
		counted += n
	}
	acked := 0
	for _, op := range ops {
		if op.Kind == Redirect && op.Outcome == Ok && op.Status == 302 {
			acked++
		}
	}
	t.Logf("clicks: %d live links count %d clicks; %d redirects were acknowledged with a 302 (of deleted links too)", len(counts), counted, acked)
	var kills []Kill
	for _, f := range faults {
		kills = append(kills, f.Kills...)
	}
	return CheckClicks(ops, counts, kills, win, ClickBounds{FlushInterval: int64(clickFlushInterval), Margin: int64(2 * time.Second)})
}

// clickSeriesAnomalies asks every member for the hourly clicks of the
// clicked links (at most maxSeriesCodes of them) and checks them against
// the agreed totals.
func (c *cluster) clickSeriesAnomalies(exports map[string][]byte) []Anomaly {
	const maxSeriesCodes = 100
	if len(exports) == 0 {
		return nil
	}
	counts, err := ExportClicks(exports[keys(exports)[0]])
	if err != nil {
		return nil // checkClicks reports it
	}
	var clicked []string
	for code, n := range counts {
		if n > 0 && len(clicked) < maxSeriesCodes {
			clicked = append(clicked, code)
		}
	}
	series := map[string]map[string][]uint64{}
	breakdowns := map[string]map[string]Breakdown{}
	var out []Anomaly
	for _, n := range c.nodes() {
		series[n.id] = map[string][]uint64{}
		breakdowns[n.id] = map[string]Breakdown{}
		for _, code := range clicked {
			for _, dim := range []string{"browser", "referrer"} {
				a := c.cl.do(fasthttp.MethodGet, n.httpAddr, "/api/v1/urls/"+code+"/stats?group_by="+dim, nil, 5*time.Second)
				b, err := VisitBreakdown(a.body)
				if a.err != nil || a.status != 200 || err != nil {
					out = append(out, Anomaly{Checker: "breakdowns", Node: n.id, Code: code,
						Detail: fmt.Sprintf("stats by %s: %d %v %v %.200s", dim, a.status, a.err, err, a.body)})
					continue
				}
				b.Code, b.By = code, dim
				breakdowns[n.id][code+" by "+dim] = b
			}
			a := c.cl.do(fasthttp.MethodGet, n.httpAddr, "/api/v1/urls/"+code+"/stats?interval=hour", nil, 5*time.Second)
			hours, err := SeriesClicks(a.body)
			if a.err != nil || a.status != 200 || err != nil {
				out = append(out, Anomaly{Checker: "click-series", Node: n.id, Code: code,
					Detail: fmt.Sprintf("stats: %d %v %v %.200s", a.status, a.err, err, a.body)})
				continue
			}
			series[n.id][code] = hours
		}
	}
	c.t.Logf("click series and breakdowns: %d clicked links checked on %d nodes", len(clicked), len(series))
	out = append(out, CheckBreakdowns(counts, breakdowns)...)
	return append(out, CheckClickSeries(counts, series)...)
}

// writeSettled prints, by fault kind, how long after each heal every
// running node named one leader.
func writeSettled(w io.Writer, faults []fault) {
	byKind := map[string][]time.Duration{}
	for _, f := range faults {
		byKind[f.Kind] = append(byKind[f.Kind], f.Settled)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\nfault\tafter the heal, one leader known to every node\tmax\t")
	for _, k := range keys(byKind) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", k, gapList(byKind[k]), gapString(maxGap(byKind[k])))
	}
	tw.Flush()
}

// report logs the summary table and the anomalies by checker.
func report(t *testing.T, ops []Op, faults []fault, lin LinearizabilityResult, anomalies []Anomaly) {
	var kinds []string
	var refs []int64
	for _, f := range faults {
		ref := f.Start
		if strings.HasPrefix(f.Kind, "partition") {
			ref = f.Heal
		}
		kinds, refs = append(kinds, f.Kind), append(refs, ref)
	}
	var b strings.Builder
	WriteSummary(&b, ops, WriteAvailability(ops, kinds, refs))
	writeSettled(&b, faults)
	fmt.Fprintf(&b, "\nlinearizability: %d codes, %d illegal, %d unknown (timeout), %d reads on nodes inside fault windows left out; visualisations %v\n",
		lin.Codes, lin.Illegal, lin.Unknown, lin.DroppedReads, lin.HTML)
	acked, other := 0, 0
	for _, op := range ops {
		if op.EditAcked() {
			acked++
			if op.RespURL != op.URL {
				other++
			}
		}
	}
	fmt.Fprintf(&b, "edits: %d answered 200, %d of them naming another target in the answer (an edit applied before the link was read back; the older-target checker judges it)\n", acked, other)
	byChecker := map[string][]string{}
	for _, a := range anomalies {
		byChecker[a.Checker] = append(byChecker[a.Checker], a.String())
	}
	for _, k := range keys(byChecker) {
		fmt.Fprintf(&b, "%s: %d anomalies, first: %s\n", k, len(byChecker[k]), strings.Join(head(byChecker[k], 3), "\n    "))
	}
	t.Logf("summary:\n%s", b.String())
}

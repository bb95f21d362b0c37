package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// plan is one load run against one set of targets: warm-up, then the
// measured phase.
type plan struct {
	cfg          *Config
	server       string // "linkraft" or "ceiling", for the report
	targets      []*target
	codes        []string // links to read
	createPrefix string   // creates post createPrefix/<worker>/<n>
	runID        string
	start        time.Time // warm-up starts
	measureStart time.Time
	end          time.Time // no request is meant to start at or after end
	series       series
	live         live
}

func newPlan(cfg *Config, server string, targets []*target, codes []string, runID string) *plan {
	return &plan{
		cfg: cfg, server: server, targets: targets, codes: codes, runID: runID,
		createPrefix: "https://bench.example.com/" + runID,
	}
}

// begin sets the run's times from now, once its workers exist (making
// them, a histogram each, can take longer than a short run on a busy
// machine); a short head start lets every worker reach its loop first.
func (p *plan) begin(workers []*worker) {
	p.start = time.Now().Add(10 * time.Millisecond)
	p.measureStart = p.start.Add(p.cfg.Warmup)
	p.end = p.measureStart.Add(p.cfg.Duration)
	for _, w := range workers {
		w.rec.measureStart = p.measureStart
	}
}

// load runs the plan's load and reports on it. Cancelling ctx ends the run
// early; the report covers what ran.
func load(ctx context.Context, cfg *Config, server string, targets []*target, codes []string, runID string) *Report {
	p := newPlan(cfg, server, targets, codes, runID)
	workers := p.newWorkers()
	p.begin(workers)
	stopProgress := p.startProgress()
	var unsent int64
	if cfg.openLoop() {
		unsent = p.openLoop(ctx, workers)
	} else {
		p.closedLoop(ctx, workers)
	}
	finished := time.Now()
	stopProgress()
	return p.report(workers, unsent, finished)
}

// worker sends requests one at a time; it owns its connection state,
// random source and recorder.
type worker struct {
	id      int
	p       *plan
	rng     *rand.Rand
	conn    *conn
	rec     *recorder
	creates int64
}

func (p *plan) newWorkers() []*worker {
	seed := uint64(time.Now().UnixNano())
	ws := make([]*worker, p.cfg.Connections)
	for i := range ws {
		ws[i] = &worker{
			id: i, p: p,
			rng:  rand.New(rand.NewPCG(seed, uint64(i))),
			conn: newConn(p.cfg.Timeout, p.cfg.Key, p.cfg.Workspace),
			rec:  newRecorder(len(p.targets), &p.series, &p.live),
		}
	}
	return ws
}

// pickOp chooses the next request's kind: mixed is 80 % redirects and 20 %
// creates; ceiling loads the ceiling server as redirect loads linkraft.
func (w *worker) pickOp() op {
	switch w.p.cfg.Scenario {
	case ScenarioCreate:
		return opCreate
	case ScenarioStats:
		return opStats
	case ScenarioMixed:
		if w.rng.IntN(5) == 0 {
			return opCreate
		}
	}
	return opRedirect
}

// once sends one request to target tgt. intended is when it was meant to
// start (open loop); the zero time means now (closed loop).
func (w *worker) once(tgt int, intended time.Time) {
	o := w.pickOp()
	var code string
	var body []byte
	if o == opCreate {
		w.creates++
		body = w.conn.createBody(w.p.createPrefix, int64(w.id), w.creates)
	} else {
		code = w.p.codes[w.rng.IntN(len(w.p.codes))]
	}
	sent := time.Now()
	if intended.IsZero() {
		intended = sent
	}
	status, err := w.conn.send(w.p.targets[tgt], o, code, body)
	w.rec.record(outcome{
		op: o, target: tgt, status: status, err: err,
		intended: intended, sent: sent, done: time.Now(),
	}, w.p.cfg.openLoop())
}

// closedLoop runs every worker until the end: each sends its next request
// as soon as the previous one was answered, always to the same target.
func (p *plan) closedLoop(ctx context.Context, workers []*worker) {
	time.Sleep(time.Until(p.start))
	var wg sync.WaitGroup
	for _, w := range workers {
		tgt := w.id % len(p.targets)
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(p.end) {
				w.once(tgt, time.Time{})
			}
		})
	}
	wg.Wait()
}

// job is one open-loop request: where and when it was meant to start.
type job struct {
	target   int
	intended time.Time
}

// openLoop has the scheduler issue requests at their intended times to
// whichever worker is free, and returns how many were never issued.
func (p *plan) openLoop(ctx context.Context, workers []*worker) int64 {
	jobs := make(chan job, len(workers))
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for j := range jobs {
				w.once(j.target, j.intended)
			}
		})
	}
	unsent := p.schedule(ctx, jobs)
	close(jobs)
	wg.Wait()
	return unsent
}

// schedule issues request i at start + i/rate, target i mod N, until the
// end. When every worker is busy it blocks, and afterwards issues the
// overdue requests at once with their original intended times: their
// latency includes the wait. Requests still not issued at the end are
// returned as unsent.
func (p *plan) schedule(ctx context.Context, jobs chan<- job) int64 {
	interval := float64(time.Second) / p.cfg.Rate
	total := int64(float64(p.end.Sub(p.start))/interval + 0.999999)
	endTimer := time.NewTimer(time.Until(p.end))
	defer endTimer.Stop()
	for i := int64(0); i < total; i++ {
		intended := p.start.Add(time.Duration(float64(i) * interval))
		if !waitUntil(ctx, intended) {
			return total - i
		}
		select {
		case jobs <- job{target: int(i % int64(len(p.targets))), intended: intended}:
		case <-ctx.Done():
			return total - i
		case <-endTimer.C:
			return total - i
		}
	}
	return 0
}

// waitUntil sleeps until t, in slices short enough to notice ctx ending;
// it reports false when ctx ended first.
func waitUntil(ctx context.Context, t time.Time) bool {
	for wait := time.Until(t); wait > 0; wait = time.Until(t) {
		if ctx.Err() != nil {
			return false
		}
		preciseSleep(min(wait, 20*time.Millisecond))
	}
	return ctx.Err() == nil
}

// startProgress prints a status line every second until stopped.
func (p *plan) startProgress() (stop func()) {
	if p.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var last, lastErrs int64
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				n, errs := p.live.done.Load(), p.live.errors.Load()
				fmt.Fprintln(p.cfg.Progress, p.progressLine(now, n-last, errs-lastErrs))
				last, lastErrs = n, errs
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

func (p *plan) progressLine(now time.Time, reqs, errs int64) string {
	what := fmt.Sprintf("run %4.1fs/%s", now.Sub(p.measureStart).Seconds(), p.cfg.Duration)
	if now.Before(p.measureStart) {
		what = fmt.Sprintf("warm-up %4.1fs/%s", now.Sub(p.start).Seconds(), p.cfg.Warmup)
	}
	label := p.server
	if string(p.cfg.Scenario) != p.server {
		label += " " + string(p.cfg.Scenario)
	}
	return fmt.Sprintf("bench %s: %s  %7d req/s  %d errors", label, what, reqs, errs)
}

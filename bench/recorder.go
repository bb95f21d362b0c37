package bench

import (
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram geometry: microseconds from 1 µs to an hour. The whole-run
// histograms keep 3 significant digits; the per-second ones 2, which is
// plenty for a chart and keeps them small.
const (
	histMaxMicros = int64(time.Hour / time.Microsecond)
	runDigits     = 3
	secondDigits  = 2
)

func newHistogram(digits int) *hdrhistogram.Histogram {
	return hdrhistogram.New(1, histMaxMicros, digits)
}

// recordLatency records d in microseconds, clamped to the histogram's range.
func recordLatency(h *hdrhistogram.Histogram, d time.Duration) {
	v := min(max(d.Microseconds(), 1), histMaxMicros)
	_ = h.RecordValue(v) // cannot fail: v is in range
}

// tally is what one worker counted. Sent covers every phase; the rest
// covers the measured phase only.
type tally struct {
	sent      [][numPhases][numOps]int64 // by target index
	requests  [numOps]int64
	success   [numOps]int64
	statuses  [numOps]map[int]int64 // every HTTP status answered
	transport [numOps][numErrKinds]int64
	late      int64
}

func newTally(targets int) tally {
	t := tally{sent: make([][numPhases][numOps]int64, targets)}
	for o := range t.statuses {
		t.statuses[o] = map[int]int64{}
	}
	return t
}

// add adds u's counts to t.
func (t *tally) add(u *tally) {
	for i := range u.sent {
		for p := range u.sent[i] {
			for o := range u.sent[i][p] {
				t.sent[i][p][o] += u.sent[i][p][o]
			}
		}
	}
	for o := range numOps {
		t.requests[o] += u.requests[o]
		t.success[o] += u.success[o]
		for s, n := range u.statuses[o] {
			t.statuses[o][s] += n
		}
		for k := range numErrKinds {
			t.transport[o][k] += u.transport[o][k]
		}
	}
	t.late += u.late
}

// live is what the progress line reads while workers run.
type live struct {
	done, errors atomic.Int64
}

// second is the requests that completed in one second of the measured phase.
type second struct {
	hist             *hdrhistogram.Histogram
	requests, errors int64
}

// series is the per-second buckets of a run, shared by the workers. Each
// worker fills its own current second and merges it in here when it moves
// on, so the lock is taken about once per second per worker.
type series struct {
	mu   sync.Mutex
	secs []*second
}

func (s *series) merge(idx int, from *second) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.secs) <= idx {
		s.secs = append(s.secs, &second{hist: newHistogram(secondDigits)})
	}
	to := s.secs[idx]
	to.hist.Merge(from.hist)
	to.requests += from.requests
	to.errors += from.errors
}

// recorder is one worker's histograms and counts. Not safe for concurrent
// use: HDR histograms are not.
type recorder struct {
	measureStart time.Time
	// byOp are created on first use, so a worker of a one-op scenario
	// holds one run histogram (about 180 KB).
	byOp   [numOps]*hdrhistogram.Histogram
	tally  tally
	cur    second
	curIdx int
	series *series
	live   *live
}

// newRecorder's measureStart is set when the run's clock starts
// (plan.begin).
func newRecorder(targets int, s *series, l *live) *recorder {
	return &recorder{
		tally:  newTally(targets),
		cur:    second{hist: newHistogram(secondDigits)},
		curIdx: -1,
		series: s,
		live:   l,
	}
}

// outcome is one request as a worker saw it.
type outcome struct {
	op       op
	target   int
	status   int   // 0 when err is set
	err      error // transport error
	intended time.Time
	sent     time.Time
	done     time.Time
}

// record counts o. A request belongs to the warm-up when it was meant to
// start before the measured phase. Latency runs from the intended time and
// is recorded for every HTTP answer, whatever its status; transport errors
// are counted by kind instead.
func (r *recorder) record(o outcome, openLoop bool) {
	ph := phaseRun
	if o.intended.Before(r.measureStart) {
		ph = phaseWarmup
	}
	r.tally.sent[o.target][ph][o.op]++
	failed := o.err != nil || !o.op.ok(o.status)
	r.live.done.Add(1)
	if failed {
		r.live.errors.Add(1)
	}
	if ph != phaseRun {
		return
	}
	r.tally.requests[o.op]++
	if openLoop && o.sent.Sub(o.intended) > lateThreshold {
		r.tally.late++
	}
	if o.err != nil {
		r.tally.transport[o.op][classify(o.err)]++
	} else {
		r.tally.statuses[o.op][o.status]++
		if !failed {
			r.tally.success[o.op]++
		}
		r.observe(o.op, o.done.Sub(o.intended))
	}
	r.countSecond(o.done, failed)
}

func (r *recorder) observe(o op, latency time.Duration) {
	if r.byOp[o] == nil {
		r.byOp[o] = newHistogram(runDigits)
	}
	recordLatency(r.byOp[o], latency)
	recordLatency(r.cur.hist, latency)
}

// countSecond puts a completion into its second, flushing the previous
// second to the series when the worker has moved on.
func (r *recorder) countSecond(done time.Time, failed bool) {
	idx := max(int(done.Sub(r.measureStart)/time.Second), 0)
	if idx != r.curIdx {
		r.flush()
		r.curIdx = idx
	}
	r.cur.requests++
	if failed {
		r.cur.errors++
	}
}

// flush merges the current second into the series.
func (r *recorder) flush() {
	if r.curIdx < 0 || r.cur.requests == 0 {
		return
	}
	r.series.merge(r.curIdx, &r.cur)
	r.cur.hist.Reset()
	r.cur.requests, r.cur.errors = 0, 0
}

// merged is every worker's recorder added up.
type merged struct {
	all   *hdrhistogram.Histogram
	byOp  [numOps]*hdrhistogram.Histogram
	tally tally
}

// mergeRecorders adds up the workers' recorders. Call it after every worker
// has stopped.
func mergeRecorders(rs []*recorder, targets int) *merged {
	m := &merged{all: newHistogram(runDigits), tally: newTally(targets)}
	for _, r := range rs {
		r.flush()
		m.tally.add(&r.tally)
		for o, h := range r.byOp {
			if h == nil {
				continue
			}
			if m.byOp[o] == nil {
				m.byOp[o] = newHistogram(runDigits)
			}
			m.byOp[o].Merge(h)
			m.all.Merge(h)
		}
	}
	return m
}

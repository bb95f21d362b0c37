package main

import (
	"strings"
	"sync"
	"unicode"

	gometrics "github.com/hashicorp/go-metrics/compat"
)

// promNames is a go-metrics sink that renames what hashicorp/raft,
// raft-boltdb and memberlist emit to Prometheus conventions before passing
// it on: snake_case, counters ending in _total, the unit as a suffix, and
// seconds rather than the milliseconds go-metrics timers report. The
// go-metrics Prometheus sink has no renaming hook, and renaming here keeps
// every name decision in one place.
//
// Raft emits a few timings for every entry and every append, so each
// name is worked out once and remembered: the set of names the libraries
// emit is fixed by their code, not by input.
type promNames struct {
	next  gometrics.MetricSink
	names *sync.Map // metricKey → renamed
}

func newPromNames(next gometrics.MetricSink) promNames {
	return promNames{next: next, names: new(sync.Map)}
}

type metricKey struct {
	kind   metricKind
	dotted string // the key joined with dots; a label's name for labelKind
}

type renamed struct {
	key   []string // the one-part key passed on; read only
	scale float32
}

// labelKind names a label in the cache of names.
const labelKind metricKind = -1

// rename is promName, remembered.
func (p promNames) rename(key []string, kind metricKind) renamed {
	k := metricKey{kind, strings.Join(key, ".")}
	if r, ok := p.names.Load(k); ok {
		return r.(renamed)
	}
	name, scale := promName(key, kind)
	r := renamed{[]string{name}, scale}
	p.names.Store(k, r)
	return r
}

// metricUnit is how a series' name ends and what its values are multiplied
// by to be in that unit.
type metricUnit struct {
	suffix string
	scale  float32
}

var (
	unitless = metricUnit{"", 1}
	// go-metrics' MeasureSince reports milliseconds (its TimerGranularity),
	// and the libraries' hand-made timings are milliseconds too.
	millisToSeconds = metricUnit{"seconds", 0.001}
	bytesUnit       = metricUnit{"bytes", 1}
)

// sampleUnits lists the samples that are not timings. Every other sample is
// one (MeasureSince, or milliseconds computed by hand), so a timing a
// library adds later is named and scaled right without a change here.
var sampleUnits = map[string]metricUnit{
	"raft.fsm.applyBatchNum":      unitless,
	"raft.boltdb.logsPerBatch":    unitless,
	"raft.boltdb.logSize":         bytesUnit,
	"raft.boltdb.logBatchSize":    bytesUnit,
	"raft.boltdb.writeCapacity":   {"logs_per_second", 1},
	"raft.thread.main.saturation": {"ratio", 1},
	"raft.thread.fsm.saturation":  {"ratio", 1},
	"memberlist.queue.broadcasts": unitless,
	"memberlist.size.remote":      bytesUnit,
}

// gaugeUnits and counterUnits list the gauges and counters that have a
// unit; the others are counts.
var gaugeUnits = map[string]metricUnit{
	"raft.fsm.lastRestoreDuration": millisToSeconds,
	"raft.leader.oldestLogAge":     millisToSeconds,
	"memberlist.size.local":        bytesUnit,
}

var counterUnits = map[string]metricUnit{
	"memberlist.udp.sent":     bytesUnit,
	"memberlist.udp.received": bytesUnit,
	"memberlist.tcp.sent":     bytesUnit,
}

type metricKind int

const (
	gaugeKind metricKind = iota
	counterKind
	sampleKind
)

// promName returns the Prometheus name of the go-metrics key and the factor
// its values are scaled by.
func promName(key []string, kind metricKind) (string, float32) {
	dotted := strings.Join(key, ".")
	unit := unitless
	var ok bool
	switch kind {
	case gaugeKind:
		unit = gaugeUnits[dotted]
	case counterKind:
		unit = counterUnits[dotted]
	case sampleKind:
		if unit, ok = sampleUnits[dotted]; !ok {
			unit = millisToSeconds
		}
	}
	if unit.scale == 0 { // not in the table
		unit = unitless
	}
	parts := make([]string, 0, len(key)+2)
	for _, k := range key {
		parts = append(parts, snakeCase(k))
	}
	if unit.suffix != "" {
		parts = append(parts, unit.suffix)
	}
	if kind == counterKind {
		parts = append(parts, "total")
	}
	return strings.Join(parts, "_"), unit.scale
}

// snakeCase turns camelCase into snake_case, keeping acronyms whole:
// "commitTime" → "commit_time", "getRPCType" → "get_rpc_type".
func snakeCase(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 {
			prev := r[i-1]
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// snakeLabels returns labels with snake_case names (raft's transport labels
// its timings rpcType). It copies: the caller may reuse its slice.
func (p promNames) snakeLabels(labels []gometrics.Label) []gometrics.Label {
	if len(labels) == 0 {
		return labels
	}
	out := make([]gometrics.Label, len(labels))
	for i, l := range labels {
		name, ok := p.names.Load(metricKey{labelKind, l.Name})
		if !ok {
			name = snakeCase(l.Name)
			p.names.Store(metricKey{labelKind, l.Name}, name)
		}
		out[i] = gometrics.Label{Name: name.(string), Value: l.Value}
	}
	return out
}

func (p promNames) SetGauge(key []string, val float32) { p.SetGaugeWithLabels(key, val, nil) }

func (p promNames) SetGaugeWithLabels(key []string, val float32, labels []gometrics.Label) {
	r := p.rename(key, gaugeKind)
	p.next.SetGaugeWithLabels(r.key, val*r.scale, p.snakeLabels(labels))
}

// EmitKey has no Prometheus equivalent (the sink drops it too).
func (p promNames) EmitKey(key []string, val float32) {}

func (p promNames) IncrCounter(key []string, val float32) { p.IncrCounterWithLabels(key, val, nil) }

func (p promNames) IncrCounterWithLabels(key []string, val float32, labels []gometrics.Label) {
	r := p.rename(key, counterKind)
	p.next.IncrCounterWithLabels(r.key, val*r.scale, p.snakeLabels(labels))
}

func (p promNames) AddSample(key []string, val float32) { p.AddSampleWithLabels(key, val, nil) }

func (p promNames) AddSampleWithLabels(key []string, val float32, labels []gometrics.Label) {
	r := p.rename(key, sampleKind)
	p.next.AddSampleWithLabels(r.key, val*r.scale, p.snakeLabels(labels))
}

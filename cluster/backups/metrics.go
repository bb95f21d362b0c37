package backups

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the last backup's time, size, duration and outcome, as an
// operator's alert wants them: "no good backup for two hours" is
// time() - linkraft_backup_last_good_timestamp_seconds > 7200.
type metrics struct {
	lastGood *prometheus.GaugeVec
	size     prometheus.Gauge
	duration prometheus.Gauge
	outcomes *prometheus.CounterVec
	last     *prometheus.GaugeVec
}

var allOutcomes = []string{OutcomeWritten, OutcomeSkipped, OutcomeFailed}

func newMetrics() *metrics {
	m := &metrics{
		lastGood: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "linkraft_backup_last_good_timestamp_seconds",
			Help: "On the leader: when the destination last held the state (a backup written, or found unchanged), in Unix seconds.",
		}, nil),
		size: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "linkraft_backup_last_size_bytes",
			Help: "Size of the last backup this node wrote, compressed.",
		}),
		duration: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "linkraft_backup_last_duration_seconds",
			Help: "How long the last due backup took, written, skipped or failed.",
		}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "linkraft_backups_total",
			Help: "Due backups on this node, by outcome: written, skipped (nothing changed) or failed.",
		}, []string{"outcome"}),
		last: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "linkraft_backup_last_outcome",
			Help: "1 for the outcome of the last due backup on this node (written, skipped or failed), 0 for the others.",
		}, []string{"outcome"}),
	}
	for _, o := range allOutcomes {
		m.outcomes.WithLabelValues(o)
	}
	return m
}

func (m *metrics) observe(st Status, outcome string) {
	if outcome != OutcomeFailed {
		m.lastGood.WithLabelValues().Set(float64(st.LastGood.UnixMilli()) / 1000)
	}
	if outcome == OutcomeWritten {
		m.size.Set(float64(st.Size))
	}
	m.duration.Set(st.Duration.Seconds())
	m.outcomes.WithLabelValues(outcome).Inc()
	for _, o := range allOutcomes {
		v := 0.0
		if o == outcome {
			v = 1
		}
		m.last.WithLabelValues(o).Set(v)
	}
}

// Collectors are the scheduler's metrics, for the caller to register.
func (s *Scheduler) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.m.lastGood, s.m.size, s.m.duration, s.m.outcomes, s.m.last}
}

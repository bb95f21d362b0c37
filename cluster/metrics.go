package cluster

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are what this package measures itself, as Prometheus collectors
// that belong to the node: there is no package-level registry. The HTTP
// layer registers them (Node.Collectors) on the registry /metrics serves,
// next to its own. Raft's and memberlist's own metrics do not come through
// here: the libraries emit them through go-metrics' process-wide sink,
// which the command wires to the same registry.
type metrics struct {
	lag             *prometheus.GaugeVec
	forwards        *prometheus.CounterVec
	confirmedMisses *prometheus.CounterVec
	createBatch     prometheus.Histogram
	relayBatch      prometheus.Histogram
	gossipMembers   *prometheus.Desc
}

func newMetrics() *metrics {
	// Batch sizes from one create to maxCreateBatch, in powers of two.
	batchBuckets := prometheus.ExponentialBuckets(1, 2, 9) // 1 … 256
	m := &metrics{
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "linkraft_replication_lag_entries",
			Help: "On the leader: log entries the leader has applied that the follower has not (its last reported applied index).",
		}, []string{"follower"}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "linkraft_forwarded_requests_total",
			Help: "Requests this node sent to the leader, by kind (write, admin, admin_read, create_batch) and outcome (ok, no_leader, timeout, error).",
		}, []string{"kind", "outcome"}),
		confirmedMisses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "linkraft_confirmed_misses_total",
			Help: "Lookups local state could not answer (a miss, or a hit while behind) that asked the leader, by result (found, not_found, unconfirmed).",
		}, []string{"result"}),
		createBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "linkraft_create_batch_size",
			Help:    "Creates per Raft entry proposed by this node's create batcher (as leader).",
			Buckets: batchBuckets,
		}),
		relayBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "linkraft_relay_batch_size",
			Help:    "Creates per batch this node relayed to the leader (as follower).",
			Buckets: batchBuckets,
		}),
		gossipMembers: prometheus.NewDesc("linkraft_gossip_members",
			"Gossip (memberlist) members as this node sees them, by state: alive (suspects included), dead, left.",
			[]string{"state"}, nil),
	}
	// Every result is a series from the start, so a rate over it (and an
	// alert) does not wait for the first miss of each kind.
	for _, r := range [...]string{"found", "not_found", "unconfirmed"} {
		m.confirmedMisses.WithLabelValues(r)
	}
	return m
}

// Collectors are this node's metrics, for the caller to register.
func (n *Node) Collectors() []prometheus.Collector {
	m := n.metrics
	cs := append([]prometheus.Collector{
		m.lag, m.forwards, m.confirmedMisses, m.createBatch, m.relayBatch,
		gossipCollector{n},
	}, n.hooks.Collectors()...)
	if n.backups != nil {
		cs = append(cs, n.backups.Collectors()...)
	}
	return cs
}

// Outcomes of a request sent to the leader.
const (
	outcomeOK       = "ok"
	outcomeNoLeader = "no_leader"
	outcomeTimeout  = "timeout"
	outcomeError    = "error"
)

// outcomeOf classifies a forwarding error for the forwards counter.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, ErrRefused):
		return outcomeError
	case errors.Is(err, ErrNoLeader):
		return outcomeNoLeader
	case errors.Is(err, ErrTimeout):
		return outcomeTimeout
	}
	return outcomeError
}

func (m *metrics) forwarded(kind string, err error) {
	m.forwards.WithLabelValues(kind, outcomeOf(err)).Inc()
}

// gossipCollector reports linkraft_gossip_members when Prometheus scrapes.
type gossipCollector struct{ n *Node }

func (c gossipCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.n.metrics.gossipMembers }

func (c gossipCollector) Collect(ch chan<- prometheus.Metric) {
	if c.n.gossip == nil { // no --gossip-addr: nothing to report
		return
	}
	counts := c.n.gossip.memberStates()
	for _, state := range [...]string{memberAlive, memberDead, memberLeft} {
		ch <- prometheus.MustNewConstMetric(c.n.metrics.gossipMembers, prometheus.GaugeValue, float64(counts[state]), state)
	}
}

// Replication lag: the leader asks every follower for its applied index
// every lagInterval, each ask bounded by lagTimeout.
const (
	lagInterval = 2 * time.Second
	lagTimeout  = time.Second
)

// lagMonitor keeps linkraft_replication_lag_entries while this node
// leads. It is a leader duty, and drops every series when leadership ends:
// a follower's gauge must come from the leader only, or two nodes would
// report one follower.
type lagMonitor struct {
	gauge *prometheus.GaugeVec
	// servers is the configuration; others asks the other servers what
	// they applied (a server that does not answer is absent); own is what
	// this node applied.
	servers func() ([]raft.Server, error)
	others  func(ctx context.Context, servers []raft.Server) map[string]uint64
	own     func() uint64
}

// run measures every lagInterval until stop.
func (m *lagMonitor) run(stop <-chan struct{}) {
	defer m.gauge.Reset()
	tick := time.NewTicker(lagInterval)
	defer tick.Stop()
	known := map[string]uint64{} // follower id → last applied index it reported
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			m.measure(known)
		}
	}
}

// measure asks every follower of the configuration for its applied index
// and sets each one's gauge. A follower that does not answer keeps the
// index it last reported, so its lag grows while the leader moves on; one
// that left the configuration loses its series.
func (m *lagMonitor) measure(known map[string]uint64) {
	servers, err := m.servers()
	if err != nil {
		return
	}
	inConfig := map[string]bool{}
	for _, s := range servers {
		inConfig[string(s.ID)] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), lagTimeout)
	defer cancel()
	maps.Copy(known, m.others(ctx, servers))
	// Sampled after the answers: a lag is never understated.
	leaderApplied := m.own()
	for id, applied := range known {
		if !inConfig[id] {
			delete(known, id)
			m.gauge.DeleteLabelValues(id)
			continue
		}
		m.gauge.WithLabelValues(id).Set(float64(lagOf(leaderApplied, applied)))
	}
}

// lagOf is how many entries applied lags behind leader; a follower's
// answer can be newer than the leader's sample, which is no lag.
func lagOf(leader, applied uint64) uint64 {
	if applied >= leader {
		return 0
	}
	return leader - applied
}

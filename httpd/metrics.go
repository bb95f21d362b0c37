package httpd

import (
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/linkraft/linkraft/fsm"
)

// metrics holds this server's Prometheus registry. Per-route children are
// resolved once and cached so that instrumenting a request allocates nothing.
//
// The registry serves, besides this package's metrics: the cluster
// package's (Node.Collectors, registered here: cluster measures, httpd
// exposes), the Go and process collectors, and whatever the caller put in
// the registry it passed (the command puts Raft's and memberlist's
// go-metrics sink there).
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec

	mu     sync.RWMutex
	routes map[string]*routeMetrics

	redirectRoute *routeMetrics
}

type routeMetrics struct {
	name     string
	latency  prometheus.Observer
	requests *prometheus.CounterVec

	// last is the counter of the status this route counted last: a route
	// answers the same status nearly every time (a redirect its 30x), and
	// finding it here takes no lock, where a lock's count is a cache line
	// every core serving requests writes.
	last atomic.Pointer[statusCounter]

	mu       sync.Mutex
	byStatus map[int]*statusCounter
}

// statusCounter counts one route's answers of one status.
type statusCounter struct {
	status  int
	counter prometheus.Counter
}

func newMetrics(node Self, clicks Clicks, state *fsm.FSM, registry *prometheus.Registry, version string) *metrics {
	if registry == nil {
		registry = prometheus.NewRegistry()
	}
	m := &metrics{
		registry: registry,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "linkraft_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "linkraft_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route"}),
		routes: map[string]*routeMetrics{},
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	m.registry.MustRegister(
		m.requests, m.latency, buildInfo(version),
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}),
		gauge("linkraft_raft_leader", "1 if this node is the Raft leader.", func() float64 {
			if node.IsLeader() {
				return 1
			}
			return 0
		}),
		gauge("linkraft_raft_term", "Current Raft term.", func() float64 { return float64(node.Local().Term) }),
		gauge("linkraft_raft_commit_index", "Last committed Raft index.", func() float64 { return float64(node.Local().CommitIndex) }),
		gauge("linkraft_raft_applied_index", "Last Raft index applied to the state machine.", func() float64 { return float64(node.Local().AppliedIndex) }),
		gauge("linkraft_links", "Links in the replicated state.", func() float64 { return float64(state.Len()) }),
		gauge("linkraft_clicks_pending", "Clicks counted on this node and not yet flushed.", func() float64 { return float64(clicks.Pending()) }),
	)
	m.registry.MustRegister(engineCollector{state})
	m.registry.MustRegister(node.Collectors()...)
	m.redirectRoute = m.route("redirect")
	return m
}

// buildInfo is linkraft_build_info: always 1, labelled with the build, so
// that the versions a rolling upgrade mixes show in one query and can be
// alerted on. The revision is the commit the binary was built from, when
// it was built in a checkout ("unknown" otherwise).
func buildInfo(version string) prometheus.Collector {
	revision := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "linkraft_build_info", Help: "1, labelled with the build this node runs.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

func (m *metrics) route(name string) *routeMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.routes[name]; ok {
		return r
	}
	r := &routeMetrics{
		name: name, latency: m.latency.WithLabelValues(name), requests: m.requests,
		byStatus: map[int]*statusCounter{},
	}
	m.routes[name] = r
	return r
}

func (r *routeMetrics) observe(status int, start time.Time) {
	r.latency.Observe(time.Since(start).Seconds())
	c := r.last.Load()
	if c == nil || c.status != status {
		c = r.counterOf(status)
		r.last.Store(c)
	}
	c.counter.Inc()
}

// counterOf is the counter of the route's answers of status.
func (r *routeMetrics) counterOf(status int) *statusCounter {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.byStatus[status]
	if !ok {
		c = &statusCounter{status, r.requests.WithLabelValues(r.name, strconv.Itoa(status))}
		r.byStatus[status] = c
	}
	return c
}

// instrument wraps a routed handler with request counting and latency.
func (m *metrics) instrument(name string, h fasthttp.RequestHandler) fasthttp.RequestHandler {
	r := m.route(name)
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		h(ctx)
		r.observe(ctx.Response.StatusCode(), start)
	}
}

// instrumentRedirect is instrument for the redirect path, without a closure.
// The start time is the one fasthttp took when the request arrived, which
// saves a clock read on the hottest path.
func (m *metrics) instrumentRedirect(ctx *fasthttp.RequestCtx, code []byte, h func(*fasthttp.RequestCtx, []byte)) {
	h(ctx, code)
	m.redirectRoute.observe(ctx.Response.StatusCode(), ctx.Time())
}

func (m *metrics) handler() fasthttp.RequestHandler {
	return fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}))
}

// engineCollector reads the state engine's counters once per scrape.
type engineCollector struct{ state *fsm.FSM }

var (
	engineCacheHits = prometheus.NewDesc("linkraft_engine_block_cache_hits_total",
		"Reads of the state engine answered from its block cache (--engine-cache-mb).", nil, nil)
	engineCacheMisses = prometheus.NewDesc("linkraft_engine_block_cache_misses_total",
		"Reads of the state engine that went to its files.", nil, nil)
	engineCacheBytes = prometheus.NewDesc("linkraft_engine_block_cache_bytes",
		"Bytes in the state engine's block cache.", nil, nil)
	engineDiskBytes = prometheus.NewDesc("linkraft_engine_disk_bytes",
		"Bytes of the state engine's files (<data-dir>/engine).", nil, nil)
	recordCacheHits = prometheus.NewDesc("linkraft_record_cache_hits_total",
		"Reads of a link's record answered from the record cache (--record-cache).", nil, nil)
	recordCacheMisses = prometheus.NewDesc("linkraft_record_cache_misses_total",
		"Reads of a link's record that went to the state engine.", nil, nil)
	linkIDsUsed = prometheus.NewDesc("linkraft_link_ids_used",
		"Link ids the cluster has given: every link created or imported, deleted ones included.", nil, nil)
	linkIDsLimit = prometheus.NewDesc("linkraft_link_ids_limit",
		"Link ids the cluster can give (4294967295 until it is raised to the entry level of 64-bit record positions); at the limit creates are refused (507).", nil, nil)
)

func (engineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- engineCacheHits
	ch <- engineCacheMisses
	ch <- engineCacheBytes
	ch <- engineDiskBytes
	ch <- recordCacheHits
	ch <- recordCacheMisses
	ch <- linkIDsUsed
	ch <- linkIDsLimit
}

func (c engineCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.state.EngineStats()
	ch <- prometheus.MustNewConstMetric(engineCacheHits, prometheus.CounterValue, float64(st.BlockCacheHits))
	ch <- prometheus.MustNewConstMetric(engineCacheMisses, prometheus.CounterValue, float64(st.BlockCacheMisses))
	ch <- prometheus.MustNewConstMetric(engineCacheBytes, prometheus.GaugeValue, float64(st.BlockCacheBytes))
	ch <- prometheus.MustNewConstMetric(engineDiskBytes, prometheus.GaugeValue, float64(st.DiskBytes))
	hits, misses := c.state.RecordCacheStats()
	ch <- prometheus.MustNewConstMetric(recordCacheHits, prometheus.CounterValue, float64(hits))
	ch <- prometheus.MustNewConstMetric(recordCacheMisses, prometheus.CounterValue, float64(misses))
	used, limit := c.state.LinkIDs()
	ch <- prometheus.MustNewConstMetric(linkIDsUsed, prometheus.GaugeValue, float64(used))
	ch <- prometheus.MustNewConstMetric(linkIDsLimit, prometheus.GaugeValue, float64(limit))
}

package mcplimit

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// zoneMetrics are one zone's Prometheus metrics. They live with the zone,
// so counts survive config reloads, and are registered into the metrics
// registry of every config that uses the zone. No label ever carries an
// identity, a fingerprint or an address.
type zoneMetrics struct {
	refusals  *prometheus.CounterVec
	dryRun    *prometheus.CounterVec
	admitted  prometheus.CounterFunc // reads admittedN
	inflight  prometheus.GaugeFunc   // reads inflightN
	tracked   *prometheus.GaugeVec
	degraded  prometheus.Gauge
	flushes   *prometheus.CounterVec
	decision  prometheus.Histogram
	upstream  prometheus.CounterFunc // reads upstreamN
	storeRTT  prometheus.Histogram
	storeErrs prometheus.Counter
	storeHits prometheus.Counter
	byLayer   [numLayers]prometheus.Counter
	dryLayer  [numLayers]prometheus.Counter
	refreshed func(*zoneMetrics)

	regsMu sync.Mutex
	// regs holds the registries m is registered in, with how many hold it
	// there: the zone's handlers of each config (one registry per config
	// load), and the admin endpoint (admin). A registry no one holds is
	// let go: each is a config's whole set of metrics.
	regs  map[*prometheus.Registry]int
	admin *prometheus.Registry // the one the admin endpoint serves
	gone  bool                 // unregistered for good: the zone is gone

	// The counts themselves, which the admin API reads too; admitted,
	// upstream and in-flight are exported from them at scrape time, so a
	// request moves one atomic per count rather than two.
	refusedN  [numLayers]atomic.Uint64
	dryN      [numLayers]atomic.Uint64
	admittedN atomic.Uint64
	upstreamN atomic.Uint64
	inflightN atomic.Int64
}

// refused counts one refusal (or would-be refusal in dry run) of layer l.
func (m *zoneMetrics) refused(l layer, dry bool) {
	if dry {
		m.dryLayer[l].Inc()
		m.dryN[l].Add(1)
		return
	}
	m.byLayer[l].Inc()
	m.refusedN[l].Add(1)
}

// admit counts one admitted request.
func (m *zoneMetrics) admit() {
	m.admittedN.Add(1)
}

// upstreamThrottled counts one backend 429 passed through.
func (m *zoneMetrics) upstreamThrottled() {
	m.upstreamN.Add(1)
}

// inflightAdd moves the in-flight gauge by delta.
func (m *zoneMetrics) inflightAdd(delta int64) {
	m.inflightN.Add(delta)
}

func newZoneMetrics(zone string) *zoneMetrics {
	zl := prometheus.Labels{"zone": zone}
	m := &zoneMetrics{
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_ratelimit_refusals_total", Help: "Requests refused, by layer.", ConstLabels: zl,
		}, []string{"layer"}),
		dryRun: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_ratelimit_dry_run_refusals_total", Help: "Requests a layer would have refused in dry run, by layer.", ConstLabels: zl,
		}, []string{"layer"}),
		tracked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcp_ratelimit_tracked", Help: "Entries tracked in memory, by kind.", ConstLabels: zl,
		}, []string{"kind"}),
		degraded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcp_ratelimit_quota_degraded", Help: "1 while the store holding the quotas (Caddy storage, or Redis with store redis) is unreachable and quotas are counted in memory.", ConstLabels: zl,
		}),
		flushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_ratelimit_flushes_total", Help: "Quota flushes to storage, by result.", ConstLabels: zl,
		}, []string{"result"}),
		decision: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "mcp_ratelimit_decision_seconds", Help: "Time to admit or refuse a request.", ConstLabels: zl,
			Buckets: []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 1e-3, 1e-2},
		}),
		storeRTT: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "mcp_ratelimit_store_roundtrip_seconds", Help: "Round trips to the Redis store (one per decision it answered).", ConstLabels: zl,
			Buckets: []float64{5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 1e-1},
		}),
		storeErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_ratelimit_store_errors_total", Help: "Redis store calls that failed or timed out (the request was then decided locally).", ConstLabels: zl,
		}),
		storeHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_ratelimit_store_local_hits_total", Help: "Refusals of keys known to be over their limit, answered without a round trip to the Redis store.", ConstLabels: zl,
		}),
	}
	m.admitted = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "mcp_ratelimit_admitted_total", Help: "Requests admitted.", ConstLabels: zl,
	}, func() float64 { return float64(m.admittedN.Load()) })
	m.inflight = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mcp_ratelimit_inflight", Help: "Metered calls in flight.", ConstLabels: zl,
	}, func() float64 { return float64(m.inflightN.Load()) })
	m.upstream = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "mcp_ratelimit_upstream_throttled_total", Help: "Backend 429 answers passed through (not our refusals).", ConstLabels: zl,
	}, func() float64 { return float64(m.upstreamN.Load()) })
	for l := range numLayers {
		m.byLayer[l] = m.refusals.WithLabelValues(layerNames[l])
		m.dryLayer[l] = m.dryRun.WithLabelValues(layerNames[l])
	}
	for _, r := range []string{"ok", "error"} {
		m.flushes.WithLabelValues(r)
	}
	return m
}

func (m *zoneMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.refusals, m.dryRun, m.admitted, m.inflight, m.tracked, m.degraded, m.flushes, m.decision, m.upstream, m.storeRTT, m.storeErrs, m.storeHits}
}

// Describe implements prometheus.Collector.
func (m *zoneMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *zoneMetrics) Collect(ch chan<- prometheus.Metric) {
	if m.refreshed != nil {
		m.refreshed(m)
	}
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// register adds m to reg, a handler's (of the config loading): it stays
// there until the handler lets go of it (release).
func (m *zoneMetrics) register(reg *prometheus.Registry) error {
	m.regsMu.Lock()
	defer m.regsMu.Unlock()
	return m.holdLocked(reg)
}

// holdLocked adds a hold of m in reg, registering it there at the first.
func (m *zoneMetrics) holdLocked(reg *prometheus.Registry) error {
	if reg == nil || m.gone {
		return nil
	}
	if m.regs[reg] == 0 {
		err := reg.Register(m)
		if _, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); !ok && err != nil {
			return err
		}
		if m.regs == nil {
			m.regs = map[*prometheus.Registry]int{}
		}
	}
	m.regs[reg]++
	return nil
}

// release drops a hold of m in reg; at the last, m leaves reg, and m no
// longer keeps the registry, whose config is gone, from being freed.
func (m *zoneMetrics) release(reg *prometheus.Registry) {
	m.regsMu.Lock()
	defer m.regsMu.Unlock()
	m.releaseLocked(reg)
}

func (m *zoneMetrics) releaseLocked(reg *prometheus.Registry) {
	n, ok := m.regs[reg]
	if !ok {
		return
	}
	if n > 1 {
		m.regs[reg] = n - 1
		return
	}
	delete(m.regs, reg)
	reg.Unregister(m)
}

// serveAdmin adds m to reg, the registry the admin endpoint serves from
// now on (that of the config loading, even one Caddy then rejects), and
// lets go of the one it served before.
func (m *zoneMetrics) serveAdmin(reg *prometheus.Registry) {
	m.regsMu.Lock()
	defer m.regsMu.Unlock()
	if reg == m.admin || m.gone {
		return
	}
	if err := m.holdLocked(reg); err != nil {
		return
	}
	if m.admin != nil {
		m.releaseLocked(m.admin)
	}
	m.admin = reg
}

// unregister takes m out of every registry it was added to: its zone is
// gone.
func (m *zoneMetrics) unregister() {
	m.regsMu.Lock()
	defer m.regsMu.Unlock()
	for reg := range m.regs {
		reg.Unregister(m)
	}
	m.regs, m.admin, m.gone = nil, nil, true
}

// revive lets m be registered again: a zone started anew took it up
// (see adoptParked).
func (m *zoneMetrics) revive() {
	m.regsMu.Lock()
	defer m.regsMu.Unlock()
	m.gone = false
}

// observe records one admission decision's duration.
func (m *zoneMetrics) observe(start time.Time) {
	m.decision.Observe(time.Since(start).Seconds())
}

package mcplimit

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// decisionBounds are the upper bounds of mcp_ratelimit_decision_seconds.
var decisionBounds = [...]time.Duration{
	time.Microsecond, 2500 * time.Nanosecond, 5 * time.Microsecond, 10 * time.Microsecond,
	25 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond,
	time.Millisecond, 10 * time.Millisecond,
}

// latencyHistogram is the histogram of decision times. Every request
// observes it, so an observation is two atomic adds: its bucket's count
// and the sum in nanoseconds. A prometheus.Histogram takes four, among
// them a compare-and-swap loop on the sum, on counters both cores share.
// The counts become a Prometheus histogram when scraped.
type latencyHistogram struct {
	desc   *prometheus.Desc
	counts [len(decisionBounds) + 1]atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sum    atomic.Int64                           // nanoseconds
}

// newLatencyHistogram returns the histogram opts describe, with the
// buckets of decisionBounds.
func newLatencyHistogram(opts prometheus.Opts) *latencyHistogram {
	name := prometheus.BuildFQName(opts.Namespace, opts.Subsystem, opts.Name)
	return &latencyHistogram{desc: prometheus.NewDesc(name, opts.Help, nil, opts.ConstLabels)}
}

// observe records one duration: in the first bucket whose bound is at
// least d, as Prometheus buckets count (le).
func (h *latencyHistogram) observe(d time.Duration) {
	i := 0
	for i < len(decisionBounds) && d > decisionBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

// Describe implements prometheus.Collector.
func (h *latencyHistogram) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

// Collect implements prometheus.Collector: the counts as a cumulative
// histogram in seconds. They are read one after another, not as one
// snapshot: a scrape taken while requests run may hold in its sum an
// observation its count misses, or the reverse, which the next scrape
// settles (rates over scrapes are unaffected).
func (h *latencyHistogram) Collect(ch chan<- prometheus.Metric) {
	buckets := make(map[float64]uint64, len(decisionBounds))
	var count uint64
	for i, le := range decisionBounds {
		count += h.counts[i].Load()
		buckets[le.Seconds()] = count
	}
	count += h.counts[len(decisionBounds)].Load()
	ch <- prometheus.MustNewConstHistogram(h.desc, count, time.Duration(h.sum.Load()).Seconds(), buckets)
}

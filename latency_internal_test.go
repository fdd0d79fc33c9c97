package mcplimit

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestLatencyHistogramCountsAsPrometheus feeds the decision histogram and
// a prometheus.Histogram of the same buckets the same durations (on each
// bound, a nanosecond either side, and beyond the last) and compares what
// a scrape of each reads.
func TestLatencyHistogramCountsAsPrometheus(t *testing.T) {
	opts := prometheus.Opts{Name: "mcp_ratelimit_decision_seconds", Help: "h", ConstLabels: prometheus.Labels{"zone": "z"}}
	ours := newLatencyHistogram(opts)
	var bounds []float64
	for _, b := range decisionBounds {
		bounds = append(bounds, b.Seconds())
	}
	ref := prometheus.NewHistogram(prometheus.HistogramOpts{Name: opts.Name, Help: opts.Help, ConstLabels: opts.ConstLabels, Buckets: bounds})
	for _, b := range decisionBounds {
		for _, d := range []time.Duration{b - 1, b, b + 1} {
			ours.observe(d)
			ref.Observe(d.Seconds())
		}
	}
	for _, d := range []time.Duration{0, time.Second, time.Hour} {
		ours.observe(d)
		ref.Observe(d.Seconds())
	}
	got, want := scrapeHistogram(t, ours), scrapeHistogram(t, ref)
	if got.GetSampleCount() != want.GetSampleCount() || math.Abs(got.GetSampleSum()-want.GetSampleSum()) > 1e-9 {
		t.Fatalf("count, sum = %d, %g; prometheus.Histogram %d, %g", got.GetSampleCount(), got.GetSampleSum(), want.GetSampleCount(), want.GetSampleSum())
	}
	if len(got.Bucket) != len(want.Bucket) {
		t.Fatalf("%d buckets, want %d", len(got.Bucket), len(want.Bucket))
	}
	for i, b := range want.Bucket {
		if g := got.Bucket[i]; g.GetUpperBound() != b.GetUpperBound() || g.GetCumulativeCount() != b.GetCumulativeCount() {
			t.Errorf("bucket le=%g: %d; prometheus.Histogram le=%g: %d", g.GetUpperBound(), g.GetCumulativeCount(), b.GetUpperBound(), b.GetCumulativeCount())
		}
	}
}

// scrapeHistogram registers c alone and returns the histogram a scrape
// reads from it.
func scrapeHistogram(t *testing.T, c prometheus.Collector) *dto.Histogram {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || len(mfs[0].Metric) != 1 {
		t.Fatalf("gather: %v, %d families", err, len(mfs))
	}
	return mfs[0].Metric[0].GetHistogram()
}

package mcplimit

import (
	"math"
	"testing"

	"golang.org/x/time/rate"
)

// A layer given as `{}` (or with burst 0) keeps the layer's default
// burst, as RateLimit.Burst documents: `"tenant":{}` is 5/s burst 20, not
// a burst of the rate's count.
func TestEmptyRateLimitKeepsTheDefaultBurst(t *testing.T) {
	for _, rl := range []*RateLimit{{}, {Burst: 0}} {
		b, off, err := resolveRate(rl, "5/s", 20)
		if err != nil || off || b.burst != 20 {
			t.Fatalf("resolveRate(%+v, 5/s, burst 20) = burst %d, off %v, %v; want burst 20", rl, b.burst, off, err)
		}
	}
}

// A rate's unit may be spelled out (20/min, as SPEC's plans write it),
// and a refusal names it as its client reads it: per-second, per-minute,
// per-hour.
func TestRefusalsNameTheRatesUnit(t *testing.T) {
	for _, c := range []struct {
		text, want string
		perSecond  rate.Limit
		n          int
	}{
		{"5/s", "per-second", 5, 5}, {"5/sec", "per-second", 5, 5}, {"5/second", "per-second", 5, 5},
		{"6/m", "per-minute", 0.1, 6}, {"6/min", "per-minute", 0.1, 6}, {"6/minute", "per-minute", 0.1, 6},
		{"36/h", "per-hour", 0.01, 36}, {"36/hr", "per-hour", 0.01, 36}, {"36/hour", "per-hour", 0.01, 36},
	} {
		r, n, err := parseRate(c.text)
		if err != nil || math.Abs(float64(r-c.perSecond)) > 1e-12 || n != c.n {
			t.Errorf("parseRate(%s) = %v, %d, %v; want %v/s, %d", c.text, r, n, err, c.perSecond, c.n)
		}
		if got := (bucketLimit{text: c.text}).unitWord(); got != c.want {
			t.Errorf("unit of %s is %q, want %q", c.text, got, c.want)
		}
	}
	for _, bad := range []string{"5/d", "5/M", "5/mins", "5/", "5/ms"} {
		if _, _, err := parseRate(bad); err == nil {
			t.Errorf("parseRate(%s) accepted it", bad)
		}
	}
}

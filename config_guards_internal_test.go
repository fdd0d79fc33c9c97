package mcplimit

import "testing"

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

// A refusal names a rate's unit as its client reads it: per-second,
// per-minute, per-hour.
func TestRefusalsNameTheRatesUnit(t *testing.T) {
	for text, want := range map[string]string{"5/s": "per-second", "5/m": "per-minute", "1/h": "per-hour"} {
		if got := (bucketLimit{text: text}).unitWord(); got != want {
			t.Errorf("unit of %s is %q, want %q", text, got, want)
		}
	}
}

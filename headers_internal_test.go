package mcplimit

import (
	"math"
	"testing"
	"time"
)

func TestCeilSecondsRoundsUpToAtLeastOne(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{
		{math.MinInt64, 1}, {-1500 * time.Millisecond, 1}, {0, 1}, {1, 1},
		{time.Second, 1}, {time.Second + 1, 2}, {59*time.Second + 999*time.Millisecond, 60},
		{math.MaxInt64, 9223372037},
	} {
		if got := ceilSeconds(c.d); got != c.want {
			t.Errorf("ceilSeconds(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

// The RateLimit header's quota reset counts whole seconds to the next
// period, rounding a fraction of a second up, before 1970 too.
func TestSecondsToAPeriodsResetIsItsCeiling(t *testing.T) {
	for _, now := range []time.Time{
		time.Date(2026, 12, 1, 23, 59, 59, 0, time.UTC),
		time.Date(2026, 12, 1, 23, 59, 58, 1, time.UTC),
		time.Date(2026, 12, 31, 0, 0, 0, 999999999, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 58, 500000000, time.UTC),
		time.Date(2026, 12, 1, 12, 0, 0, 250000000, time.FixedZone("x", 5*3600+1800)),
	} {
		for _, p := range quotaPeriods {
			next := p.Next(now)
			want := int64(math.Ceil(next.Sub(now).Seconds()))
			if got := secondsTo(next, now); got != want {
				t.Errorf("%v, %v: secondsTo = %d, want %d", now, p, got, want)
			}
		}
	}
}

// A RateLimit figure is a structured-field Integer a parser accepts: a
// quota overshot across instances, or lowered live below what was used,
// has nothing left, never a negative count; a window past 15 digits is
// the largest figure.
func TestAppendSFIntClampsToAValidFigure(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{42, "42"},
		{0, "0"},
		{-7, "0"},
		{math.MinInt64, "0"},
		{maxFigure + 1, "999999999999999"},
		{math.MaxInt64, "999999999999999"},
	} {
		if got := string(appendSFInt(nil, c.n)); got != c.want {
			t.Errorf("appendSFInt(%d) = %s, want %s", c.n, got, c.want)
		}
	}
}

package buckets

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// Limit is the shape of one key's token bucket: it refills at Rate tokens per
// second and holds at most Burst tokens.
//
// As with [rate.Limiter], a Rate of [rate.Inf] admits everything (Burst is
// then ignored and no bucket is kept), and a Rate of 0 (or less) never
// refills, so such a bucket hands out its Burst once. A negative Burst is
// treated as 0, which refuses every request unless Rate is rate.Inf.
type Limit struct {
	// Rate is the refill rate in tokens per second.
	Rate rate.Limit
	// Burst is the bucket size: the most tokens available at once.
	Burst int
}

// tokensIn is the number of tokens r earns in ns nanoseconds. It mirrors the
// conversion inside x/time/rate so that a bucket here and a rate.Limiter make
// the same decisions on the same schedule.
func tokensIn(r rate.Limit, ns int64) float64 {
	if !(r > 0) {
		return 0
	}
	return time.Duration(ns).Seconds() * float64(r)
}

// durationOf is how long r takes to earn tokens tokens, truncated to the
// nanosecond as x/time/rate does; rate.InfDuration when it never will.
func durationOf(r rate.Limit, tokens float64) time.Duration {
	if !(r > 0) {
		return rate.InfDuration
	}
	d := tokens / float64(r) * float64(time.Second)
	if d >= math.MaxInt64 {
		return rate.InfDuration
	}
	return time.Duration(d)
}

func atLeastNanosecond(d time.Duration) time.Duration {
	return max(d, time.Nanosecond)
}

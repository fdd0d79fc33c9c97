package buckets

import (
	"time"

	"golang.org/x/time/rate"
)

// bucket is one key's token bucket: the state of a rate.Limiter in 40 bytes,
// without its mutex (the shard's lock guards it) and with times stored as
// nanoseconds since the shard's epoch instead of two 24-byte time.Times.
type bucket struct {
	tokens float64    // level at last; may dip a hair below 0, as in rate.Limiter
	last   int64      // when tokens was computed, in ns since the shard epoch
	rate   rate.Limit // the Limit the bucket was last used with
	burst  int
	seq    uint64 // which occupant of its slot this is; 0 while the slot is free
}

// level is the number of tokens at at. Time running backwards earns nothing.
func (b *bucket) level(at int64) float64 {
	t := b.tokens
	if at > b.last {
		t += tokensIn(b.rate, at-b.last)
	}
	return min(t, float64(b.burst))
}

// advance brings tokens up to date at at. last never moves backwards, so
// out-of-order times from concurrent callers cannot earn the same interval
// twice.
func (b *bucket) advance(at int64) {
	b.tokens = b.level(at)
	b.last = max(b.last, at)
}

// retune switches the bucket to lim at at, keeping its level, as
// rate.Limiter.SetLimitAt does. A bucket used since the last limits
// change (changed, see Set.Advance) had its own limits until now (the key
// moved to other limits: a tier it left), so it first earns its old rate
// up to at. One not used since was banked at the change, or left without
// a rate by Set.Rebase: the time since earns the new rate, the limit in
// force from then on. A lower burst caps the level.
func (b *bucket) retune(lim Limit, at, changed int64) {
	if b.rate == lim.Rate && b.burst == lim.Burst {
		return
	}
	if b.rate > 0 && b.last > changed {
		b.advance(at)
	}
	b.rate = lim.Rate
	b.tokens = min(b.tokens, float64(b.burst), float64(lim.Burst))
	b.burst = lim.Burst
	b.advance(at)
}

// take takes n tokens at at, or reports how long until it could and takes
// nothing.
func (b *bucket) take(n int, at int64) (wait time.Duration, ok bool) {
	level := b.level(at)
	if n > b.burst {
		// Never as asked: the wait is until a request of the burst's
		// size fits.
		return atLeastNanosecond(b.retryWait(b.burst, at, shortfall(b.rate, b.burst, level))), false
	}
	if wait := shortfall(b.rate, n, level); wait > 0 {
		return b.retryWait(n, at, wait), false
	}
	b.tokens = level - float64(n)
	b.last = max(b.last, at)
	return 0, true
}

// shortfall is how long a bucket at level needs to refill at r before n
// tokens are there, truncated to the nanosecond: like rate.Limiter.AllowN, a
// shortfall worth less than a nanosecond of refill is admitted.
func shortfall(r rate.Limit, n int, level float64) time.Duration {
	missing := float64(n) - level
	if missing <= 0 {
		return 0
	}
	return durationOf(r, missing)
}

// retryWait makes sure a retry after wait is admitted, by checking it with
// the very arithmetic it will go through: truncation and float rounding can
// leave the estimate a nanosecond short.
func (b *bucket) retryWait(n int, at int64, wait time.Duration) time.Duration {
	if wait >= rate.InfDuration/2 {
		return wait
	}
	for i := 0; i < 4 && shortfall(b.rate, n, b.level(at+int64(wait))) > 0; i++ {
		wait++
	}
	return wait
}

// give puts n tokens back at at, never above the burst.
func (b *bucket) give(n int, at int64) {
	b.advance(at)
	b.tokens = min(b.tokens+float64(n), float64(b.burst))
}

// untilFull is how long until the bucket is full at at: 0 when it is, which
// is when it may be dropped.
func (b *bucket) untilFull(at int64) time.Duration {
	missing := float64(b.burst) - b.level(at)
	if missing <= 0 {
		return 0
	}
	return atLeastNanosecond(durationOf(b.rate, missing))
}

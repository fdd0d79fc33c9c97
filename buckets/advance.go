package buckets

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// Advance banks every bucket's refill up to now at the rate it has had so
// far. Call it when limits change (a config reload): a bucket retuned at
// its next use then earns the old rate only until the change, and the new
// rate from the change on — never a fresh burst, never a lost refill.
//
// Until its next use, a bucket does not know its new limits. So it is not
// dropped as full on the old rate's word: only if it was full at the
// change, or once refill, the longest time any limit now in force (the
// longest burst/rate among them) takes to fill an empty bucket, has
// passed. And at a later change it is credited the time since the
// previous one at slowest, the slowest rate that was in force then, not
// at the rate it was last used with, up to largest, the largest burst
// then in force, not the burst it was last used with: a bucket that
// refilled past that one under a larger burst is not full (and dropped,
// to come back with a fresh burst) but partly so, and its next use caps
// it at its new burst.
func (s *Set[K]) Advance(now time.Time, refill time.Duration, slowest rate.Limit, largest int) {
	prev := rate.Limit(math.Float64frombits(s.slowest.Swap(math.Float64bits(float64(slowest)))))
	prevLargest := int(s.largest.Swap(int64(largest)))
	s.staleFor.Store(int64(refill))
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		at := sh.clock.Since(now)
		for _, idx := range sh.index {
			sh.slab[idx].bank(at, sh.changed, prev, prevLargest)
		}
		sh.changed = at
		sh.mu.Unlock()
	}
}

// noChange is a shard's changed before any Advance.
const noChange = math.MinInt64

// bank brings b's tokens up to date at at, for a limits change: at its own
// rate if it was used since the previous change (at changed). Else its
// limits since then are unknown, so it earns prev, the slowest rate that
// was in force, up to largest, the largest burst that was (its burst
// becomes that one, until its next use retunes it); and so does a bucket
// an earlier Rebase left without a rate.
func (b *bucket) bank(at, changed int64, prev rate.Limit, largest int) {
	if (changed == noChange || b.last > changed) && b.rate > 0 {
		b.advance(at)
		return
	}
	b.burst = max(b.burst, largest)
	if at > b.last {
		b.tokens = min(b.tokens+tokensIn(prev, at-b.last), float64(b.burst))
		b.last = at
	}
}

// untilDroppable is how long until bucket b may be dropped at at: until it
// is full, or, when it was not used since the last limits change, until
// it was full at the change or staleFor has passed since.
func (sh *shard[K]) untilDroppable(b *bucket, at int64, staleFor time.Duration) time.Duration {
	if sh.changed == noChange || b.last > sh.changed {
		return b.untilFull(at)
	}
	if b.tokens >= float64(b.burst) {
		return 0
	}
	return max(time.Duration(sh.changed-at)+staleFor, 0)
}

// Rebase is Advance for the buckets of keys alone, when only their own
// limits change (an override of one identity): each banks its refill up
// to now at the rate it has had so far, as Advance would, and then earns
// nothing until its next use tells its new limit and retunes it, which
// credits the time since at that limit. Until then it is not dropped as
// full (unless it is, at its old burst), so it cannot come back with a
// fresh, larger burst; it stays until that use, or until a later Advance
// lets it go as any bucket unused since a change. A change before that use
// (Advance or Rebase) credits it the time since at the slowest rate in
// force (see bank) — also when no use comes because the layer is off for
// the key — up to the largest burst in force: slowest and largest, those
// of the limits now in force (the keys' new ones among them), which they
// replace. The keys' old limits were only ever theirs, and their buckets
// are banked under them here: a slower rate or larger burst that an
// override removed now no longer bears on anyone's credit. Rebase is for
// the few keys with limits of their own (overrides). Every other bucket is
// left as it is, its limits unchanged.
func (s *Set[K]) Rebase(now time.Time, keys []K, slowest rate.Limit, largest int) {
	prev := rate.Limit(math.Float64frombits(s.slowest.Load()))
	prevLargest := int(s.largest.Load())
	for _, key := range keys {
		sh := &s.shards[s.shardIndex(key)]
		sh.mu.Lock()
		if idx, ok := sh.index[key]; ok {
			b := &sh.slab[idx]
			b.bank(sh.clock.Since(now), sh.changed, prev, prevLargest)
			b.rate = 0
		}
		sh.mu.Unlock()
	}
	if slowest > 0 {
		s.slowest.Store(math.Float64bits(float64(slowest)))
		s.largest.Store(int64(largest))
	}
}

package buckets

import (
	"math"
	"time"
)

// Advance banks every bucket's refill up to now at the rate it has had so
// far. Call it when limits change (a config reload): a bucket retuned at
// its next use then earns the old rate only until the change, and the new
// rate from the change on — never a fresh burst, never a lost refill.
//
// Until its next use, a bucket does not know its new limits, so it is not
// dropped as full on the old rate's word: only if it was full at the
// change, or once refill bounds the time any limit now in force (the
// longest burst/rate among them) takes to fill an empty bucket. Sets keep
// the longest refill they were given.
func (s *Set[K]) Advance(now time.Time, refill time.Duration) {
	for old := s.staleFor.Load(); int64(refill) > old && !s.staleFor.CompareAndSwap(old, int64(refill)); old = s.staleFor.Load() {
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		at := sh.clock.Since(now)
		for _, idx := range sh.index {
			sh.slab[idx].advance(at)
		}
		sh.changed = at
		sh.mu.Unlock()
	}
}

// noChange is a shard's changed before any Advance.
const noChange = math.MinInt64

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

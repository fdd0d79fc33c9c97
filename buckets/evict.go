package buckets

import (
	"time"

	"golang.org/x/time/rate"
)

// evictSample is how many buckets a new key at capacity examines for a full
// one before it is refused.
const evictSample = 8

// evictOne drops one full bucket among up to evictSample buckets of the shard
// (map iteration starts at a random place), for a new key to take its place
// in the count. If none is full it drops nothing and returns how long until
// the first of those examined will be.
func (sh *shard[K]) evictOne(at int64, staleFor time.Duration) (wait time.Duration, evicted bool) {
	wait = rate.InfDuration
	seen := 0
	for key, idx := range sh.index {
		d := sh.untilDroppable(&sh.slab[idx], at, staleFor)
		if d == 0 {
			sh.drop(key, idx)
			return 0, true
		}
		wait = min(wait, d)
		if seen++; seen == evictSample {
			break
		}
	}
	return wait, false
}

// evictOthers is how many other shards a new key at capacity tries when its
// own has no full bucket to evict.
const evictOthers = 3

// evictElsewhere tries to evict a full bucket in the shards after shard i,
// for a new key of shard i, whose lock the caller holds: it only takes the
// locks it gets at once (TryLock), so two callers never wait on each
// other's shards. wait is shard i's; the shortest wait seen is returned.
// While no bucket has been seen it goes on past evictOthers shards: a Set
// whose capacity was lowered far below the one New chose its shards for
// holds its few buckets in few of them, and a refusal must still say how
// long until one of them makes room.
func (s *Set[K]) evictElsewhere(i int, now time.Time, wait time.Duration) (time.Duration, bool) {
	for k := 1; (k <= evictOthers || wait == rate.InfDuration) && k < len(s.shards); k++ {
		sh := &s.shards[(i+k)%len(s.shards)]
		if !sh.mu.TryLock() {
			continue
		}
		w, evicted := sh.evictOne(sh.clock.Since(now), time.Duration(s.staleFor.Load()))
		sh.mu.Unlock()
		if evicted {
			return 0, true
		}
		wait = min(wait, w)
	}
	return wait, false
}

// Sweep removes the buckets that are full at now and returns how many it
// removed. A full bucket is indistinguishable from one that does not exist,
// so this changes no decision; it only frees room. Call it periodically from
// one goroutine; it locks one shard at a time.
func (s *Set[K]) Sweep(now time.Time) int {
	removed := 0
	for i := range s.shards {
		removed += s.shards[i].sweep(now, time.Duration(s.staleFor.Load()))
	}
	return removed
}

func (sh *shard[K]) sweep(now time.Time, staleFor time.Duration) int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	at := sh.clock.Since(now)
	removed := 0
	for key, idx := range sh.index {
		if sh.untilDroppable(&sh.slab[idx], at, staleFor) == 0 {
			sh.remove(key, idx)
			removed++
		}
	}
	return removed
}

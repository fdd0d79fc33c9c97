package known

import "time"

// Each calls fn for every entry, with the time of its last use, shard by
// shard, each shard's from the least to the most recently used. It visits a
// snapshot of each shard, so fn may call into the Set. Expired entries not
// yet removed are included; Restore skips them. Restoring in increasing
// last use, which a caller gets by sorting, is the fastest order.
func (s *Set[K]) Each(fn func(key K, lastUse time.Time)) {
	type saved struct {
		key  K
		last time.Time
	}
	var batch []saved
	for n := range s.shards {
		sh := &s.shards[n]
		sh.mu.Lock()
		batch = batch[:0]
		for i := sh.tail; i != none; i = sh.entries[i].prev {
			batch = append(batch, saved{sh.entries[i].key, sh.clock.Time(sh.entries[i].last)})
		}
		sh.mu.Unlock()
		for _, e := range batch {
			fn(e.key, e.last)
		}
	}
}

// Restore adds key as last used at lastUse, for loading a saved set, unless it
// has expired by now or is already present (a live entry is at least as
// recent). A lastUse after now counts as now. The entry takes its place in
// the least-recently-used order by lastUse, and the least recently used entry
// of the Set is evicted if the Set is full, which may be the restored entry
// itself. Restoring in increasing last use costs O(1) per entry.
func (s *Set[K]) Restore(key K, lastUse time.Time, now time.Time) {
	sh := &s.shards[s.shardIndex(key)]
	sh.mu.Lock()
	if _, ok := sh.index[key]; ok {
		sh.mu.Unlock()
		return
	}
	at := sh.clock.Since(now)
	last := min(sh.clock.Since(lastUse), at)
	if s.expired(last, at) {
		sh.mu.Unlock()
		return
	}
	after := int32(none) // the newest entry older than last goes behind the newer ones
	for j := sh.head; j != none && sh.entries[j].last > last; j = sh.entries[j].next {
		after = j
	}
	sh.add(key, last, after)
	sh.mu.Unlock()
	s.evictBeyondMax()
}

package known

import (
	"slices"
	"time"
)

// Each calls fn for every entry, with the time of its last use, from the least
// to the most recently used: the order in which [Set.Restore] rebuilds a set
// fastest. It visits a snapshot taken shard by shard, so fn may call into the
// Set. Expired entries not yet removed are included; Restore skips them.
func (s *Set[K]) Each(fn func(key K, lastUse time.Time)) {
	type saved struct {
		key  K
		last time.Time
	}
	var all []saved
	for n := range s.shards {
		sh := &s.shards[n]
		sh.mu.Lock()
		for i := sh.tail; i != none; i = sh.entries[i].prev {
			all = append(all, saved{sh.entries[i].key, sh.clock.Time(sh.entries[i].last)})
		}
		sh.mu.Unlock()
	}
	slices.SortStableFunc(all, func(a, b saved) int { return a.last.Compare(b.last) })
	for _, e := range all {
		fn(e.key, e.last)
	}
}

// Restore adds key as last used at lastUse, for loading a saved set, unless it
// has expired by now or is already present (a live entry is at least as
// recent). A lastUse after now counts as now. The entry takes its place in
// the least-recently-used order by lastUse, and the least recently used entry
// of its shard is evicted if the shard is full, which may be the restored
// entry itself. Restoring in the order Each visits costs O(1) per entry.
func (s *Set[K]) Restore(key K, lastUse time.Time, now time.Time) {
	n := s.shardIndex(key)
	sh := &s.shards[n]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.index[key]; ok {
		return
	}
	at := sh.clock.Since(now)
	last := min(sh.clock.Since(lastUse), at)
	if s.expired(last, at) {
		return
	}
	after := int32(none) // the newest entry older than last goes behind the newer ones
	for j := sh.head; j != none && sh.entries[j].last > last; j = sh.entries[j].next {
		after = j
	}
	sh.add(key, last, after)
	sh.evictBeyond(s.share(n))
}

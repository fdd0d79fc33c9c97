package known

import "time"

// Contains reports whether key is proven at now without touching it: for
// inspection (the admin API), not for admission.
func (s *Set[K]) Contains(key K, now time.Time) bool {
	sh := &s.shards[s.shardIndex(key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, ok := sh.index[key]
	return ok && !s.expired(sh.entries[i].last, sh.clock.Since(now))
}

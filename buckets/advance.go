package buckets

import "time"

// Advance banks every bucket's refill up to now at the rate it has had so
// far. Call it when limits change (a config reload): a bucket retuned at
// its next use then earns the old rate only until the change, and the new
// rate from the change on — never a fresh burst, never a lost refill.
func (s *Set[K]) Advance(now time.Time) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		at := sh.clock.Since(now)
		for _, idx := range sh.index {
			sh.slab[idx].advance(at)
		}
		sh.mu.Unlock()
	}
}

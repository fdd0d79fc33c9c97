package known

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/stripe"
)

// Set is a bounded set of proven identities. Its zero value is not usable;
// create one with [New].
type Set[K comparable] struct {
	hash    func(K) uint64
	seed    uint64
	shift   uint
	max     atomic.Int64
	ttl     atomic.Int64 // a time.Duration
	count   atomic.Int64 // entries in all shards
	evictMu sync.Mutex   // one evictor at a time, so none evicts below max
	shards  []shard[K]
	lapsed  func(key K, at time.Time, evicted bool)
}

// OnLapse makes the Set call fn for every key it drops unasked: expired
// (found so by Proven or Sweep) or evicted beyond the maximum (evicted),
// with the time of the drop; not for keys it is told to Forget. fn runs
// without the Set's locks held. Call OnLapse before the Set is used.
func (s *Set[K]) OnLapse(fn func(key K, at time.Time, evicted bool)) { s.lapsed = fn }

// lapse calls the OnLapse function, if any.
func (s *Set[K]) lapse(key K, at time.Time, evicted bool) {
	if s.lapsed != nil {
		s.lapsed(key, at, evicted)
	}
}

// New returns an empty Set of at most max entries (at least 1), each expiring
// ttl after its last use (never, when ttl <= 0), spread by hash over shards.
//
// The number of shards is chosen from the initial max: a power of two up to
// 64, with about 8 entries per shard or more. The maximum is the Set's, not
// a shard's: nothing is evicted while the Set holds at most max entries, and
// beyond it the least recently used entry of the whole Set goes. Len exceeds
// max only while concurrent Prove calls are evicting. hash must not be nil.
func New[K comparable](max int, ttl time.Duration, hash func(K) uint64) *Set[K] {
	if hash == nil {
		panic("known: New with nil hash")
	}
	n := stripe.Count(max)
	s := &Set[K]{hash: hash, seed: stripe.Seed(), shards: make([]shard[K], n)}
	s.shift = stripe.Shift(n)
	for i := range s.shards {
		s.shards[i].init(&s.count)
	}
	s.SetLimits(max, ttl)
	return s
}

// Proven reports whether key is proven at now: present and used less than
// ttl ago. If so, this use refreshes its TTL and makes it the most recently
// used entry. An expired entry is removed.
func (s *Set[K]) Proven(key K, now time.Time) bool {
	sh := &s.shards[s.shardIndex(key)]
	sh.mu.Lock()
	i, ok := sh.index[key]
	if !ok {
		sh.mu.Unlock()
		return false
	}
	at := sh.clock.Since(now)
	if s.expired(sh.entries[i].last, at) {
		sh.remove(i)
		sh.mu.Unlock()
		s.lapse(key, now, false)
		return false
	}
	sh.touch(i, at)
	sh.mu.Unlock()
	return true
}

// Prove records that key was accepted at now: it is added, or refreshed if
// present, as the most recently used entry. Adding beyond the maximum evicts
// the least recently used entry of the Set.
func (s *Set[K]) Prove(key K, now time.Time) {
	sh := &s.shards[s.shardIndex(key)]
	sh.mu.Lock()
	at := sh.clock.Since(now)
	if i, ok := sh.index[key]; ok {
		sh.touch(i, at)
		sh.mu.Unlock()
		return
	}
	sh.add(key, at, none)
	sh.mu.Unlock()
	s.evictBeyondMax()
}

// evictBeyondMax removes the least recently used entries of the Set while
// it holds more than max. It locks one shard at a time.
func (s *Set[K]) evictBeyondMax() {
	if s.count.Load() <= s.max.Load() {
		return
	}
	s.evictMu.Lock()
	defer s.evictMu.Unlock()
	for s.count.Load() > s.max.Load() && s.evictOldest() {
	}
}

// evictOldest removes the oldest of the shards' least recently used
// entries, which is the Set's least recently used one, and reports whether
// there was one.
func (s *Set[K]) evictOldest() bool {
	oldest := -1
	var oldestUse time.Time
	for n := range s.shards {
		sh := &s.shards[n]
		sh.mu.Lock()
		if sh.tail != none {
			if t := sh.clock.Time(sh.entries[sh.tail].last); oldest < 0 || t.Before(oldestUse) {
				oldest, oldestUse = n, t
			}
		}
		sh.mu.Unlock()
	}
	if oldest < 0 {
		return false
	}
	sh := &s.shards[oldest]
	sh.mu.Lock()
	if sh.tail == none {
		sh.mu.Unlock()
		return true
	}
	key := sh.entries[sh.tail].key
	sh.remove(sh.tail)
	sh.mu.Unlock()
	s.lapse(key, time.Now(), true)
	return true
}

// Forget removes key, if present.
func (s *Set[K]) Forget(key K) {
	sh := &s.shards[s.shardIndex(key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if i, ok := sh.index[key]; ok {
		sh.remove(i)
	}
}

// Len returns the number of entries, expired ones not yet removed included.
func (s *Set[K]) Len() int { return int(s.count.Load()) }

// SetLimits changes the maximum size (at least 1) and the TTL (none when
// ttl <= 0) while the Set is in use. Shrinking evicts the least recently
// used entries beyond the new maximum at once, and gives their memory back.
// A new TTL applies to every entry from its last use, immediately. The
// number of shards stays what New chose.
func (s *Set[K]) SetLimits(limit int, ttl time.Duration) {
	s.max.Store(int64(max(limit, 1)))
	s.ttl.Store(int64(ttl))
	s.evictBeyondMax()
	for n := range s.shards {
		sh := &s.shards[n]
		sh.mu.Lock()
		if len(sh.entries) > 2*len(sh.index) {
			sh.compact()
		}
		sh.mu.Unlock()
	}
}

// Sweep removes the entries expired at now and returns how many it removed.
// Call it periodically from one goroutine; it locks one shard at a time.
func (s *Set[K]) Sweep(now time.Time) int {
	removed := 0
	var gone []K
	for n := range s.shards {
		sh := &s.shards[n]
		sh.mu.Lock()
		at := sh.clock.Since(now)
		for i := sh.tail; i != none; {
			prev := sh.entries[i].prev
			if s.expired(sh.entries[i].last, at) {
				if s.lapsed != nil {
					gone = append(gone, sh.entries[i].key)
				}
				sh.remove(i)
				removed++
			}
			i = prev
		}
		sh.mu.Unlock()
		for _, key := range gone {
			s.lapse(key, now, false)
		}
		gone = gone[:0]
	}
	return removed
}

func (s *Set[K]) expired(last, at int64) bool {
	ttl := s.ttl.Load()
	return ttl > 0 && at-last >= ttl
}

func (s *Set[K]) shardIndex(key K) int {
	return int(stripe.Mix(s.hash(key)^s.seed) >> s.shift)
}

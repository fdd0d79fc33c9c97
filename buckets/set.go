package buckets

import (
	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/stripe"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Set is a bounded collection of token buckets, one per key. Its zero value is
// not usable; create one with [New].
type Set[K comparable] struct {
	hash     func(K) uint64
	seed     uint64
	shift    uint
	capacity atomic.Int64
	count    atomic.Int64  // buckets in all shards
	staleFor atomic.Int64  // a time.Duration; see Advance
	slowest  atomic.Uint64 // the float64 bits of a rate.Limit; see Advance
	largest  atomic.Int64  // the largest burst in force; see Advance
	shards   []shard[K]
}

// shard owns the buckets of the keys that hash to it. Buckets live in a slab
// indexed by the map, so that the hot path is one map lookup and an update in
// place, and the map's values hold no pointers.
type shard[K comparable] struct {
	mu      sync.Mutex
	index   map[K]int32
	slab    []bucket
	free    []int32       // slab slots to reuse
	seq     uint64        // last bucket.seq handed out
	changed int64         // when limits last changed (Advance), or noChange
	count   *atomic.Int64 // the Set's number of buckets
	clock   stripe.Clock
	_       pad
}

// New returns a Set holding at most capacity buckets (at least 1), spread by
// hash over shards, which must not be nil.
//
// The number of shards is chosen from the initial capacity: a power of two up
// to 64, with 8 buckets per shard or more. The capacity is the Set's, not a
// shard's: a new key is taken in while the Set holds fewer buckets, however
// keys spread. At capacity, a new key evicts a full bucket among the first 8
// it examines (in map order, which is random) in its shard, then in a few
// other shards, or is refused; so a new key may be refused while unexamined
// buckets could have made room. Sweep keeps that rare. Len never exceeds
// the capacity, except after SetCapacity lowered it.
func New[K comparable](capacity int, hash func(K) uint64) *Set[K] {
	if hash == nil {
		panic("buckets: New with nil hash")
	}
	n := stripe.Count(capacity)
	s := &Set[K]{hash: hash, seed: stripe.Seed(), shift: stripe.Shift(n), shards: make([]shard[K], n)}
	s.SetCapacity(capacity)
	for i := range s.shards {
		s.shards[i].index = make(map[K]int32)
		s.shards[i].count = &s.count
		s.shards[i].changed = noChange
	}
	return s
}

// SetCapacity changes the maximum number of buckets (at least 1) while the
// Set is in use. Shrinking drops nothing at once, since only full buckets may
// go: new keys are refused while the Set holds more than the capacity,
// until Sweep or eviction has brought it back under. Memory already taken
// is kept for reuse. The number of shards stays what New chose.
func (s *Set[K]) SetCapacity(capacity int) {
	s.capacity.Store(int64(max(capacity, 1)))
}

// Reserve takes n tokens from key's bucket at now, creating the bucket, full
// under lim, when the key has none. Before that, the bucket is switched to lim
// if it was last used with another Limit, keeping its current level (see the
// package documentation).
//
// When ok, the tokens are taken and res can give them back. When not ok,
// nothing was taken and wait (always > 0) says how long until the request
// could succeed:
//   - when n tokens will be there after refilling, wait is the time that
//     takes, to the nanosecond; the same request is admitted then if nothing
//     else has used the bucket meanwhile;
//   - when n exceeds the burst, the request can never succeed and wait is the
//     time an empty bucket takes to refill completely, a finite hint for
//     Retry-After; with a Rate of 0 it is [rate.InfDuration];
//   - when full is true, the key is new, its shard is at capacity and none of
//     the buckets examined was full; wait is then how long until the first of
//     them will be, and evictable.
//
// n <= 0 is always ok and touches nothing; so is any n under a Rate of
// rate.Inf, which also drops the key's bucket.
func (s *Set[K]) Reserve(key K, lim Limit, n int, now time.Time) (res Reservation, wait time.Duration, ok bool, full bool) {
	if n <= 0 {
		return Reservation{}, 0, true, false
	}
	i := s.shardIndex(key)
	sh := &s.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	at := sh.clock.Since(now)
	if lim.Rate == rate.Inf {
		if idx, found := sh.index[key]; found {
			sh.remove(key, idx)
		}
		return Reservation{}, 0, true, false
	}
	lim.Burst = max(lim.Burst, 0)
	if idx, found := sh.index[key]; found {
		b := &sh.slab[idx]
		b.retune(lim, at, sh.changed)
		if wait, ok := b.take(n, at); !ok {
			return Reservation{}, wait, false, false
		}
		return sh.reservation(idx, n), 0, true, false
	}
	if n > lim.Burst { // never as asked; a new bucket is full, so the burst fits now
		return Reservation{}, atLeastNanosecond(0), false, false
	}
	if !s.claim() {
		// At capacity: a full bucket evicted here or elsewhere hands its
		// place in the count over to the new key.
		wait, evicted := sh.evictOne(at, time.Duration(s.staleFor.Load()))
		if !evicted {
			wait, evicted = s.evictElsewhere(i, now, wait)
		}
		if !evicted {
			return Reservation{}, wait, false, true
		}
	}
	idx := sh.insert(key, bucket{tokens: float64(lim.Burst - n), last: at, rate: lim.Rate, burst: lim.Burst})
	return sh.reservation(idx, n), 0, true, false
}

// Wait reports how long until n tokens would be in key's bucket under lim
// at now (0 and ok when they are there now), as Reserve would, but takes
// nothing and creates no bucket: a key without one has a full bucket. A
// bucket under other limits moves to lim, as Reserve moves it whether it
// admits or not (see retune): the key's request came under lim now, and
// the wait is at the rate its bucket earns from here.
func (s *Set[K]) Wait(key K, lim Limit, n int, now time.Time) (wait time.Duration, ok bool) {
	if n <= 0 || lim.Rate == rate.Inf {
		return 0, true
	}
	sh := &s.shards[s.shardIndex(key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	at := sh.clock.Since(now)
	lim.Burst = max(lim.Burst, 0)
	b := bucket{tokens: float64(lim.Burst), last: at, rate: lim.Rate, burst: lim.Burst}
	if idx, found := sh.index[key]; found {
		sh.slab[idx].retune(lim, at, sh.changed)
		b = sh.slab[idx] // a copy: taking from it changes nothing
	}
	return b.take(n, at)
}

// Tokens returns the number of tokens in key's bucket at now, for inspection
// and RateLimit headers. ok is false when the key has no bucket, which means
// its bucket would be full.
func (s *Set[K]) Tokens(key K, now time.Time) (tokens float64, ok bool) {
	return s.level(key, nil, now)
}

// TokensUnder is Tokens for a key whose limit is lim now: the level
// Reserve would find, with a limit change since the bucket's last use
// applied (its time since the change earns lim's rate, a lower burst
// caps it). The bucket itself is left as it is.
func (s *Set[K]) TokensUnder(key K, lim Limit, now time.Time) (tokens float64, ok bool) {
	lim.Burst = max(lim.Burst, 0)
	return s.level(key, &lim, now)
}

// level is the level of key's bucket at now, retuned to lim first when
// lim is not nil.
func (s *Set[K]) level(key K, lim *Limit, now time.Time) (float64, bool) {
	sh := &s.shards[s.shardIndex(key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	idx, ok := sh.index[key]
	if !ok {
		return 0, false
	}
	at := sh.clock.Since(now)
	b := sh.slab[idx] // a copy
	if lim != nil {
		b.retune(*lim, at, sh.changed)
	}
	return b.level(at), true
}

// Len returns the number of buckets.
func (s *Set[K]) Len() int { return int(s.count.Load()) }

// shardIndex returns the shard of key. A Set of one shard (the global
// bucket's) skips hashing the key.
func (s *Set[K]) shardIndex(key K) int {
	if len(s.shards) == 1 {
		return 0
	}
	return int(stripe.Mix(s.hash(key)^s.seed) >> s.shift)
}

// claim counts one more bucket if the Set holds fewer than its capacity:
// the check and the count are one step, so that keys of other shards
// taken in at the same moment cannot together pass the capacity.
func (s *Set[K]) claim() bool {
	for {
		n := s.count.Load()
		if n >= s.capacity.Load() {
			return false
		}
		if s.count.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// insert stores b for key in a free slot and returns the slot. Its place in
// the count is the caller's: claimed, or handed over by an eviction.
func (sh *shard[K]) insert(key K, b bucket) int32 {
	sh.seq++
	b.seq = sh.seq
	var idx int32
	if n := len(sh.free); n > 0 {
		idx = sh.free[n-1]
		sh.free = sh.free[:n-1]
		sh.slab[idx] = b
	} else {
		idx = int32(len(sh.slab))
		sh.slab = append(sh.slab, b)
	}
	sh.index[key] = idx
	return idx
}

// remove drops key, whose bucket is in slot idx, from the shard and the
// count.
func (sh *shard[K]) remove(key K, idx int32) {
	sh.count.Add(-1)
	sh.drop(key, idx)
}

// drop drops key, whose bucket is in slot idx, from the shard, leaving its
// place in the count to the key that evicts it.
func (sh *shard[K]) drop(key K, idx int32) {
	delete(sh.index, key)
	sh.slab[idx] = bucket{}
	sh.free = append(sh.free, idx)
}

package buckets

import (
	"sync"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/stripe"
)

// Gauge counts in-flight work per key against a ceiling: [Gauge.Acquire]
// before the work, [Gauge.Release] after it. A key is kept only while it has
// work in flight, so memory follows concurrency, not the number of keys ever
// seen. Acquire and Release do not allocate for a key already present. The
// zero value is not usable; create one with [NewGauge].
type Gauge[K comparable] struct {
	hash   func(K) uint64
	seed   uint64
	shards [stripe.Max]gaugeShard[K]
}

type gaugeShard[K comparable] struct {
	mu       sync.Mutex
	inFlight map[K]int32
	_        pad
}

// NewGauge returns an empty Gauge that spreads keys over shards by hash,
// which must not be nil.
func NewGauge[K comparable](hash func(K) uint64) *Gauge[K] {
	if hash == nil {
		panic("buckets: NewGauge with nil hash")
	}
	g := &Gauge[K]{hash: hash, seed: stripe.Seed()}
	for i := range g.shards {
		g.shards[i].inFlight = make(map[K]int32)
	}
	return g
}

// Acquire counts n more units of work in flight for key and returns true,
// unless that would put more than max in flight (or n < 1): then it
// returns false and counts nothing.
func (g *Gauge[K]) Acquire(key K, n, max int) bool {
	sh := g.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	cur := int(sh.inFlight[key])
	if n < 1 || cur+n > max {
		return false
	}
	sh.inFlight[key] = int32(cur + n)
	return true
}

// Release counts n units of key's work as done, forgetting key when none
// is left. Releasing more than key has in flight releases what it has.
func (g *Gauge[K]) Release(key K, n int) {
	sh := g.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if left := int(sh.inFlight[key]) - n; left > 0 {
		sh.inFlight[key] = int32(left)
	} else {
		delete(sh.inFlight, key)
	}
}

// Count returns how much work key has in flight.
func (g *Gauge[K]) Count(key K) int {
	sh := g.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return int(sh.inFlight[key])
}

// Len returns the number of keys with work in flight.
func (g *Gauge[K]) Len() int {
	n := 0
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		n += len(sh.inFlight)
		sh.mu.Unlock()
	}
	return n
}

func (g *Gauge[K]) shard(key K) *gaugeShard[K] {
	return &g.shards[stripe.Mix(g.hash(key)^g.seed)>>stripe.Shift(stripe.Max)]
}

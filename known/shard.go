package known

import (
	"math/bits"
	"math/rand/v2"
	"time"
)

const (
	// maxShards bounds lock striping; more buys nothing on realistic cores.
	maxShards = 64
	// minPerShard keeps small sets in few shards, so that eviction order
	// stays close to the global least-recently-used order.
	minPerShard = 8
)

// shardCount picks the number of shards for a maximum size: a power of two,
// at most maxShards, and at most max/minPerShard (but at least 1).
func shardCount(size int) int {
	n := min(max(size/minPerShard, 1), maxShards)
	return 1 << (bits.Len(uint(n)) - 1)
}

// shareOf splits total among n shards as evenly as possible, shard i getting
// one of the remainder when i < total%n; every shard gets at least 1.
func shareOf(total int64, n, i int) int {
	share := total / int64(n)
	if int64(i) < total%int64(n) {
		share++
	}
	return int(max(share, 1))
}

// mix is the 64-bit finalizer of MurmurHash3: every input bit affects every
// output bit, so the top bits make a good shard index even for weak hashes.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// clock turns times into nanoseconds since an epoch, which is the first time
// it sees, and back. Differences are those of time.Time.Sub, so they follow
// the monotonic clock whenever the times carry it.
type clock struct {
	epoch time.Time
	set   bool
}

func (c *clock) since(t time.Time) int64 {
	if !c.set {
		c.epoch, c.set = t, true
	}
	return int64(t.Sub(c.epoch))
}

func (c *clock) time(ns int64) time.Time {
	return c.epoch.Add(time.Duration(ns))
}

// bitsOf is log2 of the power of two n.
func bitsOf(n int) int {
	return bits.TrailingZeros(uint(n))
}

// newSeed draws the per-set seed that keeps shard placement unpredictable.
func newSeed() uint64 {
	return rand.Uint64()
}

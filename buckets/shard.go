package buckets

import (
	"math/bits"
	"math/rand/v2"
	"time"
)

const (
	// maxShards bounds lock striping; more buys nothing on realistic cores.
	maxShards = 64
	// minPerShard keeps small sets in few shards, so that a per-shard
	// capacity still means something.
	minPerShard = 8
)

// shardCount picks the number of shards for a capacity: a power of two, at
// most maxShards, and at most capacity/minPerShard (but at least 1).
func shardCount(capacity int) int {
	n := min(max(capacity/minPerShard, 1), maxShards)
	return 1 << (bits.Len(uint(n)) - 1)
}

// shardShift is the right shift that turns a mixed hash into an index below n
// (a power of two). For n == 1 it is 64, and any uint64 >> 64 is 0.
func shardShift(n int) uint {
	return uint(64 - bits.TrailingZeros(uint(n)))
}

// newSeed draws the per-set seed that keeps shard placement unpredictable.
func newSeed() uint64 {
	return rand.Uint64()
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

// clock turns times into nanoseconds since an epoch, which is the first time
// it sees. Differences are those of time.Time.Sub, so they follow the
// monotonic clock whenever the times carry it.
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

// pad keeps neighbouring shards' hot fields off each other's cache line.
type pad [64]byte

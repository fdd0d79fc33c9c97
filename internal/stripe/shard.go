// Package stripe holds what the striped sets of buckets/ and known/ share:
// how many shards a size gets, a hash finalizer that makes any hash a good
// shard index, a random per-set seed, and a compact clock that stores times
// as nanoseconds since an epoch.
package stripe

import (
	"math/bits"
	"math/rand/v2"
	"time"
)

const (
	// Max bounds lock striping; more buys nothing on realistic cores.
	Max = 64
	// minPer keeps small sets in few shards.
	minPer = 8
)

// Count picks the number of shards for a size: a power of two, at most
// Max, and at most size/8 (but at least 1).
func Count(size int) int {
	n := min(max(size/minPer, 1), Max)
	return 1 << (bits.Len(uint(n)) - 1)
}

// Shift is the right shift that turns a mixed hash into an index below n
// (a power of two). For n == 1 it is 64, and any uint64 >> 64 is 0.
func Shift(n int) uint {
	return uint(64 - bits.TrailingZeros(uint(n)))
}

// Mix is the 64-bit finalizer of MurmurHash3: every input bit affects
// every output bit, so the top bits make a good shard index even for weak
// hashes.
func Mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// Seed draws a per-set seed that keeps shard placement unpredictable.
func Seed() uint64 {
	return rand.Uint64()
}

// Clock turns times into nanoseconds since an epoch, which is the first
// time it sees, and back. Differences are those of time.Time.Sub, so they
// follow the monotonic clock whenever the times carry it.
type Clock struct {
	epoch time.Time
	set   bool
}

// Since returns t as nanoseconds since the epoch.
func (c *Clock) Since(t time.Time) int64 {
	if !c.set {
		c.epoch, c.set = t, true
	}
	return int64(t.Sub(c.epoch))
}

// Time turns nanoseconds since the epoch back into a time.
func (c *Clock) Time(ns int64) time.Time {
	return c.epoch.Add(time.Duration(ns))
}

// Package buckets keeps one token bucket per key, for many keys, in bounded
// memory.
//
// A bucket holds up to Burst tokens and refills at Rate tokens per second,
// exactly as a [rate.Limiter] does: it starts full, a request for n tokens is
// admitted when n tokens are there and is refused otherwise, and a refusal
// takes nothing. [Set.Reserve] is the whole hot path: it finds (or creates)
// the key's bucket and takes n tokens from it at the time it is given. Time is
// always a parameter; nothing in this package reads the clock, so tests drive
// it by hand and never sleep.
//
// A bucket is not a rate.Limiter, whose own mutex and two time.Time fields
// would make it 80 bytes; it is the same state and the same arithmetic in 40
// bytes, guarded by its shard's lock, and it is tested to take the decisions
// a rate.Limiter takes under AllowN, SetLimitAt and SetBurstAt.
//
// Each call carries the key's [Limit]. When it differs from the one the bucket
// was last used with, the bucket is retuned the way [rate.Limiter.SetLimitAt]
// and [rate.Limiter.SetBurstAt] do it: the tokens earned so far at the old
// rate are kept and the new rate applies from then on. A configuration reload
// therefore never hands a drained key a fresh burst.
//
// A full bucket is indistinguishable from a bucket that does not exist yet, so
// full buckets are free to drop, and only they are ever dropped: [Set.Sweep]
// removes them periodically, and a new key arriving at a set that is at
// capacity may evict one it finds among a few entries it samples. A bucket
// that is not full is never dropped, since recreating it would hand out the
// very tokens its refusals withheld. When nothing can be evicted, the new key
// is refused (Reserve reports full); it is neither let through nor charged to
// some other key. Memory is thus bounded by the capacity: 70 to 85 bytes per
// bucket with 16-byte keys, 105 to 130 with netip.Prefix keys, map slack
// included (see BenchmarkBytesPerBucket).
//
// A successful Reserve returns a [Reservation]. Cancelling it gives its tokens
// back, so that a request refused by a later layer of an all-or-nothing
// admission does not pay for the layers it passed.
//
// [Gauge] is the companion concurrency limit: it counts in-flight work per key
// against a ceiling, and forgets a key as soon as nothing is in flight for it.
//
// Sets and Gauges are safe for concurrent use. Keys are spread over up to 64
// shards, each with its own mutex, by a caller-supplied hash (see
// [HashFingerprint] and [HashPrefix]) that the set mixes with a random
// per-set seed, so that nobody outside can aim keys at one shard.
package buckets

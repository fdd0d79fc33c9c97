// Package known remembers which identities have proven themselves, in bounded
// memory.
//
// An identity becomes proven when the backend accepts one of its requests
// ([Set.Prove]), and stops being proven when the backend rejects one
// ([Set.Forget]), when it has not been used for the set's TTL, or when it is
// among the least recently used beyond the set's maximum size. Asking whether
// an identity is proven ([Set.Proven]) counts as a use: it refreshes the TTL
// and makes the identity the most recently used one.
//
// Time is always a parameter, as in x/time/rate; nothing in this package
// reads the clock, so tests drive it by hand and never sleep. An identity
// last used at t is proven for times in [t, t+ttl). Expired identities are
// dropped when they are next looked at, and all at once by [Set.Sweep].
//
// The maximum holds under any flood: every insertion beyond it evicts the
// least recently used entry, so 300k fresh identities cost no more memory
// than max of them, 65 to 70 bytes each for 16-byte keys (see
// BenchmarkBytesPerEntry). The set is split into up to 64 shards, each with
// its own lock and its own least-recently-used list. The maximum is the
// set's, not a shard's: nothing is evicted at or below it, however keys
// spread, and an eviction takes the oldest of the shards' least recently
// used entries, which is the set's (one shard lock at a time, a few
// microseconds, and only beyond the maximum). Keys go to shards by a
// caller-supplied hash, mixed with a random per-set seed so that nobody
// outside can aim keys at one shard.
//
// [Set.Each] and [Set.Restore] carry the set across restarts: save what Each
// visits, oldest first, and Restore it in that order into the new set, which
// keeps each entry's last use and skips those that have expired meanwhile.
package known

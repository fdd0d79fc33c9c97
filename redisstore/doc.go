// Package redisstore decides rate limits and quotas shared by every
// instance in Redis, exactly: all layers of one request (token buckets and
// period counts) are checked and charged by one Lua script in one round
// trip, on Redis server time, all or nothing.
//
// # Model
//
// A bucket is a hash {tokens, ts} (ts in microseconds of Redis time) that
// refills at Rate tokens per second up to Burst; it expires a day after its
// last use, or once it would have refilled completely if that is later
// (plus a margin), so idle state disappears while a live change to a slower
// rate still finds a drained bucket. A
// quota is a counter per UTC period (…:d:2026-11-30, …:m:2026-11) that
// expires at the end of its period (plus a margin). When any item of a
// request does not fit, the script returns its index and wait and writes
// nothing.
//
// Every key of a zone starts with mcprl:{<zone>}: — one hash tag — so the
// keys of one decision share a Redis Cluster slot, and a zone lives on one
// cluster node.
//
// # Short-circuit
//
// A refusal is remembered in memory until its wait passes: later requests
// touching the same key (with at least the same cost, under the same
// limits) are refused without a round trip, so a flood of refused calls
// does not become a flood on Redis.
//
// # Faults
//
// Every call is bounded by Config.Timeout. The package reports errors and
// leaves the policy (deciding locally, retrying) to the caller; [Store.Push]
// adds counts made during an outage, once per push id, so that a push
// whose answer was lost can be sent again, and [Store.Ping] probes for
// recovery.
package redisstore

package mcplimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

// pushBatch is counts sent to Redis in one push, under one id.
type pushBatch struct {
	id     string
	counts map[deltaKey]int64
}

// newPushID returns a fresh push id: 128 random bits in hex.
func newPushID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// deltas is the batch as the store takes it.
func (b *pushBatch) deltas() []redisstore.Delta {
	ds := make([]redisstore.Delta, 0, len(b.counts))
	for k, n := range b.counts {
		ds = append(ds, redisstore.Delta{Key: k.key, Period: k.period, Start: time.Unix(k.start, 0).UTC(), N: n})
	}
	return ds
}

// pushChunk bounds the counts one push sends, so that the push after a
// long outage of many tenants still fits in the store's timeout.
const pushChunk = 1000

// push sends the counts made locally to Redis, a chunk at a time. A push
// whose answer is lost (a timeout) may still have run there: its batch is
// kept apart, as it was, and sent again first under the same id, which
// Redis adds once, so a slow Redis never gets an outage's counts twice.
// Counts made while a batch is in doubt go in later ones. A batch is in
// doubt from the moment it is sent until Redis took it, so the host's copy
// (mirrorRedisPending) holds it meanwhile; after each batch Redis took,
// mirror (when not nil) rewrites that copy without it: a crash in the
// middle of a long push leaves the next process only the counts Redis
// lacks, and the batch in flight.
func (r *zoneRedis) push(ctx context.Context, mirror func()) error {
	// The batch in doubt, then the pending counts as they are now; any
	// made meanwhile wait for the next push.
	for n := r.pendingLen()/pushChunk + 2; n > 0; n-- {
		b := r.nextPush()
		if b == nil {
			return nil
		}
		if _, err := r.store.Push(ctx, b.id, b.deltas()); err != nil {
			r.keepInDoubt(b)
			return err
		}
		r.unbind(b)
		r.mu.Lock()
		if r.doubt == b {
			r.doubt = nil
		}
		r.pushed += uint64(len(b.counts))
		r.mu.Unlock()
		if mirror != nil {
			mirror()
		}
	}
	return nil
}

// pushRedis pushes r's pending counts, rewriting the host's copy of them
// after each batch Redis took (see zoneRedis.push).
func (z *zone) pushRedis(ctx context.Context, r *zoneRedis) error {
	return r.push(ctx, func() { z.mirrorRedisPending(r) })
}

// nextPush takes the next batch to push: the one in doubt, or else up to
// pushChunk pending counts under a new id, which becomes the one in doubt;
// nil when there is nothing to push.
func (r *zoneRedis) nextPush() *pushBatch {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.doubt != nil {
		return r.doubt
	}
	if len(r.pending) == 0 {
		return nil
	}
	counts := r.pending
	if len(counts) <= pushChunk {
		r.pending = map[deltaKey]int64{}
	} else {
		counts = make(map[deltaKey]int64, pushChunk)
		for k, n := range r.pending {
			counts[k] = n
			delete(r.pending, k)
			if len(counts) == pushChunk {
				break
			}
		}
	}
	r.doubt = &pushBatch{id: newPushID(), counts: counts}
	return r.doubt
}

// keepInDoubt keeps a batch whose push failed to be sent again as it was.
// A second batch in doubt (two pushes failing at once) joins the pending
// counts: if it ran, those count twice.
func (r *zoneRedis) keepInDoubt(b *pushBatch) {
	r = r.lockLive() // a reload may have replaced r during the push
	defer r.mu.Unlock()
	if r.doubt == nil || r.doubt == b {
		r.doubt = b
		return
	}
	for k, n := range b.counts {
		r.add(k, n)
	}
}

// pushFor pushes, before a decision in Redis, the pending counts of the
// quota items among items: counts the instance made locally while Redis
// was unreachable, or that a call proving its credential made then. The
// decision must find them, or those quotas would pass their limits by what
// the instance counted since its last push. A decision with none pending
// costs no round trip more.
func (r *zoneRedis) pushFor(ctx context.Context, items []redisstore.Item, now time.Time) error {
	var b *pushBatch
	r.mu.Lock()
	for _, it := range items {
		if !it.Kind.IsQuota() || len(r.pending) == 0 {
			continue
		}
		k := deltaKey{key: it.Key, period: it.Period, start: it.Period.Start(now).Unix()}
		if n, ok := r.pending[k]; ok {
			if b == nil {
				b = &pushBatch{id: newPushID(), counts: map[deltaKey]int64{}}
			}
			b.counts[k] = n
			delete(r.pending, k)
		}
	}
	r.mu.Unlock()
	if b == nil {
		return nil
	}
	if _, err := r.store.Push(ctx, b.id, b.deltas()); err != nil {
		r.keepInDoubt(b)
		return err
	}
	r.unbind(b)
	return nil
}

// countInRedis counts items in Redis at once, under a push id of their
// own, and reports whether Redis took them; otherwise they wait to be
// pushed (pending while Redis is degraded; kept in doubt, and sent again
// under their id, when the push's answer is lost). The call whose answer
// proves a credential is counted so, before its answer reaches the client:
// the identity's next call, which Redis decides, must find it. It costs
// one round trip per identity proven.
func (z *zone) countInRedis(r *zoneRedis, items []quota.Item, now time.Time) bool {
	if r.degraded.Load() {
		r.record(items, now, 1)
		return false
	}
	b := &pushBatch{id: newPushID(), counts: map[deltaKey]int64{}}
	for _, it := range items {
		if it.N > 0 && it.Period.Valid() {
			b.counts[deltaKey{key: string(it.Key), period: it.Period, start: it.Period.Start(now).Unix()}] += it.N
		}
	}
	if len(b.counts) == 0 {
		return true
	}
	// The answer waits for it: bounded by the store's timeout, as a
	// decision is (a push of the outage's counts may take longer).
	timeout, _ := redisTimeout(&r.cfg)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := r.store.Push(ctx, b.id, b.deltas()); err != nil {
		r.bound.Add(items, now) // counted locally for Redis now, as record does
		r.keepInDoubt(b)
		z.redisFailed(r, err)
		return false
	}
	return true
}

// pendingLen is how many counts are not yet in Redis.
func (r *zoneRedis) pendingLen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.countLocked()
}

// countLocked is pendingLen with r.mu held.
func (r *zoneRedis) countLocked() int {
	n := len(r.pending)
	if r.doubt != nil {
		n += len(r.doubt.counts)
	}
	return n
}

// allLocked returns every count not yet in Redis, the batch in doubt's
// included, with r.mu held.
func (r *zoneRedis) allLocked() map[deltaKey]int64 {
	if r.doubt == nil {
		return r.pending
	}
	all := make(map[deltaKey]int64, len(r.pending)+len(r.doubt.counts))
	for _, m := range []map[deltaKey]int64{r.pending, r.doubt.counts} {
		for k, n := range m {
			addDelta(all, k, n)
		}
	}
	return all
}

// take removes and returns every count not yet in Redis, to be kept
// elsewhere (storage). The batch in doubt loses its id there: if its push
// did run, its counts are pushed twice.
func (r *zoneRedis) take() map[deltaKey]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := r.allLocked()
	r.pending, r.doubt = map[deltaKey]int64{}, nil
	return all
}

// putBack adds counts that could not be kept elsewhere back to the
// pending ones.
func (r *zoneRedis) putBack(batch map[deltaKey]int64) {
	r = r.lockLive() // a reload may have replaced r meanwhile
	defer r.mu.Unlock()
	for k, n := range batch {
		r.add(k, n)
	}
}

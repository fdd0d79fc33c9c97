package mcplimit

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// While a zone has no `store redis` but had one in the current periods (a
// reload removed it, or a start without it found the host's copies of
// what Redis reported), the quota counts made locally are also kept for
// Redis, as an outage's are: adding the store back pushes them before it
// raises Redis to the local counts (seedRedis). A raise alone would let
// the calls other instances counted in Redis meanwhile hide them. They
// are kept in a zoneRedis without a store (zone.detached), copied to the
// host before each flush (a crash loses at most a flush interval of
// them, and none that storage marks as bound for Redis),
// and saved in storage at a stop, for the next start with the store to
// push (see redis_pending.go).

// detach starts keeping counts for a store the zone starts without,
// taking over the host's copies of the counts a gone process kept for it.
func (z *zone) detach() {
	dt := &zoneRedis{redisCounters: z.counters(), pending: map[deltaKey]int64{}}
	z.detached.Store(dt)
	z.adoptRedisPending(dt, time.Now())
}

// detachedTick runs before each flush: the counts kept for a store the
// zone has not lose those of periods that have ended (Redis would let
// them expire at once), and the host's copy follows.
func (z *zone) detachedTick(now time.Time) {
	dt := z.detached.Load()
	if dt == nil {
		return
	}
	dt.mu.Lock()
	for k := range dt.pending {
		if k.start < k.period.Start(now).Unix() {
			delete(dt.pending, k)
		}
	}
	dt.mu.Unlock()
	z.mirrorRedisPending(dt)
}

// closeDetached saves at a stop the counts kept for a store the zone has
// not in storage, where the next start with the store finds them; the
// host's copy holds them if storage did not take them.
func (z *zone) closeDetached(ctx context.Context) {
	dt := z.detached.Load()
	if dt == nil {
		return
	}
	if err := z.saveRedisPending(ctx, dt); err != nil {
		z.logger.Load().Warn("counts made without store redis, kept for its return, could not be saved in storage; they stay on this host",
			zap.String("zone", z.name), zap.Error(err))
	}
	z.mirrorRedisPending(dt)
	z.redisHost.release()
}

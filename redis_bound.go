package mcplimit

import (
	"context"
	"path"
	"time"

	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// The calls a zone counts locally for Redis (during an outage, while it
// has no store but had one: see keepForRedis)
// are in storage's totals with every other count, and the zone pushes
// them to Redis itself (or saves them for the next start to push). They
// are counted a second time apart, under <prefix>/redis-bound, flushed
// before the totals: a zone that raises Redis to the counts it knows (a
// start or a reload adding the store, see seedRedis) raises it to those
// less these, so that it never carries to Redis a call that its maker
// pushes too, which would count it twice.

// redisBoundPrefix is the storage prefix of zone's counts bound for Redis.
func redisBoundPrefix(zone string) string { return path.Join(storagePrefix(zone), "redis-bound") }

// counters are the zone's counters its Redis stores keep up with their
// pushes.
func (z *zone) counters() redisCounters {
	return redisCounters{bound: z.redisBound, counts: z.quota}
}

// unbind takes the counts a push carried to Redis (a taken-back call's
// negative one among them) out of those bound for it, and tells the
// zone's counts that Redis holds them; counts of ended periods, which no
// seed carries, stay.
func (r *zoneRedis) unbind(b *pushBatch) {
	now := time.Now()
	var carried, takenBack []quota.Item
	for k, n := range b.counts {
		if k.start != k.period.Start(now).Unix() {
			continue
		}
		if n > 0 {
			carried = append(carried, quota.Item{Key: []byte(k.key), Period: k.period, N: n})
		} else {
			takenBack = append(takenBack, quota.Item{Key: []byte(k.key), Period: k.period, N: -n})
		}
	}
	r.bound.Refund(carried, now)
	r.bound.Add(takenBack, now)
	for i := range takenBack {
		takenBack[i].N = -takenBack[i].N
	}
	r.counts.Pushed(append(carried, takenBack...), now)
}

// flushRedisBound pushes the counts bound for Redis to storage, before the
// totals that hold them too; without any, it does nothing, unless a flush
// failed before (its counts may since have netted to nothing): a flush
// then tells whether storage answers again. On failure the counts stay
// pending, and the zone's quota store shows degraded (quotaState), logged
// once per outage (onBoundDegraded).
func (z *zone) flushRedisBound(ctx context.Context) error {
	if st := z.redisBound.State(); st.Pending == 0 && !st.Degraded {
		return nil
	}
	return z.redisBound.Flush(ctx)
}

// onBoundDegraded logs the transitions of the storage of the counts bound
// for Redis, and sets the degraded gauge.
func (z *zone) onBoundDegraded(degraded bool, err error) {
	z.setDegradedGauge()
	if degraded {
		z.logger.Load().Error("counts kept for redis cannot be marked as such in storage: the quota counts wait in memory with them until it can",
			zap.String("zone", z.name), zap.Error(err))
		return
	}
	z.logger.Load().Info("counts kept for redis marked as such in storage again: the quota counts follow", zap.String("zone", z.name))
}

// seedCounts is what seedRedis raises Redis to: the counts the zone knows
// of the current periods, less those bound for Redis as storage holds
// them now (unreadable, less is known to be bound, and more carried).
func (z *zone) seedCounts(ctx context.Context, now time.Time) []quota.Count {
	_ = z.redisBound.Refresh(ctx)
	bound := map[deltaKey]int64{}
	for _, c := range z.redisBound.Counts(now, nil) {
		bound[deltaKey{key: c.Key, period: c.Period, start: c.Start.Unix()}] = c.N
	}
	return z.quota.Counts(now, func(key string, p quota.Period, start time.Time) int64 {
		return bound[deltaKey{key: key, period: p, start: start.Unix()}]
	})
}

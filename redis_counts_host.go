package mcplimit

import (
	"time"

	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// redisCountsKind is the directory of AppDataDir where a zone keeps a copy
// of the quota counts Redis last reported to it (quota.Counter.Observe),
// written when Redis becomes unreachable, when a reload removes the store
// and when the zone stops with it, and read by a start while Redis is
// unreachable or without a store, so that an identity that used up its
// quota in Redis stays refused across a restart during the outage or
// after `store redis` was removed.
// Counts only grow within a period, so any copy of the current period is
// a lower bound; processes sharing a data directory may each write it.
const redisCountsKind = "mcp_ratelimit-redis-counts"

// saveRedisCounts copies the counts Redis reported to the zone to the
// host.
func (z *zone) saveRedisCounts() {
	cs := z.quota.Observed(time.Now())
	if len(cs) == 0 {
		return
	}
	if err := writeCounts(countsCopyPath(redisCountsKind, z.name), cs); err != nil {
		z.logger.Load().Warn("redis store: the counts it reported were not copied to this host: a start during the outage would count from what storage holds",
			zap.String("zone", z.name), zap.Error(err))
	}
}

// seedRedisCounts takes the host's copy of the counts Redis reported back,
// for a start while Redis is unreachable (degraded) or without a store.
func (z *zone) seedRedisCounts(logger *zap.Logger, degraded bool) {
	cs, err := readCounts(countsCopyPath(redisCountsKind, z.name))
	if err != nil {
		logger.Warn("redis store: the host's copy of the counts it reported is unreadable", zap.String("zone", z.name), zap.Error(err))
		return
	}
	now := time.Now()
	var items []quota.Item
	for _, c := range cs {
		if c.Start.Equal(c.Period.Start(now)) {
			items = append(items, quota.Item{Key: []byte(c.Key), Period: c.Period, Used: c.N})
		}
	}
	if len(items) == 0 {
		return
	}
	z.quota.Observe(items, now)
	msg := "quota counts this period go on from those a redis store last reported, copied on this host"
	if degraded {
		msg = "redis store unreachable at start: quota counts go on from those it last reported, copied on this host"
	}
	logger.Info(msg, zap.String("zone", z.name), zap.Int("keys", len(items)))
}

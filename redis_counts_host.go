package mcplimit

import (
	"time"

	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// redisCountsKind is the directory of AppDataDir where a zone keeps a copy
// of the quota counts Redis reported to it, with the calls counted here
// since (quota.Counter.Observed), one file per process (hostFiles),
// written at every flush and at a stop while the zone holds such counts
// (with the store, or without it once it was removed), when Redis becomes
// unreachable and when a reload removes the store. A start counts each
// count from the larger of the largest copy and what it counts itself:
// storage's count, and what the host had not pushed to storage yet
// (seedRedisCounts). So an identity that used up its quota in Redis stays
// refused across a restart (after a crash too, which loses at most a
// flush interval of what Redis reported) during an outage or after `store
// redis` was removed, a start with the store added back carries it there,
// and calls that reached storage after the copy was taken, which Redis
// held already, are not counted twice. Each copy of the current period is
// a lower bound of what Redis held, whichever process of the host took it.
const redisCountsKind = "mcp_ratelimit-redis-reported"

// saveRedisCounts copies to the host the counts Redis reported to the
// zone, as they stand.
func (z *zone) saveRedisCounts() {
	cs := z.quota.Observed(time.Now())
	if len(cs) == 0 {
		return
	}
	if err := writeCounts(z.redisCounts.path(), cs); err != nil {
		z.logger.Load().Warn("redis store: the counts it reported were not copied to this host: a start during the outage would count from what storage holds",
			zap.String("zone", z.name), zap.Error(err))
	}
}

// seedRedisCounts takes the host's copies of the counts Redis reported
// back, at a start: each count of the current periods goes on from the
// larger of its largest copy and what the zone counts itself, the zone's
// own copy then holds them all, and the copies of processes of this host
// that are gone are removed, as are copies holding nothing of the current
// periods. A start while Redis is unreachable (degraded) or without a
// store counts on from them; one that decides in Redis carries them there
// with what was counted locally since (seedRedis): the counts made while
// the store was removed are in storage, not in Redis. It reports whether
// a copy held counts of the current periods: the zone had the store in
// them.
func (z *zone) seedRedisCounts(logger *zap.Logger, degraded bool) bool {
	now := time.Now()
	copies, err := z.redisCounts.readAll()
	if err != nil {
		logger.Warn("redis store: the host's copies of the counts it reported are unreadable", zap.String("zone", z.name), zap.Error(err))
	}
	var current []quota.Count
	var gone, stale []string
	for name, cs := range copies {
		n := len(current)
		for _, c := range cs {
			if c.Start.Equal(c.Period.Start(now)) {
				current = append(current, c)
			}
		}
		switch {
		case len(current) == n:
			stale = append(stale, name)
		case ownerGone(z.redisCounts.ownerOf(name)):
			gone = append(gone, name)
		}
	}
	_ = dropClaims(stale) // left for a later start if it cannot go
	if len(current) == 0 {
		return false
	}
	z.quota.ObserveReported(current, now)
	if err := writeCounts(z.redisCounts.path(), z.quota.Observed(now)); err == nil {
		_ = dropClaims(gone) // their counts are in the zone's own copy
	}
	msg := "quota counts this period go on from those a redis store last reported, copied on this host"
	if degraded {
		msg = "redis store unavailable at start: quota counts go on from those it last reported, copied on this host"
	}
	logger.Info(msg, zap.String("zone", z.name), zap.Int("keys", len(current)))
	return true
}

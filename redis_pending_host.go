package mcplimit

import (
	"time"

	"go.uber.org/zap"
)

// While Redis is unreachable, the quota counts made locally are also kept
// on the host, rewritten every second, before each flush, after each
// batch a push got into Redis, and before a start deletes the counts a
// stop saved in storage, so that a crash during the outage loses about
// the last second of them, and none
// that storage marks as bound for Redis (which no raise carries): the
// next process of the zone to look (see hostFiles) takes them over and
// pushes them once Redis answers.
// Once pushed (or saved in storage at a graceful stop), the host's copy
// goes.

// redisPendingKind is the directory of AppDataDir of these copies.
const redisPendingKind = "mcp_ratelimit-redis-pending"

// mirrorRedisPending writes r's pending counts to the host's copy, or
// removes the copy when there are none.
func (z *zone) mirrorRedisPending(r *zoneRedis) {
	r.mu.Lock()
	if r.movedTo != nil {
		r.mu.Unlock()
		return // the copy follows the store that took the counts over
	}
	b := pendingLines(r.allLocked())
	written := r.mirrored
	r.mirrored = len(b) > 0
	r.mu.Unlock()
	var err error
	switch {
	case len(b) > 0:
		err = z.redisHost.save(b)
	case written:
		err = z.redisHost.remove()
	}
	if err != nil {
		z.logger.Load().Error("redis store: the host's copy of the counts made during the outage could not be updated",
			zap.String("zone", z.name), zap.String("file", z.redisHost.path()), zap.Error(err))
	}
}

// adoptRedisPending adds the orphaned copies of the zone's processes to
// r's pending counts; their files go once this process's own copy holds
// them.
func (z *zone) adoptRedisPending(r *zoneRedis, now time.Time) {
	cs, claims, err := z.redisHost.takeOrphans(now)
	if err != nil {
		z.logger.Load().Error("redis store: counts another process kept on this host during an outage: unreadable",
			zap.String("zone", z.name), zap.String("dir", z.redisHost.dir), zap.Error(err))
	}
	if len(cs) > 0 {
		r.addCounts(cs)
		z.mirrorRedisPending(r)
	}
	if err := dropClaims(claims); err != nil {
		z.logger.Load().Error("redis store: files of counts taken over are still on this host: another process may count them again",
			zap.String("zone", z.name), zap.Error(err))
	}
}

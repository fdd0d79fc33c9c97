package mcplimit

import (
	"errors"
	"io/fs"
	"os"

	"go.uber.org/zap"
)

// While Redis is unreachable, the quota counts made locally are also kept
// on the host, rewritten every second, so that a crash during the outage
// loses at most a second of them: the zone's next start on this host takes
// them back and pushes them once Redis answers. Once pushed (or saved in
// storage at a graceful stop), the host's copy goes.

// redisPendingHostPath is the host's copy of zone's pending counts:
// <AppDataDir>/mcp_ratelimit-redis-pending/<zone name in hex>.counts.
func redisPendingHostPath(zone string) string {
	return hostCountsPath("mcp_ratelimit-redis-pending", zone)
}

// mirrorRedisPending writes r's pending counts to the host's copy, or
// removes the copy when there are none.
func (z *zone) mirrorRedisPending(r *zoneRedis) {
	r.mu.Lock()
	b := pendingLines(r.pending)
	written := r.mirrored
	r.mirrored = len(b) > 0
	r.mu.Unlock()
	name := redisPendingHostPath(z.name)
	var err error
	switch {
	case len(b) > 0:
		err = writeHostFile(name, b)
	case written:
		if err = os.Remove(name); errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	}
	if err != nil {
		z.logger.Load().Error("redis store: the host's copy of the counts made during the outage could not be updated",
			zap.String("zone", z.name), zap.String("file", name), zap.Error(err))
	}
}

// takeRedisPendingFromHost adds the host's copy, if any, to r's pending
// counts and removes it.
func (z *zone) takeRedisPendingFromHost(r *zoneRedis) error {
	cs, err := takeHostCounts(redisPendingHostPath(z.name))
	r.addCounts(cs)
	return err
}

package mcplimit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// redisCountsKind is the directory of AppDataDir where a zone keeps a copy
// of what the quota counts Redis last reported to it hold beyond the
// counts made locally (quota.Counter.Observed), one file per process
// (hostFiles), written at every flush while the zone has the store, when
// Redis becomes unreachable, when a reload removes the store and when the
// zone stops with it. A start while Redis is unreachable or without a
// store adds the largest copy of each count to what storage holds, so
// that an identity that used up its quota in Redis stays refused across a
// restart (after a crash too, which loses at most a flush interval of
// what Redis reported) during an outage or after `store redis` was
// removed. Each copy of the current period is a lower bound of what Redis
// held beyond storage, whichever process of the host took it.
const redisCountsKind = "mcp_ratelimit-redis-reported"

// saveRedisCounts copies to the host what the counts Redis reported to
// the zone hold beyond its own.
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
// back, at a start: the largest copy of each count of the current periods
// is added to what storage holds, the zone's own copy then holds them all,
// and the copies of processes of this host that are gone are removed, as
// are copies holding nothing of the current periods. A start while Redis
// is unreachable (degraded) or without a store counts on from them; one
// that decides in Redis carries them there with what was counted locally
// since (seedRedis): the counts made while the store was removed are in
// storage, not in Redis.
func (z *zone) seedRedisCounts(logger *zap.Logger, degraded bool) {
	now := time.Now()
	copies, err := z.redisCounts.readAll()
	if err != nil {
		logger.Warn("redis store: the host's copies of the counts it reported are unreadable", zap.String("zone", z.name), zap.Error(err))
	}
	var items []quota.Item
	var gone, stale []string
	for name, cs := range copies {
		current := false
		for _, c := range cs {
			if c.Start.Equal(c.Period.Start(now)) {
				current = true
				items = append(items, quota.Item{Key: []byte(c.Key), Period: c.Period, N: c.N})
			}
		}
		switch {
		case !current:
			stale = append(stale, name)
		case ownerGone(z.redisCounts.ownerOf(name)):
			gone = append(gone, name)
		}
	}
	removeFiles(stale)
	if len(items) == 0 {
		return
	}
	z.quota.ObserveExtra(items, now)
	if err := writeCounts(z.redisCounts.path(), z.quota.Observed(now)); err == nil {
		removeFiles(gone) // their counts are in the zone's own copy
	}
	msg := "quota counts this period go on from those a redis store last reported, copied on this host"
	if degraded {
		msg = "redis store unreachable at start: quota counts go on from those it last reported, copied on this host"
	}
	logger.Info(msg, zap.String("zone", z.name), zap.Int("keys", len(items)))
}

// readAll reads every file of the zone of f's kind on the host, whoever
// its owner, by name; claims and files being written are not among them.
func (f hostFiles) readAll() (map[string][]quota.Count, error) {
	entries, err := os.ReadDir(f.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string][]quota.Count{}
	var errs []error
	for _, e := range entries {
		if f.ownerOf(e.Name()) == "" {
			continue
		}
		name := filepath.Join(f.dir, e.Name())
		data, err := os.ReadFile(name)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		out[name] = parseCounts(data)
	}
	return out, errors.Join(errs...)
}

// ownerOf is the owner of the zone's file name (a path or a base name), or
// "" when it is no file of the zone's.
func (f hostFiles) ownerOf(name string) string {
	mid, ok := strings.CutSuffix(filepath.Base(name), ".counts")
	if !ok {
		return ""
	}
	owner, ok := strings.CutPrefix(mid, f.zone+".")
	if !ok || strings.Contains(owner, ".") {
		return ""
	}
	return owner
}

// removeFiles removes the named files; one already gone is no error, and
// one that cannot be removed is left for a later start.
func removeFiles(names []string) {
	for _, name := range names {
		_ = os.Remove(name)
	}
}

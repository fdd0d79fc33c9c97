package mcplimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"path"
	"strconv"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// Quota counts made locally during a Redis outage that could not be pushed
// by shutdown are kept in Caddy storage, one object per shutdown under
// <prefix>/redis-pending/, and taken back by the next start of any
// instance of the zone, which pushes them once Redis answers: a restart
// during an outage loses none of them.

// redisPendingDir returns the storage folder of zone's saved counts.
func redisPendingDir(zone string) string { return path.Join(storagePrefix(zone), "redis-pending") }

// saveRedisPending stores r's pending counts, if any, in a new object.
func (z *zone) saveRedisPending(ctx context.Context, r *zoneRedis) error {
	batch := r.take()
	if len(batch) == 0 {
		return nil
	}
	b := pendingLines(batch)
	var id [8]byte
	_, _ = rand.Read(id[:])
	name := path.Join(redisPendingDir(z.name), strconv.FormatInt(time.Now().UnixNano(), 10)+"-"+hex.EncodeToString(id[:]))
	if err := z.storage.Store(ctx, name, b); err != nil {
		r.putBack(batch)
		return err
	}
	return nil
}

// loadRedisPending takes every saved object back into r's pending counts.
// Each object is loaded and deleted under its storage lock, so that one
// instance alone takes it.
func (z *zone) loadRedisPending(ctx context.Context, r *zoneRedis) error {
	names, err := z.storage.List(ctx, redisPendingDir(z.name), false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := z.storage.Lock(ctx, name); err != nil {
			return err
		}
		data, err := z.storage.Load(ctx, name)
		if err == nil {
			err = z.storage.Delete(ctx, name)
		}
		if err == nil {
			r.addCounts(parseCounts(data))
		}
		_ = z.storage.Unlock(ctx, name)
		if err != nil && !errors.Is(err, fs.ErrNotExist) { // another instance took it
			return err
		}
	}
	return nil
}

// pendingLines writes pending counts as count lines.
func pendingLines(pending map[deltaKey]int64) []byte {
	var b []byte
	for k, n := range pending {
		b = appendCountLine(b, quota.Count{Key: k.key, Period: k.period, Start: time.Unix(k.start, 0).UTC(), N: n})
	}
	return b
}

// addCounts adds counts read back to r's pending counts.
func (r *zoneRedis) addCounts(cs []quota.Count) {
	r = r.lockLive()
	defer r.mu.Unlock()
	for _, c := range cs {
		r.add(deltaKey{key: c.Key, period: c.Period, start: c.Start.Unix()}, c.N)
	}
}

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
// instance alone takes it. While Redis answers (push), its counts are
// pushed before it is deleted: another instance that starts meanwhile
// raises Redis to the counts storage holds, which hold the outage's too
// (see seedable), and must find them either still saved in storage, for
// it to wait for them, or in Redis already, never in between.
func (z *zone) loadRedisPending(ctx context.Context, r *zoneRedis, push bool) error {
	names, err := z.storage.List(ctx, redisPendingDir(z.name), false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := z.pendingLocks.Release(ctx, z.storage, z.pendingWait); err != nil {
		return err
	}
	for _, name := range names {
		// A lock held at every try for long is broken (quota.Locks.Lock).
		if err := z.pendingLocks.Lock(ctx, z.storage, name, z.pendingWait, time.Now()); err != nil {
			return err
		}
		err := z.takePending(ctx, r, name, &push)
		// An Unlock that fails is retried by the next load (Release).
		_ = z.pendingLocks.Unlock(ctx, z.storage, name, z.pendingWait)
		if err != nil && !errors.Is(err, fs.ErrNotExist) { // another instance took it
			return err
		}
	}
	return nil
}

// takeSavedRedisPending has a zone that gains store r on reload push the
// counts stops saved in storage for Redis (as a start with the store
// does) before it raises Redis: when storage holds some, r decides
// locally (degraded) until its probe has pushed them and raised Redis;
// when storage cannot tell, the next flush that finds storage answering
// reads them (readRedisPendingAgain), and the seed waits for them. Read
// here, they would race the run loop's reads.
func (z *zone) takeSavedRedisPending(ctx context.Context, r *zoneRedis) {
	names, err := z.storage.List(ctx, redisPendingDir(z.name), false)
	switch {
	case errors.Is(err, fs.ErrNotExist) || err == nil && len(names) == 0:
	case err != nil:
		z.redisPendingUnread.Store(true)
	default:
		z.redisPendingUnread.Store(true)
		r.degraded.Store(true)
	}
}

// takePending takes the saved object name into r, under its lock, and
// deletes it; *push says Redis answers, and becomes false once a push
// fails. Counts left pending (Redis unreachable, or a failed push) are
// written to the host's copy before the deletion, so that a crash right
// after it finds them there. Counts pushed or kept before the deletion
// failed are not taken again when it is tried again.
func (z *zone) takePending(ctx context.Context, r *zoneRedis, name string, push *bool) error {
	if !z.pendingTaken[name] {
		data, err := z.storage.Load(ctx, name)
		if err != nil {
			return err
		}
		r.addCounts(parseCounts(data))
		if *push && z.pushRedis(ctx, r) != nil {
			*push = false // left pending, for the run loop to push once Redis answers
		}
		if !*push {
			z.mirrorRedisPending(r)
		}
		z.pendingTaken[name] = true
	}
	if err := z.storage.Delete(ctx, name); err != nil {
		return err
	}
	delete(z.pendingTaken, name)
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

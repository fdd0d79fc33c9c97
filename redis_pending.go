package mcplimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
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
	var b []byte
	for k, n := range batch {
		b = fmt.Appendf(b, "%s %d %d %d\n", k.key, k.period, k.start, n)
	}
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
			r.mu.Lock()
			for line := range strings.Lines(string(data)) {
				if k, n, ok := parsePendingLine(line); ok {
					r.add(k, n)
				}
			}
			r.mu.Unlock()
		}
		_ = z.storage.Unlock(ctx, name)
		if err != nil && !errors.Is(err, fs.ErrNotExist) { // another instance took it
			return err
		}
	}
	return nil
}

// parsePendingLine parses one "<key> <period> <start> <n>" line.
func parsePendingLine(line string) (deltaKey, int64, bool) {
	f := strings.Fields(line)
	if len(f) != 4 {
		return deltaKey{}, 0, false
	}
	p, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseInt(f[2], 10, 64)
	n, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || !quota.Period(p).Valid() {
		return deltaKey{}, 0, false
	}
	return deltaKey{key: f[0], period: quota.Period(p), start: start}, n, true
}

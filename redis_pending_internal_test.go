package mcplimit

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/lockfile"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// deleteFails is a storage whose Delete fails while fail is set, and
// its Unlock too when unlock is set (the lock then stays held and fresh).
type deleteFails struct {
	certmagic.Storage
	fail   atomic.Bool
	unlock bool
}

func (s *deleteFails) Unlock(ctx context.Context, name string) error {
	if s.unlock && s.fail.Load() {
		return errors.New("unlock refused")
	}
	return s.Storage.Unlock(ctx, name)
}

func (s *deleteFails) Delete(ctx context.Context, key string) error {
	if s.fail.Load() {
		return errors.New("delete refused")
	}
	return s.Storage.Delete(ctx, key)
}

// Counts an outage saved in storage are pushed by the start that takes
// them before their object is removed; while it cannot be removed, each
// later try removes it and pushes nothing again.
func TestSavedOutageCountsArePushedOnceWhileTheirRemovalFails(t *testing.T) {
	for _, unlock := range []bool{false, true} {
		name := "redis-pending-undeletable"
		if unlock {
			name = "redis-pending-unlockable"
		}
		t.Run(name, func(t *testing.T) { savedCountsPushedOnce(t, name, unlock) })
	}
}

// savedCountsPushedOnce is TestSavedOutageCountsArePushedOnceWhileTheirRemovalFails
// on zone; with unlock, the object's Unlock fails along with its removal,
// and each later try releases its lock first instead of waiting on it.
func savedCountsPushedOnce(t *testing.T, zone string, unlock bool) {
	h := onRedis(t, &Handler{Zone: zone, Quota: &QuotaLimit{Day: 100}})
	z, r := h.zone, h.zone.redis.Load()
	st := &deleteFails{Storage: *z.storage.cur.Load(), unlock: unlock}
	z.storage.set(st)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	now := time.Now()
	name := saveOutageCounts(t, z, now)
	used := func() int64 {
		t.Helper()
		n, err := r.store.Used(ctx, "i/saved", quota.Day, now)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	st.fail.Store(true)
	for range 2 {
		if err := z.loadRedisPending(ctx, r, true); err == nil {
			t.Fatal("taking the saved counts succeeded though their object could not be removed")
		}
		if n := used(); n != 2 {
			t.Fatalf("Redis holds %d, want the 2 saved, pushed once", n)
		}
	}
	st.fail.Store(false)
	if err := z.loadRedisPending(ctx, r, true); err != nil {
		t.Fatal(err)
	}
	if n, pending := used(), r.pendingLen(); n != 2 || pending != 0 || st.Exists(ctx, name) {
		t.Fatalf("Redis holds %d with %d pending, object left: %v; want 2, none, removed", n, pending, st.Exists(ctx, name))
	}
}

// deleteWatched is a storage that calls deleting before each Delete.
type deleteWatched struct {
	certmagic.Storage
	deleting func(key string)
}

func (s *deleteWatched) Delete(ctx context.Context, key string) error {
	s.deleting(key)
	return s.Storage.Delete(ctx, key)
}

// Counts an outage saved in storage, taken by a start while Redis is
// still unreachable, are in the host's copy before their object leaves
// storage: a crash of that process right after its start loses none.
func TestSavedOutageCountsReachTheHostBeforeStorageLetsGo(t *testing.T) {
	h := onRedis(t, &Handler{Zone: "redis-pending-host-first", Quota: &QuotaLimit{Day: 100}})
	z, r := h.zone, h.zone.redis.Load()
	t.Cleanup(func() { _ = os.Remove(z.redisHost.path()) })
	now := time.Now()
	name := saveOutageCounts(t, z, now)
	var onHost []quota.Count
	deleted := false
	z.storage.set(&deleteWatched{Storage: *z.storage.cur.Load(), deleting: func(key string) {
		if key == name {
			deleted = true
			onHost, _ = readCounts(z.redisHost.path())
		}
	}})
	if err := z.loadRedisPending(context.Background(), r, false); err != nil {
		t.Fatal(err)
	}
	if !deleted || len(onHost) != 1 || onHost[0].Key != "i/saved" || onHost[0].N != 2 {
		t.Fatalf("when the saved object was deleted (%v) the host's copy held %v; want the 2 saved counts", deleted, onHost)
	}
}

// A saved object's lock that certmagic keeps fresh forever (a crashed
// instance's, which another's refresher of an earlier lock found) is
// broken once every try has found it held for six lock waits running, as
// the quota's are, and the counts behind it are pushed.
func TestSavedOutageCountsBehindALockKeptFreshAreTaken(t *testing.T) {
	h := onRedis(t, &Handler{Zone: "redis-pending-fresh-lock", Quota: &QuotaLimit{Day: 100}, FlushInterval: caddy.Duration(time.Second)})
	z, r := h.zone, h.zone.redis.Load()
	fsys, ok := (*z.storage.cur.Load()).(*certmagic.FileStorage)
	if !ok {
		t.Fatalf("storage %T, want file-system storage", *z.storage.cur.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	now := time.Now()
	name := saveOutageCounts(t, z, now)
	lockfile.KeepFresh(t, filepath.Join(fsys.Path, "locks", certmagic.StorageKeys.Safe(name)+".lock"))
	for z.loadRedisPending(ctx, r, true) != nil {
		if ctx.Err() != nil {
			t.Fatal("the saved counts were not taken: their lock, kept fresh, was never broken")
		}
	}
	if n, err := r.store.Used(ctx, "i/saved", quota.Day, now); err != nil || n != 2 {
		t.Fatalf("Redis holds %d (%v), want the 2 saved", n, err)
	}
}

// saveOutageCounts saves in z's storage, as a stop during a Redis outage
// does, 2 counts of key i/saved for today, and returns the object's name.
func saveOutageCounts(t *testing.T, z *zone, now time.Time) string {
	t.Helper()
	name := path.Join(redisPendingDir(z.name), "1-saved")
	line := appendCountLine(nil, quota.Count{Key: "i/saved", Period: quota.Day, Start: quota.Day.Start(now), N: 2})
	if err := z.storage.Store(context.Background(), name, line); err != nil {
		t.Fatal(err)
	}
	return name
}

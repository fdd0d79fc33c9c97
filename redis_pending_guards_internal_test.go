package mcplimit

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// A stop with no counts pending saves nothing: an empty object left in
// storage would have the next zone that gains the store decide locally
// (degraded) until its probe had taken it.
func TestNothingPendingSavesNoObject(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	z := provisionForTest(t, &Handler{Zone: "redis-guard-save-none"}).zone
	r := &zoneRedis{redisCounters: z.counters(), pending: map[deltaKey]int64{}}
	if err := z.saveRedisPending(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	names, err := z.storage.List(context.Background(), redisPendingDir(z.name), false)
	if err != nil && !errors.Is(err, fs.ErrNotExist) || len(names) != 0 {
		t.Fatalf("storage holds %v (%v) after saving no counts, want nothing", names, err)
	}
	r2 := &zoneRedis{redisCounters: z.counters(), pending: map[deltaKey]int64{}}
	z.takeSavedRedisPending(context.Background(), r2)
	if r2.degraded.Load() || z.redisPendingUnread.Load() {
		t.Fatal("a store gained after a stop that saved nothing starts degraded")
	}
}

// listGhost lists, before the objects storage holds, one that another
// instance took (loaded and deleted) since.
type listGhost struct{ certmagic.Storage }

func (s *listGhost) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	names, err := s.Storage.List(ctx, prefix, recursive)
	return append([]string{path.Join(prefix, "0-taken-by-another")}, names...), err
}

// An object another instance took between the list and its load is
// passed over: the objects after it are still taken.
func TestSavedOutageCountsTakenByAnotherArePassedOver(t *testing.T) {
	awayFromMidnight(t)
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	z := provisionForTest(t, &Handler{Zone: "redis-guard-load-ghost", Quota: &QuotaLimit{Day: 10}}).zone
	r := &zoneRedis{redisCounters: z.counters(), pending: map[deltaKey]int64{}}
	r.record([]quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 2}}, time.Now(), 1)
	if err := z.saveRedisPending(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	z.storage.set(&listGhost{Storage: *z.storage.cur.Load()})
	r2 := &zoneRedis{redisCounters: z.counters(), pending: map[deltaKey]int64{}}
	if err := z.loadRedisPending(context.Background(), r2, false); err != nil {
		t.Fatalf("loading the saved counts: %v, want the object another took passed over", err)
	}
	if n := r2.pendingLen(); n != 1 {
		t.Fatalf("%d counts taken back, want the 1 saved", n)
	}
}

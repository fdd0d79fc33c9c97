package mcplimit

import (
	"context"
	"errors"
	"path"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// deleteFails is a storage whose Delete fails while fail is set.
type deleteFails struct {
	certmagic.Storage
	fail atomic.Bool
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
	h := onRedis(t, &Handler{Zone: "redis-pending-undeletable", Quota: &QuotaLimit{Day: 100}})
	z, r := h.zone, h.zone.redis.Load()
	st := &deleteFails{Storage: *z.storage.cur.Load()}
	z.storage.set(st)
	ctx := context.Background()
	now := time.Now()
	name := path.Join(redisPendingDir(z.name), "1-saved")
	line := appendCountLine(nil, quota.Count{Key: "i/saved", Period: quota.Day, Start: quota.Day.Start(now), N: 2})
	if err := z.storage.Store(ctx, name, line); err != nil {
		t.Fatal(err)
	}
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

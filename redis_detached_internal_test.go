package mcplimit

import (
	"encoding/hex"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// At each flush, the counts a zone without a store keeps for Redis lose
// those of periods that have ended, and the host's copy (read by the next
// process after a crash) holds the others.
func TestDetachedCountsDropEndedPeriodsAndAreCopiedToTheHost(t *testing.T) {
	now := time.Now()
	if now.Sub(quota.Day.Start(now)) < time.Minute {
		t.Skip("too close to 00:00 UTC")
	}
	z := &zone{
		name:      "detached",
		redisHost: hostFiles{dir: t.TempDir(), zone: hex.EncodeToString([]byte("detached")), owner: newOwner()},
	}
	z.logger.Store(zap.NewNop())
	dt := &zoneRedis{bound: quota.New(quota.Config{}), pending: map[deltaKey]int64{}}
	z.detached.Store(dt)
	dt.record([]quota.Item{{Key: []byte("i/today"), Period: quota.Day, N: 2}}, now, 1)
	dt.record([]quota.Item{{Key: []byte("i/yesterday"), Period: quota.Day, N: 3}}, now.AddDate(0, 0, -1), 1)
	z.detachedTick(now)
	today := deltaKey{key: "i/today", period: quota.Day, start: quota.Day.Start(now).Unix()}
	if dt.pendingLen() != 1 || dt.pending[today] != 2 {
		t.Fatalf("kept %v, want today's 2 only", dt.pending)
	}
	data, err := os.ReadFile(z.redisHost.path())
	if err != nil {
		t.Fatal(err)
	}
	if cs := parseCounts(data); len(cs) != 1 || cs[0].Key != "i/today" || cs[0].N != 2 {
		t.Fatalf("host copy %q, want today's 2 only", data)
	}
}

// While storage fails, the counts bound for Redis stay pending and the
// failure is logged once, not at every flush.
func TestBoundCountsLogAStorageFailureOnce(t *testing.T) {
	z, logs := zoneOnUnreadableStorage(t, "bound-outage")
	now := time.Now()
	for range 3 {
		z.redisBound.Add([]quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 1}}, now)
		z.flushRedisBound(t.Context())
	}
	if n := len(logs.FilterMessageSnippet("counts kept for redis cannot be marked").All()); n != 1 {
		t.Fatalf("%d log lines for three failed flushes of the counts bound for redis, want 1", n)
	}
	if z.redisBound.State().Pending == 0 {
		t.Fatal("the counts bound for redis were dropped by a failed flush")
	}
}

package mcplimit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	dto "github.com/prometheus/client_model/go"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// A push that carried a taken-back call (a negative count) to Redis takes
// it out of the counts bound for Redis as it does a call (the take-back
// had lowered them below what storage marks), and tells the zone's counts
// that Redis holds it: the take-back counted since Redis's report is no
// longer left out.
func TestPushOfATakenBackCallUnbindsIt(t *testing.T) {
	awayFromMidnight(t)
	r := &zoneRedis{redisCounters: freshCounters(), pending: map[deltaKey]int64{}}
	now := time.Now()
	item := []quota.Item{{Key: []byte("i/a"), Period: quota.Day, N: 1}}
	r.bound.Add(item, now)
	r.unbind(&pushBatch{counts: map[deltaKey]int64{{key: "i/a", period: quota.Day, start: quota.Day.Start(now).Unix()}: 1}})
	r.bound.Refund(item, now) // the call pushed, then taken back during an outage
	r.counts.ObserveReported([]quota.Count{{Key: "i/a", Period: quota.Day, Start: quota.Day.Start(now), N: 5, Kept: -1}}, now)
	r.unbind(&pushBatch{counts: map[deltaKey]int64{{key: "i/a", period: quota.Day, start: quota.Day.Start(now).Unix()}: -1}})
	if n := r.bound.Used([]byte("i/a"), quota.Day, time.Now()); n != 0 {
		t.Errorf("bound for Redis after the take-back was pushed: %d, want 0", n)
	}
	if st := r.bound.State(); st.Pending != 0 {
		t.Errorf("bound counts to flush after the take-back was pushed: %d, want none", st.Pending)
	}
	for _, c := range r.counts.Observed(time.Now()) {
		if c.Key == "i/a" && c.Kept != 0 {
			t.Errorf("take-backs counted since Redis's report after one was pushed: %d, want 0", c.Kept)
		}
	}
}

// A seed reads the counts bound for Redis as storage holds them now:
// calls another instance counted for Redis (and pushes there itself),
// which reached storage after this zone last read it, are left out too.
func TestSeedReadsTheCountsOthersBoundForRedis(t *testing.T) {
	awayFromMidnight(t)
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // host copies of its own, none an earlier run left
	const zone = "redis-guard-seed-others"
	z := provisionForTest(t, &Handler{Zone: zone, Quota: &QuotaLimit{Day: 10}}).zone
	now := time.Now()
	other := quota.New(quota.Config{Storage: z.storage, Prefix: redisBoundPrefix(zone), Clock: time.Now})
	item := []quota.Item{{Key: []byte("i/other"), Period: quota.Day, N: 2}}
	other.Add(item, now)
	if err := other.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	z.quota.Add(item, now) // storage's totals hold the other instance's calls too
	for _, c := range z.seedCounts(t.Context(), now) {
		if c.Period == quota.Day && c.Key == "i/other" && c.N != 0 {
			t.Fatalf("the seed raises i/other to %d, want 0: the other instance pushes its calls itself", c.N)
		}
	}
}

// boundRefusingStorage refuses every write of the counts bound for Redis,
// and takes the rest.
type boundRefusingStorage struct{ certmagic.Storage }

func (s boundRefusingStorage) Store(ctx context.Context, key string, value []byte) error {
	if strings.Contains(key, "redis-bound") {
		return errors.New("storage refuses the counts bound for redis")
	}
	return s.Storage.Store(ctx, key, value)
}

// The degraded gauge follows the storage of the counts bound for Redis:
// 1 from the flush that could not write them, 0 once one did.
func TestDegradedGaugeFollowsTheCountsBoundForRedis(t *testing.T) {
	awayFromMidnight(t)
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	z := provisionForTest(t, &Handler{Zone: "redis-guard-bound-gauge", Quota: &QuotaLimit{Day: 10}}).zone
	gauge := func() float64 {
		var m dto.Metric
		if err := z.metrics.degraded.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetGauge().GetValue()
	}
	healthy := z.storage.get()
	z.storage.set(boundRefusingStorage{healthy})
	z.redisBound.Add([]quota.Item{{Key: []byte("i/bound"), Period: quota.Day, N: 1}}, time.Now())
	if err := z.flushRedisBound(t.Context()); err == nil {
		t.Fatal("a flush of the counts bound for redis that storage refuses succeeded")
	}
	if g := gauge(); g != 1 {
		t.Fatalf("degraded gauge %v after the counts bound for redis could not be written, want 1", g)
	}
	z.storage.set(healthy)
	if err := z.flushRedisBound(t.Context()); err != nil {
		t.Fatal(err)
	}
	if g := gauge(); g != 0 {
		t.Fatalf("degraded gauge %v once the counts bound for redis were written, want 0", g)
	}
}

// boundCountingStorage counts the reads and writes of the counts bound
// for Redis.
type boundCountingStorage struct {
	certmagic.Storage
	n *int
}

func (s boundCountingStorage) count(key string) {
	if strings.Contains(key, "redis-bound") {
		*s.n++
	}
}

func (s boundCountingStorage) Store(ctx context.Context, key string, value []byte) error {
	s.count(key)
	return s.Storage.Store(ctx, key, value)
}

func (s boundCountingStorage) Load(ctx context.Context, key string) ([]byte, error) {
	s.count(key)
	return s.Storage.Load(ctx, key)
}

func (s boundCountingStorage) List(ctx context.Context, path string, recursive bool) ([]string, error) {
	s.count(path)
	return s.Storage.List(ctx, path, recursive)
}

func (s boundCountingStorage) Lock(ctx context.Context, name string) error {
	s.count(name)
	return s.Storage.Lock(ctx, name)
}

func (s boundCountingStorage) Delete(ctx context.Context, key string) error {
	s.count(key)
	return s.Storage.Delete(ctx, key)
}

// A flush of the counts bound for Redis without any, none having failed
// before, costs no storage access: every zone's flush runs it.
func TestFlushWithoutCountsBoundForRedisTouchesNoStorage(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	z := provisionForTest(t, &Handler{Zone: "redis-guard-bound-idle", Quota: &QuotaLimit{Day: 10}}).zone
	var n int
	z.storage.set(boundCountingStorage{z.storage.get(), &n})
	if err := z.flushRedisBound(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d storage accesses of the counts bound for redis by a flush without any, want none", n)
	}
}
